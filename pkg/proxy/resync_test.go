package proxy

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// computeCounter counts computeService calls per Service through the proxier's hook.
type computeCounter map[types.NamespacedName]int

func countComputes(p *Proxier) computeCounter {
	c := computeCounter{}
	p.onCompute = func(nn types.NamespacedName) { c[nn]++ }
	return c
}

func (c computeCounter) total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

func (c computeCounter) reset() { clear(c) }

func (h *harness) fullSync() {
	h.t.Helper()
	if err := h.p.SyncNow(context.Background(), true); err != nil {
		h.t.Fatalf("full sync: %v", err)
	}
}

// resyncHarness has three installed ClusterIP Services (web0..web2, two endpoints each).
func resyncHarness(t *testing.T) (*harness, []*v1.Service) {
	h := newHarness(t, testOptions())
	var svcs []*v1.Service
	for i, ip := range []string{"10.96.0.10", "10.96.0.11", "10.96.0.12"} {
		svc := makeService("ns1", "web"+string(rune('0'+i)), ip)
		svcs = append(svcs, svc)
		h.addService(svc)
		for _, s := range twoEndpointSlices(svc) {
			h.addSlice(s)
		}
	}
	h.sync()
	return h, svcs
}

var web1 = types.NamespacedName{Namespace: "ns1", Name: "web1"}

// TestIdleFullResyncComputesNothing: a periodic full resync with nothing changed computes no
// Service, sends no bundle and does not even walk the Services' inputs (after the walk of the
// first one, which follows the initial sync); one that follows one changed Service walks them
// and computes only that one.
func TestIdleFullResyncComputesNothing(t *testing.T) {
	h, svcs := resyncHarness(t)
	c := countComputes(h.p)
	applies := h.bridge.ApplyCount()
	h.fullSync()
	walks := h.p.walk.count
	h.fullSync()
	h.fullSync()
	if c.total() != 0 {
		t.Fatalf("idle full resyncs computed %v", c)
	}
	if got := h.bridge.ApplyCount(); got != applies {
		t.Fatalf("idle full resyncs sent %d bundles", got-applies)
	}
	if got := h.p.walk.count - walks; got != 0 {
		t.Fatalf("idle full resyncs walked every Service's inputs %d times, want 0", got)
	}

	h.updateSlice(twoEndpointSlices(svcs[1])[0], makeSlice("ns1", "web1", "web1-http", 8080, v1.ProtocolTCP, "http",
		ep{ip: "10.10.9.9", node: "node-b", ready: true}))
	h.fullSync()
	if len(c) != 1 || c[web1] != 1 {
		t.Fatalf("a full resync after one change computed %v, want web1 once", c)
	}
	if got := h.p.walk.count - walks; got != 1 {
		t.Fatalf("a full resync after one change walked the Services' inputs %d times, want 1", got)
	}
	if !strings.Contains(h.bridge.Dump(), "10.10.9.9") {
		t.Fatalf("the changed endpoint is not installed:\n%s", h.bridge.Dump())
	}
}

// TestFullResyncCatchesChangeMissedByIncrementalSync: when a Service's slices changed but its
// dirty mark was lost (drained elsewhere), a partial sync cannot know, and the full resync
// still finds it through the slices' generation and installs it.
func TestFullResyncCatchesChangeMissedByIncrementalSync(t *testing.T) {
	h, svcs := resyncHarness(t)
	c := countComputes(h.p)
	h.updateSlice(twoEndpointSlices(svcs[1])[0], makeSlice("ns1", "web1", "web1-http", 8080, v1.ProtocolTCP, "http",
		ep{ip: "10.10.9.9", node: "node-b", ready: true}))
	h.p.Tracker().Endpoints.DrainDirty() // the mark is lost
	h.sync()
	if strings.Contains(h.bridge.Dump(), "10.10.9.9") {
		t.Fatal("the partial sync saw a change whose mark was drained: the test does not test the full resync")
	}
	h.fullSync()
	if len(c) != 1 || c[web1] != 1 {
		t.Fatalf("the full resync computed %v, want web1 once", c)
	}
	if !strings.Contains(h.bridge.Dump(), "10.10.9.9") {
		t.Fatalf("the full resync did not install the changed endpoint:\n%s", h.bridge.Dump())
	}
}

