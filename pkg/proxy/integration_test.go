package proxy

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/antrea-proxy/antrea-proxy/test/lab"
)

// TestIntegrationRealOVS runs the proxier against a real userspace OVS with a fake clientset and
// pod namespaces attached by the test, which also installs the L3 forwarding to its pods (the
// node data path's job). A ClusterIP, a NodePort and a VIP-mode LB IP reach both endpoints; a
// Proxy-mode LB IP gets no flow and is not intercepted.
func TestIntegrationRealOVS(t *testing.T) {
	l, client := clientAndTwoPods(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.168.77.10"}}}}
	objs := []runtime.Object{node,
		makeService("default", "web", "10.96.0.10", withLB(30080, vip("172.18.0.100"))),
		makeService("default", "behind-proxy", "10.96.0.11", withLB(30081, proxyMode("172.18.0.101"))),
	}
	for _, svc := range []string{"web", "behind-proxy"} {
		objs = append(objs, makeSlice("default", svc, svc+"-1", 8080, v1.ProtocolTCP, "http",
			ep{ip: "10.10.0.11", node: testNode, ready: true}, ep{ip: "10.10.0.12", node: testNode, ready: true}))
	}
	p := runOnLab(ctx, t, l, true, objs...)
	waitFor(t, 20*time.Second, "both Services installed", func() bool { return len(p.Services()) == 2 })

	for _, target := range []struct{ name, addr string }{
		{"ClusterIP", "10.96.0.10:80"}, {"NodePort", "192.168.77.10:30080"}, {"LB VIP", "172.18.0.100:80"},
	} {
		seen := map[string]int{}
		for i := 0; i < 20; i++ {
			server, from, err := l.Dial(ctx, client, target.addr, 2*time.Second)
			if err != nil {
				t.Fatalf("%s %s: connection %d: %v\nflows:\n%s", target.name, target.addr, i, err, l.Flows())
			}
			if !strings.HasPrefix(from, "10.10.0.10:") {
				t.Errorf("%s: backend saw client %s, want 10.10.0.10 (no SNAT for an in-node client)", target.name, from)
			}
			seen[server]++
		}
		if seen["pod1"] == 0 || seen["pod2"] == 0 {
			t.Errorf("%s: want both endpoints to answer over 20 connections, got %v", target.name, seen)
		}
	}
	flows := l.Flows()
	if strings.Contains(flows, "172.18.0.101") {
		t.Errorf("Proxy-mode LB IP 172.18.0.101 must have no flow:\n%s", flows)
	}
	if !strings.Contains(flows, "nw_dst=10.96.0.11,") || !strings.Contains(flows, "tp_dst=30081") {
		t.Errorf("the Proxy-mode Service's ClusterIP and NodePort flows are missing:\n%s", flows)
	}
	if _, _, err := l.Dial(ctx, client, "172.18.0.101:80", 500*time.Millisecond); err == nil {
		t.Error("a connection to the Proxy-mode LB IP was answered, but nothing on this bridge may intercept it")
	}
}

// clientAndTwoPods is the real-OVS tests' lab: a client host cli (10.10.0.10) and echo pods
// pod1 (10.10.0.11) and pod2 (10.10.0.12) on port 8080.
func clientAndTwoPods(t *testing.T) (*lab.Lab, *lab.Host) {
	t.Helper()
	l := lab.New(t)
	client := l.AddHost(t, "cli", "10.10.0.10")
	l.AddPod(t, "pod1", "10.10.0.11", 8080)
	l.AddPod(t, "pod2", "10.10.0.12", 8080)
	return l, client
}

// runOnLab runs a proxier of this test node on l's bridge, fed by a fake clientset holding objs,
// until the test ends.
func runOnLab(ctx context.Context, t *testing.T, l *lab.Lab, proxyLBIPs bool, objs ...runtime.Object) *Proxier {
	t.Helper()
	opts := Options{NodeName: testNode, Round: 1, ProxyLoadBalancerIPs: proxyLBIPs, MinSyncInterval: 100 * time.Millisecond, FullSyncPeriod: time.Minute}
	p, err := New(opts, l.OF)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(runCtx, fake.NewSimpleClientset(objs...)) }()
	t.Cleanup(func() { stop(); <-done })
	return p
}

// waitFor polls cond until it holds or the deadline passes; the failure names what never
// happened.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
