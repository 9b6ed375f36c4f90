package proxy

import (
	"context"
	"sort"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/openflowtest"
)

// flushingBridge is a fake bridge that records conntrack flushes.
type flushingBridge struct {
	*openflowtest.FakeBridge
	mu      sync.Mutex
	flushes []string
}

func (b *flushingBridge) FlushConntrack(_ context.Context, zone uint16, orig, reply of.CtTuple) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flushes = append(b.flushes, of.FormatCtFlush(zone, orig, reply))
	return nil
}

func (b *flushingBridge) take() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.flushes
	b.flushes = nil
	sort.Strings(out)
	return out
}

// TestUDPConntrackFlush: stale UDP entries are flushed for exactly the endpoint that left, for
// the Service addresses when a port gets its first endpoint, and never for TCP.
func TestUDPConntrackFlush(t *testing.T) {
	b := &flushingBridge{FakeBridge: openflowtest.NewFakeBridge()}
	p, err := New(testOptions(), b)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, p: p, bridge: b.FakeBridge}
	dns := makeService("kube-system", "dns", "10.96.0.53", withPorts(v1.ServicePort{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP, NodePort: 30053}),
		func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeNodePort })
	web := makeService("default", "web", "10.96.0.80")
	h.p.OnNodeUpdate(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode}, Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.168.77.10"}}}})
	h.addService(dns)
	h.addService(web)
	h.sync()
	if got := b.take(); len(got) != 0 {
		t.Fatalf("no endpoints yet, no flush expected: %v", got)
	}

	one := makeSlice("kube-system", "dns", "dns-1", 5353, v1.ProtocolUDP, "dns", ep{ip: "10.10.1.5", node: testNode, ready: true})
	h.addSlice(one)
	h.addSlice(makeSlice("default", "web", "web-1", 8080, v1.ProtocolTCP, "http", ep{ip: "10.10.1.6", node: testNode, ready: true}))
	h.sync()
	want := []string{
		"zone=65520 ct_nw_dst=10.96.0.53,ct_nw_proto=17,ct_tp_dst=53",
		"zone=65520 ct_nw_dst=192.168.77.10,ct_nw_proto=17,ct_tp_dst=30053",
	}
	if diff := cmp.Diff(want, b.take()); diff != "" {
		t.Fatalf("first endpoints: flushes (-want +got):\n%s", diff)
	}

	replaced := makeSlice("kube-system", "dns", "dns-1", 5353, v1.ProtocolUDP, "dns", ep{ip: "10.10.1.7", node: testNode, ready: true})
	h.updateSlice(one, replaced)
	h.sync()
	want = []string{"zone=65520 ct_nw_proto=17 ct_nw_src=10.10.1.5,ct_nw_proto=17,ct_tp_src=5353"}
	if diff := cmp.Diff(want, b.take()); diff != "" {
		t.Fatalf("replaced endpoint: flushes (-want +got):\n%s", diff)
	}

	h.deleteService(dns)
	h.sync()
	want = []string{"zone=65520 ct_nw_proto=17 ct_nw_src=10.10.1.7,ct_nw_proto=17,ct_tp_src=5353"}
	if diff := cmp.Diff(want, b.take()); diff != "" {
		t.Fatalf("deleted Service: flushes (-want +got):\n%s", diff)
	}
	h.deleteService(web)
	h.sync()
	if got := b.take(); len(got) != 0 {
		t.Fatalf("TCP Service deleted: no flush expected, got %v", got)
	}
}
