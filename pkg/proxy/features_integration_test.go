package proxy

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
	"github.com/antrea-proxy/antrea-proxy/test/lab"
)

// featureLab is a lab with a client, a second client, pod1 (on this node) and pod2 (reported on
// another node, reachable on the same bridge), and a running proxier.
type featureLab struct {
	*lab.Lab
	client, client2 *lab.Host
	p               *Proxier
}

func startFeatureLab(t *testing.T, svcs ...*v1.Service) *featureLab {
	t.Helper()
	l := lab.New(t)
	fl := &featureLab{Lab: l}
	fl.client = l.AddHost(t, "cli", "10.10.0.10")
	fl.client2 = l.AddHost(t, "cli2", "10.10.0.30")
	l.AddPod(t, "pod1", "10.10.0.11", 8080)
	l.AddPod(t, "pod2", "10.10.0.12", 8080)
	objs := []runtime.Object{&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.168.77.10"}}}}}
	for _, svc := range svcs {
		objs = append(objs, svc, makeSlice(svc.Namespace, svc.Name, svc.Name+"-1", 8080, v1.ProtocolTCP, "http",
			ep{ip: "10.10.0.11", node: testNode, ready: true}, ep{ip: "10.10.0.12", node: "node-b", ready: true}))
	}
	p, err := New(Options{NodeName: testNode, Round: 1, ProxyLoadBalancerIPs: true, MinSyncInterval: 100 * time.Millisecond,
		FullSyncPeriod: time.Minute}, l.OF)
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, p, fake.NewSimpleClientset(objs...))
	waitFor(t, 20*time.Second, "the Services to be installed", func() bool { return len(p.Services()) == len(svcs) })
	fl.p = p
	return fl
}

// answers connects n times and counts which pod answered; failures are counted under "".
func (fl *featureLab) answers(t *testing.T, from *lab.Host, addr string, n int, timeout time.Duration) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for i := 0; i < n; i++ {
		server, _, err := fl.Dial(context.Background(), from, addr, timeout)
		if err != nil {
			server = ""
		}
		seen[server]++
	}
	return seen
}

// TestIntegrationExternalTrafficPolicyLocal: NodePort and LB traffic from outside the pods goes
// only to the endpoint on this node, with the client address preserved; the ClusterIP still
// uses both endpoints.
func TestIntegrationExternalTrafficPolicyLocal(t *testing.T) {
	fl := startFeatureLab(t, makeService("default", "web", "10.96.0.10", withLB(30080, vip("172.18.0.100")), withETPLocal))
	for _, addr := range []string{"192.168.77.10:30080", "172.18.0.100:80"} {
		seen := fl.answers(t, fl.client, addr, 20, 2*time.Second)
		if seen["pod1"] != 20 {
			t.Errorf("eTP=Local %s: want all 20 connections answered by the local pod1, got %v", addr, seen)
		}
	}
	_, from, err := fl.Dial(context.Background(), fl.client, "192.168.77.10:30080", 2*time.Second)
	if err != nil || !strings.HasPrefix(from, "10.10.0.10:") {
		t.Errorf("eTP=Local: want the backend to see the client 10.10.0.10, got %q (%v)", from, err)
	}
	if seen := fl.answers(t, fl.client, "10.96.0.10:80", 20, 2*time.Second); seen["pod1"] == 0 || seen["pod2"] == 0 {
		t.Errorf("ClusterIP of an eTP=Local Service: want both endpoints, got %v", seen)
	}
}

// TestIntegrationInternalTrafficPolicyLocal: ClusterIP traffic goes only to the local endpoint.
func TestIntegrationInternalTrafficPolicyLocal(t *testing.T) {
	fl := startFeatureLab(t, makeService("default", "web", "10.96.0.10", withITPLocal))
	if seen := fl.answers(t, fl.client, "10.96.0.10:80", 20, 2*time.Second); seen["pod1"] != 20 {
		t.Errorf("iTP=Local: want all 20 connections answered by the local pod1, got %v", seen)
	}
}

