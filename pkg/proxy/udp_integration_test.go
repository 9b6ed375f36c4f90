package proxy

import (
	"context"
	"net"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/conntrack"
	"github.com/antrea-proxy/antrea-proxy/test/lab"
)

// udpSocketIn opens a UDP socket bound to laddr inside the named network namespace. The socket
// stays in that namespace whichever goroutine uses it.
func udpSocketIn(t *testing.T, nsName, laddr string) *net.UDPConn {
	t.Helper()
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	target, err := netns.GetFromName(nsName)
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	if err := netns.Set(target); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = netns.Set(orig) }()
	addr, err := net.ResolveUDPAddr("udp", laddr)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.ListenUDP("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// ask sends one datagram to dst and returns the answering pod's name ("" on timeout).
func ask(c *net.UDPConn, dst string) string {
	addr, err := net.ResolveUDPAddr("udp", dst)
	if err != nil {
		return ""
	}
	if _, err := c.WriteToUDP([]byte("q\n"), addr); err != nil {
		return ""
	}
	_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	buf := make([]byte, 512)
	n, _, err := c.ReadFromUDP(buf)
	if err != nil {
		return ""
	}
	return strings.Fields(string(buf[:n]) + " ")[0]
}

// TestIntegrationUDPEndpointReplaced: a DNS-like client that keeps one source port recovers
// within one sync after its endpoint is replaced, because the stale conntrack entry that pinned
// it to the old endpoint is flushed.
func TestIntegrationUDPEndpointReplaced(t *testing.T) {
	l := lab.New(t)
	client := l.AddHost(t, "cli", "10.10.0.10")
	l.AddPod(t, "pod1", "10.10.0.11", 5353)
	l.AddPod(t, "pod2", "10.10.0.12", 5353)
	svc := makeService("kube-system", "dns", "10.96.0.53", withPorts(v1.ServicePort{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP}))
	old := makeSlice("kube-system", "dns", "dns-1", 5353, v1.ProtocolUDP, "dns", ep{ip: "10.10.0.11", node: testNode, ready: true})
	cs := fake.NewSimpleClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode}}, svc, old)
	p, err := New(Options{NodeName: testNode, Round: 1, MinSyncInterval: 100 * time.Millisecond, FullSyncPeriod: time.Minute, Conntrack: &conntrack.Table{RunDir: l.OVS.RunDir}}, l.OF)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, cs) }()
	defer func() { cancel(); <-done }()
	waitFor(t, 20*time.Second, "the DNS Service to be installed", func() bool { return len(p.Services()) == 1 })

	conn := udpSocketIn(t, client.NS.Name, "10.10.0.10:5300")
	waitFor(t, 10*time.Second, "pod1 to answer the DNS-like client", func() bool { return ask(conn, "10.96.0.53:53") == "pod1" })

	replaced := makeSlice("kube-system", "dns", "dns-1", 5353, v1.ProtocolUDP, "dns", ep{ip: "10.10.0.12", node: testNode, ready: true})
	if _, err := cs.DiscoveryV1().EndpointSlices("kube-system").Update(ctx, replaced, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the endpoint change to be synced", func() bool {
		st := p.Services()
		return len(st) == 1 && st[0].Ports[0].Endpoints.Total == 1 && p.ServiceFlowsContain("nat(dst=10.10.0.12:5353)")
	})
	// Within one sync after the change, the same client socket reaches the new endpoint.
	deadline := time.Now().Add(2 * time.Second)
	for {
		got := ask(conn, "10.96.0.53:53")
		if got == "pod2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the client is still pinned to %q two seconds after its endpoint was replaced (stale conntrack entry)", got)
		}
	}
}
