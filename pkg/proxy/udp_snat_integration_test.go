package proxy

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	goruntime "runtime"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/conntrack"
	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
	"github.com/antrea-proxy/antrea-proxy/test/lab"
)

// The external-SNAT lab: "ext" plays the host gateway (its OpenFlow port is the proxier's
// GatewayOFPort), forwarding an external client's packets into OVS with their real source;
// "ep1" is the endpoint. A UDP Service's endpoint is ep1's own address; a TCP Service's endpoint,
// silentIP, is delivered to ep1's interface but not assigned there, so ep1 never answers and the
// client's kernel retransmits its SYN.
const (
	snatVIP    = "169.254.0.253"
	snatNodeIP = "192.168.77.10"
	extIP      = "10.10.0.10"
	ep1IP      = "10.10.0.11"
	silentIP   = "10.10.0.13"
)

type snatLab struct {
	*lab.Lab
	ext, ep1 *lab.Host
}

func startSNATLab(t *testing.T) *snatLab {
	t.Helper()
	l := lab.New(t)
	sl := &snatLab{Lab: l, ext: l.AddHost(t, "ext", extIP), ep1: l.AddHost(t, "ep1", ep1IP)}
	if out, err := sl.ep1.NS.Exec("sysctl", "-qw", "net.ipv4.ip_forward=0"); err != nil {
		t.Fatalf("ep1: turning forwarding off: %v: %s", err, out)
	}
	toEP1 := of.Flow{Table: pipeline.TableL3Forwarding, Priority: 200,
		Match:   of.Match{EthType: of.EthTypeIP, Dst: netip.MustParsePrefix(silentIP + "/32")},
		Actions: []of.Action{of.SetEthDst{MAC: sl.ep1.Veth.MAC}, of.Output{Port: sl.ep1.Veth.OFPort}}}
	if err := l.OF.Apply(context.Background(), []of.Op{{Kind: of.AddFlow, Flow: &toEP1}}); err != nil {
		t.Fatal(err)
	}
	dns := makeService("default", "dns", "10.96.0.53", withPorts(v1.ServicePort{Name: "dns", Port: 53,
		Protocol: v1.ProtocolUDP, TargetPort: intstr.FromInt32(5353)}), withNodePort(30053))
	web := makeService("default", "web", "10.96.0.80", withNodePort(30080))
	cs := fake.NewSimpleClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: snatNodeIP}}}},
		dns, makeSlice("default", "dns", "dns-1", 5353, v1.ProtocolUDP, "dns", ep{ip: ep1IP, node: testNode, ready: true}),
		web, makeSlice("default", "web", "web-1", 8080, v1.ProtocolTCP, "http", ep{ip: silentIP, node: testNode, ready: true}))
	p, err := New(Options{NodeName: testNode, Round: 1, GatewayOFPort: sl.ext.Veth.OFPort,
		GatewayIPv4: netip.MustParseAddr(snatVIP), MinSyncInterval: 100 * time.Millisecond, FullSyncPeriod: time.Minute, Conntrack: &conntrack.Table{RunDir: l.OVS.RunDir}}, l.OF)
	if err != nil {
		t.Fatal(err)
	}
	ctx := runUntilCleanup(t, p, cs)
	waitFor(t, 20*time.Second, "the Services to be installed", func() bool { return len(p.Services()) == 2 })
	// The sync that installed the UDP Service's first endpoint flushes, after its flows are in,
	// the conntrack entries of clients that tried the port before. A sync of our own waits for
	// that one to finish (syncs are serialized), so that it cannot flush the test's connection.
	if err := p.SyncNow(ctx, false); err != nil {
		t.Fatal(err)
	}
	return sl
}

// logDatapath logs what the userspace datapath holds: its conntrack entries (zones 65520 and
// 65521) and its megaflows, whose ct_state matches are the states conntrack really reported.
func (sl *snatLab) logDatapath(t *testing.T, when string) {
	t.Helper()
	ct, _ := sl.OVS.Appctl("dpctl/dump-conntrack", "-m")
	dp, _ := sl.OVS.Appctl("dpctl/dump-flows")
	t.Logf("%s: conntrack:\n%s\ndatapath flows:\n%s", when, ct, dp)
}