// TestIntegrationSourceRanges: only clients inside loadBalancerSourceRanges reach the LB IP.
func TestIntegrationSourceRanges(t *testing.T) {
	fl := startFeatureLab(t, makeService("default", "web", "10.96.0.10", withLB(30080, vip("172.18.0.100")), withSourceRanges("10.10.0.10/32")))
	if seen := fl.answers(t, fl.client, "172.18.0.100:80", 5, 2*time.Second); seen[""] != 0 {
		t.Errorf("a client inside the source ranges was refused: %v", seen)
	}
	if seen := fl.answers(t, fl.client2, "172.18.0.100:80", 3, 500*time.Millisecond); seen[""] != 3 {
		t.Errorf("a client outside the source ranges got through: %v", seen)
	}
	if seen := fl.answers(t, fl.client2, "10.96.0.10:80", 3, 2*time.Second); seen[""] != 0 {
		t.Errorf("source ranges must not restrict the ClusterIP: %v", seen)
	}
}

// TestIntegrationSessionAffinity: with ClientIP affinity, 50 connections from one client land
// on one endpoint; the learned flow idles out after the timeout.
func TestIntegrationSessionAffinity(t *testing.T) {
	fl := startFeatureLab(t, makeService("default", "web", "10.96.0.10", withNodePort(30080), withAffinity(3)))
	for _, addr := range []string{"10.96.0.10:80", "192.168.77.10:30080"} {
		seen := fl.answers(t, fl.client, addr, 50, 2*time.Second)
		if len(seen) != 1 || seen[""] != 0 {
			t.Errorf("affinity %s: want 50 connections on one endpoint, got %v", addr, seen)
		}
	}
	learned := func() string {
		out, _ := fl.OVS.Ofctl("dump-flows", fl.Bridge, fmt.Sprintf("table=%d", pipeline.TableSessionAffinity), "--no-stats")
		return out
	}
	if !strings.Contains(learned(), "nw_src=10.10.0.10") {
		t.Fatalf("no learned affinity flow for the client:\n%s", learned())
	}
	waitFor(t, 15*time.Second, "the learned affinity flows to idle out after 3s", func() bool {
		return !strings.Contains(learned(), "nw_src=10.10.0.10")
	})
}

// TestIntegrationHairpin: a pod reaching its own Service lands on itself and gets the reply; it
// sees the connection come from the hairpin address.
func TestIntegrationHairpin(t *testing.T) {
	svc := makeService("default", "self", "10.96.0.20")
	l := lab.New(t)
	pod := l.AddPod(t, "pod1", "10.10.0.11", 8080)
	podFlows := pipeline.PodFlows(1, nil, pipeline.Pod{ID: 1, OFPort: pod.Veth.OFPort, MAC: pod.Veth.MAC,
		IPs: []netip.Addr{netip.MustParseAddr(pod.IP)}})
	var ops []of.Op
	for i := range podFlows {
		ops = append(ops, of.Op{Kind: of.AddFlow, Flow: &podFlows[i]})
	}
	if err := l.OF.Apply(context.Background(), ops); err != nil {
		t.Fatal(err)
	}
	objs := []runtime.Object{&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode}}, svc,
		makeSlice("default", "self", "self-1", 8080, v1.ProtocolTCP, "http", ep{ip: pod.IP, node: testNode, ready: true})}
	p, err := New(Options{NodeName: testNode, Round: 1, MinSyncInterval: 100 * time.Millisecond, FullSyncPeriod: time.Minute}, l.OF)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, fake.NewSimpleClientset(objs...)) }()
	defer func() { cancel(); <-done }()
	waitFor(t, 20*time.Second, "the Service to be installed", func() bool { return len(p.Services()) == 1 })
	for i := 0; i < 5; i++ {
		server, from, err := l.Dial(context.Background(), pod, "10.96.0.20:80", 2*time.Second)
		if err != nil {
			t.Fatalf("hairpin connection %d: %v\n%s", i, err, l.Flows())
		}
		if server != "pod1" || !strings.HasPrefix(from, pipeline.HairpinIPv4.String()+":") {
			t.Fatalf("hairpin: want pod1 to answer a connection from %s, got %s from %s", pipeline.HairpinIPv4, server, from)
		}
	}
}
