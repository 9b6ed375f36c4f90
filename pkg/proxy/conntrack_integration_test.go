package proxy

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/conntrack"
	"github.com/antrea-proxy/antrea-proxy/test/lab"
)

// runLabProxier runs a proxier of the given round on the lab bridge with the lab's conntrack,
// as the agent does after each start, until the returned stop is called.
func runLabProxier(t *testing.T, l *lab.Lab, cs *fake.Clientset, round uint16) (*Proxier, func()) {
	t.Helper()
	p, err := New(Options{NodeName: testNode, Round: round, ProxyLoadBalancerIPs: true, MinSyncInterval: 100 * time.Millisecond,
		FullSyncPeriod: time.Minute, Conntrack: &conntrack.Table{RunDir: l.OVS.RunDir}}, l.OF)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, cs) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	t.Cleanup(stop)
	return p, stop
}

// TestIntegrationUDPConntrackAcrossRestart: UDP clients of a ClusterIP, an ExternalIP, an LB IP
// and a NodePort keep their endpoint across restarts of the proxier on a real OVS (the
// conntrack entries that still match are kept), even when the endpoints were scaled up while it
// was down; when their endpoint went away while it was down, they move within a second of the
// first sync after the restart.
func TestIntegrationUDPConntrackAcrossRestart(t *testing.T) {
	l := lab.New(t)
	client := l.AddHost(t, "cli", "10.10.0.10")
	pods := map[string]string{"pod1": "10.10.0.11", "pod2": "10.10.0.12", "pod3": "10.10.0.13", "pod4": "10.10.0.14"}
	for name, ip := range pods {
		l.AddPod(t, name, ip, 5353)
	}
	svc := makeService("kube-system", "dns", "10.96.0.53", withPorts(v1.ServicePort{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP}),
		withExternalIPs("10.96.1.53"), withLB(30053, vip("172.18.0.53")))
	slice := func(names ...string) *discovery.EndpointSlice {
		var eps []ep
		for _, n := range names {
			eps = append(eps, ep{ip: pods[n], node: testNode, ready: true})
		}
		return makeSlice("kube-system", "dns", "dns-1", 5353, v1.ProtocolUDP, "dns", eps...)
	}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.168.77.10"}}}}
	cs := fake.NewSimpleClientset(node, svc, slice("pod1", "pod2"))
	setSlice := func(s *discovery.EndpointSlice) {
		t.Helper()
		if _, err := cs.DiscoveryV1().EndpointSlices("kube-system").Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	synced := func(p *Proxier, endpoints int) {
		t.Helper()
		waitFor(t, 30*time.Second, fmt.Sprintf("the Service to be installed with %d endpoints", endpoints), func() bool {
			st := p.Services()
			return len(st) == 1 && st[0].Ports[0].Endpoints.Total == endpoints
		})
	}

	p, stop := runLabProxier(t, l, cs, 1)
	synced(p, 2)
	frontends := []string{"10.96.0.53:53", "10.96.1.53:53", "172.18.0.53:53", "192.168.77.10:30053"}
	type udpClient struct {
		conn   *net.UDPConn
		dst    string
		pinned string
	}
	var clients []*udpClient
	for i, dst := range frontends {
		for j := 0; j < 6; j++ {
			c := &udpClient{conn: udpSocketIn(t, client.NS.Name, fmt.Sprintf("10.10.0.10:%d", 5300+10*i+j)), dst: dst}
			waitFor(t, 10*time.Second, "an answer through "+dst, func() bool { c.pinned = ask(c.conn, dst); return c.pinned != "" })
			clients = append(clients, c)
		}
	}
	stop()

	// Scaled up while the proxier was down: every client stays with its endpoint.
	setSlice(slice("pod1", "pod2", "pod3", "pod4"))
	p, stop = runLabProxier(t, l, cs, 2)
	synced(p, 4)
	var moved []string
	for _, c := range clients {
		if got := ask(c.conn, c.dst); got != c.pinned {
			moved = append(moved, fmt.Sprintf("%s via %s: %s -> %q", c.conn.LocalAddr(), c.dst, c.pinned, got))
		}
	}
	if len(moved) > 0 {
		t.Fatalf("after a restart with 2 more endpoints, %d of %d UDP clients lost their endpoint (its conntrack entry was flushed): %v", len(moved), len(clients), moved)
	}
	stop()

	// pod2 went away while the proxier was down: its clients move within a second of the
	// restart's first sync; every other client stays.
	setSlice(slice("pod1", "pod3", "pod4"))
	p, _ = runLabProxier(t, l, cs, 3)
	synced(p, 3)
	syncedAt := time.Now()
	var onPod2 int
	for _, c := range clients {
		want := c.pinned
		if want == "pod2" {
			onPod2++
			deadline := syncedAt.Add(time.Second)
			for got := ask(c.conn, c.dst); got == "pod2" || got == ""; got = ask(c.conn, c.dst) {
				if time.Now().After(deadline) {
					t.Fatalf("%s via %s still answered by %q a second after the restart synced (stale entry kept)", c.conn.LocalAddr(), c.dst, got)
				}
			}
			continue
		}
		if got := ask(c.conn, c.dst); got != want {
			t.Errorf("%s via %s: %s -> %q after pod2 went away", c.conn.LocalAddr(), c.dst, want, got)
		}
	}
	if onPod2 == 0 {
		t.Fatalf("no client was on pod2; the test proves nothing (pinned: %v)", clients)
	}
	t.Logf("%d UDP clients over 4 frontends kept their endpoints across two restarts; the %d on pod2 moved within a second", len(clients), onPod2)
}