// TestIntegrationExternalUDPSNATBeforeReply: an external client's datagrams to a NodePort
// (externalTrafficPolicy Cluster) all reach the endpoint from the Service virtual IP, also those
// sent before the endpoint answered (the userspace conntrack reports the second one +new, not
// +est); the endpoint's reply returns to the client from the NodePort.
func TestIntegrationExternalUDPSNATBeforeReply(t *testing.T) {
	sl := startSNATLab(t)
	server := udpSocketIn(t, sl.ep1.NS.Name, ep1IP+":5353")
	client := udpSocketIn(t, sl.ext.NS.Name, extIP+":40053")
	nodePort := &net.UDPAddr{IP: net.ParseIP(snatNodeIP), Port: 30053}

	recv := func(what string) *net.UDPAddr {
		t.Helper()
		_ = server.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 64)
		n, from, err := server.ReadFromUDP(buf)
		if err != nil {
			t.Fatalf("%s: the endpoint received nothing: %v\nflows:\n%s", what, err, sl.Flows())
		}
		t.Logf("%s: the endpoint got %q from %s", what, buf[:n], from)
		return from
	}
	send := func(msg string) {
		t.Helper()
		if _, err := client.WriteToUDP([]byte(msg), nodePort); err != nil {
			t.Fatal(err)
		}
	}
	// Both datagrams leave before the endpoint reads either: nothing has come back yet.
	send("first")
	send("second")
	first, second := recv("first datagram"), recv("second datagram")
	sl.logDatapath(t, "after two datagrams, before any reply")
	for i, from := range []*net.UDPAddr{first, second} {
		if from.IP.String() != snatVIP || from.Port != 40053 {
			t.Errorf("datagram %d reached the endpoint from %s, want %s:40053 (SNATed to the Service virtual IP)", i+1, from, snatVIP)
		}
	}

	if _, err := server.WriteToUDP([]byte("answer"), first); err != nil {
		t.Fatal(err)
	}
	_ = client.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64)
	n, from, err := client.ReadFromUDP(buf)
	if err != nil || string(buf[:n]) != "answer" || from.String() != nodePort.String() {
		t.Fatalf("the client got %q from %v (%v), want \"answer\" from %s", buf[:n], from, err, nodePort)
	}
	send("third")
	if third := recv("datagram after the reply"); third.IP.String() != snatVIP {
		t.Errorf("the datagram after the reply reached the endpoint from %s, want %s", third, snatVIP)
	}
}

// TestIntegrationExternalTCPSYNRetransmitSNAT: a retransmitted SYN of an external connection to
// a NodePort that the endpoint has not answered reaches the endpoint SNATed like the first one.
func TestIntegrationExternalTCPSYNRetransmitSNAT(t *testing.T) {
	sl := startSNATLab(t)
	capture := packetCaptureIn(t, sl.ep1.NS.Name, sl.ep1.Veth.IfName)
	dialed := make(chan error, 1)
	go func() {
		// No SYN-ACK ever comes: the kernel retransmits the SYN after 1 s, then the dial times out.
		dialed <- inNetNS(sl.ext.NS.Name, func() error {
			d := net.Dialer{Timeout: 2500 * time.Millisecond, LocalAddr: &net.TCPAddr{IP: net.ParseIP(extIP), Port: 40080}}
			c, err := d.Dial("tcp", snatNodeIP+":30080")
			if err == nil {
				c.Close()
				return fmt.Errorf("the silent endpoint answered")
			}
			return nil
		})
	}()
	syns := capture.syns(t, 8080, 2, 5*time.Second)
	if err := <-dialed; err != nil {
		t.Fatal(err)
	}
	sl.logDatapath(t, "after the retransmitted SYN")
	if len(syns) < 2 {
		t.Fatalf("want the SYN and its retransmission at the endpoint, got %d SYNs from %v\nflows:\n%s", len(syns), syns, sl.Flows())
	}
	for i, src := range syns {
		if src != netip.AddrPortFrom(netip.MustParseAddr(snatVIP), 40080) {
			t.Errorf("SYN %d reached the endpoint from %s, want %s:40080 (SNATed to the Service virtual IP)", i+1, src, snatVIP)
		}
	}
}

// inNetNS runs fn on an OS thread switched into the named network namespace; sockets fn creates
// stay in that namespace.
func inNetNS(nsName string, fn func() error) error {
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		return err
	}
	defer orig.Close()
	target, err := netns.GetFromName(nsName)
	if err != nil {
		return err
	}
	defer target.Close()
	if err := netns.Set(target); err != nil {
		return err
	}
	defer func() { _ = netns.Set(orig) }()
	return fn()
}

// packetCapture is an AF_PACKET socket receiving the IPv4 packets that arrive on one interface.
type packetCapture struct{ fd int }

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func packetCaptureIn(t *testing.T, nsName, ifName string) *packetCapture {
	t.Helper()
	c := &packetCapture{fd: -1}
	err := inNetNS(nsName, func() error {
		ifi, err := net.InterfaceByName(ifName)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_IP)))
		if err != nil {
			return err
		}
		c.fd = fd
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_IP), Ifindex: ifi.Index}); err != nil {
			return err
		}
		return unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 100000})
	})
	if c.fd >= 0 {
		t.Cleanup(func() { unix.Close(c.fd) })
	}
	if err != nil {
		t.Fatalf("packet capture on %s/%s: %v", nsName, ifName, err)
	}
	return c
}

