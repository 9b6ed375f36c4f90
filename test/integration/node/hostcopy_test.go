package node

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/antrea-proxy/antrea-proxy/test/ovssandbox"
)

// TestIntegrationPodToLBIPNotThroughHost: a pod's connection to a programmed LB IP is
// load-balanced by OVS from the pod's port only, never as an external connection through the
// gateway.
//
// With OVS's userspace datapath the host's IP stack sees every frame on a pod's veth. Were the
// host to answer the pod's ARP request for its gateway on the veth, the pod would address its
// frames to the host too, and the host would forward a copy of each packet for the LB IP back
// into OVS through the gateway (its policy route for a programmed LB IP's port), where it would
// be taken for an external connection and SNATed. So:
//   - the pod learns the gateway's MAC, not its veth's, and the host does not answer ARP on
//     pods' veths (arp_ignore=1);
//   - a packet with a local pod's source that the host forwards into the gateway anyway (sent
//     here, deterministically, from a namespace behind another host interface that borrows the
//     pod's address) is dropped by OVS: it never reaches a backend and leaves no SNAT in
//     conntrack;
//   - the pod's own connections keep its address.
func TestIntegrationPodToLBIPNotThroughHost(t *testing.T) {
	t.Parallel()
	const lbIP = "172.18.0.100"
	w := newWorld(t, makeNode("n1", "10.20.0.0/24", underlay+".1"))
	n := w.addNode("n1", 1)
	p1, p2 := n.addPod("p1"), n.addPod("p2")
	w.echo.Start(t, p2.ns, "p2", 8080)
	w.addService(svcSpec{name: "web", clusterIP: "10.96.0.10", ingress: []v1.LoadBalancerIngress{vip(lbIP)}},
		map[string]string{p2.ip: "n1"})
	n.waitServices(1)
	waitFor(t, 10*time.Second, "the LB IP's Service port marked into OVS", func() bool {
		return strings.Contains(n.nft(), lbIP+" . tcp . 80")
	})
	gw := n.dp.Gateway()

	// The host's copy: a namespace behind host interface "spoof0" sends, with p1's address, a
	// TCP SYN to the LB IP; the host routes it into OVS through the gateway.
	q := ovssandbox.NewNetNS(t, "spoof")
	w.must(n.host, "ip", "link", "add", "spoof0", "type", "veth", "peer", "name", "eth0", "netns", q.Name)
	w.must(n.host, "ip", "link", "set", "spoof0", "up")
	for _, dev := range []string{"all", "spoof0"} { // the reverse path of p1's address is the gateway
		w.must(n.host, "sysctl", "-q", "-w", "net.ipv4.conf."+dev+".rp_filter=0")
	}
	spoofMAC := strings.Fields(w.must(n.host, "cat", "/sys/class/net/spoof0/address"))[0]
	w.must(q, "ip", "addr", "add", p1.ip+"/32", "dev", "eth0")
	w.must(q, "ip", "link", "set", "eth0", "up")
	w.must(q, "ip", "route", "add", "default", "dev", "eth0")
	w.must(q, "ip", "neigh", "replace", lbIP, "lladdr", spoofMAC, "dev", "eth0", "nud", "permanent")
	guard := fmt.Sprintf("table=0,ip,in_port=%d,nw_src=10.20.0.0/24", gw.OFPort)
	if reply, err := w.echo.Dial(context.Background(), q, "tcp", lbIP+":80", time.Second); err == nil {
		t.Fatalf("a copy of p1's connection sent through the host was answered (%q): it must be dropped", reply)
	}
	ct := must(n.ovs.Appctl("dpctl/dump-conntrack"))
	for _, line := range strings.Split(ct, "\n") {
		require.Falsef(t, strings.Contains(line, "zone=65521") && strings.Contains(line, "src="+p1.ip+","),
			"a packet with p1's source came through the gateway and was SNATed as an external connection: %s\nconntrack:\n%s\n%s", line, ct, n.diag())
	}
	guardStats := must(n.ovs.Ofctl("dump-flows", bridge, guard))
	require.Regexpf(t, regexp.MustCompile(`n_packets=[1-9]`), guardStats,
		"the host's copy must have reached OVS through the gateway and been dropped there\n%s", n.diag())

	// p1's own connections: its gateway is the gateway's MAC and the backend sees p1.
	for i := 0; i < 5; i++ {
		s, c := w.dial(p1.ns, lbIP+":80", n.diag)
		require.Equal(t, "p2", s)
		require.Equal(t, p1.ip, host(c), "pod→programmed LB IP: the backend must see the pod, not the host's SNAT")
	}
	require.Contains(t, w.must(p1.ns, "ip", "neigh", "show", "10.20.0.1"), gw.MAC.String(),
		"p1 must have learned the gateway's MAC for 10.20.0.1, not its veth's")
	hostIf := p1.res.Interfaces[0].Name
	require.Equal(t, "1", strings.TrimSpace(w.must(n.host, "cat", "/proc/sys/net/ipv4/conf/"+hostIf+"/arp_ignore")),
		"the host must not answer ARP on pod interfaces for addresses of other interfaces")
}