// TestNodeZoneChangeRecomputesServices: a change of the Node's zone changes every Service's
// topology-aware endpoints; the next sync (partial or full) recomputes all of them at once.
func TestNodeZoneChangeRecomputesServices(t *testing.T) {
	h := newHarness(t, testOptions())
	svc := makeService("ns1", "web", "10.96.0.10")
	h.addService(svc)
	s := makeSlice("ns1", "web", "web-1", 8080, v1.ProtocolTCP, "http", twoEndpoints()...)
	s.Endpoints[0].Hints = &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: "zone-a"}}}
	s.Endpoints[1].Hints = &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: "zone-b"}}}
	h.addSlice(s)
	h.addService(makeService("ns1", "other", "10.96.0.11"))
	h.sync()
	// web's group (web sorts after other): its buckets DNAT to the endpoints.
	ep1, ep2 := "nat(dst=10.10.1.5:8080)", "nat(dst=10.10.2.6:8080)"
	webGroup := func() string { return groupLine(h.bridge.Dump(), "group_id=2,") }
	if g := webGroup(); !strings.Contains(g, ep1) || !strings.Contains(g, ep2) {
		t.Fatalf("without a zone, web's group does not select both endpoints: %s", g)
	}
	c := countComputes(h.p)
	for i, zone := range []string{"zone-a", "zone-b"} {
		c.reset()
		h.p.OnNodeUpdate(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, Labels: map[string]string{v1.LabelTopologyZone: zone}},
			Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.168.77.10"}}}})
		if i == 0 {
			h.sync()
		} else {
			h.fullSync()
		}
		if c.total() != 2 {
			t.Fatalf("zone %s: computed %v, want both Services", zone, c)
		}
		w := map[string]struct{ in, out string }{"zone-a": {ep1, ep2}, "zone-b": {ep2, ep1}}[zone]
		if g := webGroup(); !strings.Contains(g, w.in) || strings.Contains(g, w.out) {
			t.Fatalf("zone %s: web's group is not the zone's endpoint only: %s", zone, g)
		}
	}
	c.reset()
	h.fullSync()
	if c.total() != 0 {
		t.Fatalf("a full resync with the zone unchanged computed %v", c)
	}
}

// groupLine returns the line of dump that contains prefix.
func groupLine(dump, prefix string) string {
	for _, l := range strings.Split(dump, "\n") {
		if strings.Contains(l, prefix) {
			return l
		}
	}
	return ""
}

// TestFailedFullResyncIsRetried: a full resync whose bundle OVS refuses commits nothing; the
// next sync, full or partial, installs what it carried.
func TestFailedFullResyncIsRetried(t *testing.T) {
	for _, nextFull := range []bool{true, false} {
		h, svcs := resyncHarness(t)
		h.updateSlice(twoEndpointSlices(svcs[1])[0], makeSlice("ns1", "web1", "web1-http", 8080, v1.ProtocolTCP, "http",
			ep{ip: "10.10.9.9", node: "node-b", ready: true}))
		h.bridge.FailNextApply(errors.New("injected"))
		if err := h.p.SyncNow(context.Background(), true); err == nil {
			t.Fatal("the injected failure did not fail the full resync")
		}
		c := countComputes(h.p)
		if err := h.p.SyncNow(context.Background(), nextFull); err != nil {
			t.Fatal(err)
		}
		if c[web1] != 1 || !strings.Contains(h.bridge.Dump(), "10.10.9.9") {
			t.Fatalf("next sync full=%v: computed %v; the change is not installed:\n%s", nextFull, c, h.bridge.Dump())
		}
	}
}

// TestFullResyncRepairsDrift: a full resync whose check finds OVS holding fewer flows than
// installed (counted, not recomputed, off the sync goroutine) replays the installed state.
func TestFullResyncRepairsDrift(t *testing.T) {
	h, _ := resyncHarness(t)
	want := h.bridge.Dump()
	var mu sync.Mutex
	c := computeCounter{}
	h.p.onCompute = func(nn types.NamespacedName) { mu.Lock(); c[nn]++; mu.Unlock() }
	h.bridge.ClearFlows(of.FlowFilter{})
	h.fullSync()
	waitFor(t, 10*time.Second, "the replay after the full resync", func() bool { return h.bridge.Dump() == want })
	mu.Lock()
	defer mu.Unlock()
	if c.total() != 0 {
		t.Fatalf("repairing drift recomputed %v", c)
	}
}