// syns returns the sources of the incoming TCP SYNs (without ACK) to dstPort, once n have been
// seen or at the deadline.
func (c *packetCapture) syns(t *testing.T, dstPort uint16, n int, d time.Duration) []netip.AddrPort {
	t.Helper()
	var out []netip.AddrPort
	buf := make([]byte, 2048)
	for deadline := time.Now().Add(d); len(out) < n && time.Now().Before(deadline); {
		m, from, err := unix.Recvfrom(c.fd, buf, 0)
		if err == unix.EAGAIN || err == unix.EINTR {
			continue
		}
		if err != nil {
			t.Fatalf("packet capture: %v", err)
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		p := buf[:m]
		if len(p) < 20 || p[0]>>4 != 4 || p[9] != unix.IPPROTO_TCP {
			continue
		}
		ihl := int(p[0]&0x0f) * 4
		if len(p) < ihl+14 {
			continue
		}
		tcp := p[ihl:]
		flags := tcp[13]
		if binary.BigEndian.Uint16(tcp[2:4]) != dstPort || flags&0x02 == 0 || flags&0x10 != 0 {
			continue
		}
		src := netip.AddrPortFrom(netip.AddrFrom4([4]byte(p[12:16])), binary.BigEndian.Uint16(tcp[0:2]))
		t.Logf("the endpoint got a SYN from %s", src)
		out = append(out, src)
	}
	return out
}

// TestIntegrationHairpinUDPBeforeReply: a pod sending two datagrams to its own UDP Service
// before answering either gets both from the hairpin address (a datagram from its own address
// would be dropped by its kernel as a martian).
func TestIntegrationHairpinUDPBeforeReply(t *testing.T) {
	l := lab.New(t)
	pod := l.AddHost(t, "pod1", ep1IP)
	podFlows := pipeline.PodFlows(1, nil, pipeline.Pod{ID: 1, OFPort: pod.Veth.OFPort, MAC: pod.Veth.MAC,
		IPs: []netip.Addr{netip.MustParseAddr(pod.IP)}})
	var ops []of.Op
	for i := range podFlows {
		ops = append(ops, of.Op{Kind: of.AddFlow, Flow: &podFlows[i]})
	}
	if err := l.OF.Apply(context.Background(), ops); err != nil {
		t.Fatal(err)
	}
	svc := makeService("default", "self", "10.96.0.54", withPorts(v1.ServicePort{Name: "dns", Port: 53,
		Protocol: v1.ProtocolUDP, TargetPort: intstr.FromInt32(5353)}))
	cs := fake.NewSimpleClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode}}, svc,
		makeSlice("default", "self", "self-1", 5353, v1.ProtocolUDP, "dns", ep{ip: pod.IP, node: testNode, ready: true}))
	p, err := New(Options{NodeName: testNode, Round: 1, MinSyncInterval: 100 * time.Millisecond, FullSyncPeriod: time.Minute, Conntrack: &conntrack.Table{RunDir: l.OVS.RunDir}}, l.OF)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, cs) }()
	defer func() { cancel(); <-done }()
	waitFor(t, 20*time.Second, "the Service to be installed", func() bool { return len(p.Services()) == 1 })
	if err := p.SyncNow(ctx, false); err != nil { // waits for the first sync's conntrack flush
		t.Fatal(err)
	}
	server := udpSocketIn(t, pod.NS.Name, pod.IP+":5353")
	client := udpSocketIn(t, pod.NS.Name, pod.IP+":40054")
	for _, msg := range []string{"first", "second"} {
		if _, err := client.WriteToUDP([]byte(msg), &net.UDPAddr{IP: net.ParseIP("10.96.0.54"), Port: 53}); err != nil {
			t.Fatal(err)
		}
	}
	for _, msg := range []string{"first", "second"} {
		_ = server.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 64)
		n, from, err := server.ReadFromUDP(buf)
		if err != nil {
			t.Fatalf("datagram %q never reached the pod: %v\nflows:\n%s", msg, err, l.Flows())
		}
		if string(buf[:n]) != msg || from.IP.String() != pipeline.HairpinIPv4.String() {
			t.Errorf("want %q from %s, got %q from %s", msg, pipeline.HairpinIPv4, buf[:n], from)
		}
	}
}
