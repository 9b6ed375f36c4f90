package proxy

import (
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/tracker"
)

func manyServices(h *harness, n int) {
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("svc-%05d", i)
		ip := fmt.Sprintf("10.%d.%d.%d", 96+i/65536, (i/256)%256, i%256)
		h.addService(makeService("bulk", name, ip))
		h.addSlice(makeSlice("bulk", name, name+"-1", 8080, v1.ProtocolTCP, "http",
			ep{ip: fmt.Sprintf("10.200.%d.%d", (i/250)%250, i%250+1), node: testNode, ready: true}))
	}
}

// TestIncrementalSync installs 10,000 Services, then changes one endpoint: the sync sends only
// that Service's ops, in one bundle.
func TestIncrementalSync(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 Services: not in -short")
	}
	h := newHarness(t, testOptions())
	const n = 10000
	manyServices(h, n)
	h.sync()
	if got := h.bridge.GroupCount(); got != n {
		t.Fatalf("groups: got %d, want %d", got, n)
	}
	h.bridge.Reset()

	old := makeSlice("bulk", "svc-04242", "svc-04242-1", 8080, v1.ProtocolTCP, "http",
		ep{ip: fmt.Sprintf("10.200.%d.%d", (4242/250)%250, 4242%250+1), node: testNode, ready: true})
	changed := makeSlice("bulk", "svc-04242", "svc-04242-1", 8080, v1.ProtocolTCP, "http",
		ep{ip: "10.201.0.1", node: testNode, ready: true})
	h.updateSlice(old, changed)
	h.sync()

	if got := h.bridge.ApplyCount(); got != 1 {
		t.Fatalf("want one bundle, got %d", got)
	}
	ops := h.bridge.LastOps()
	// Only the group changes: its bucket DNATs to the new endpoint.
	if len(ops) != 1 {
		t.Fatalf("want 1 op for one changed endpoint, got %d:\n%s", len(ops), strings.Join(opTexts(ops), "\n"))
	}
	if g := ops[0].Group; ops[0].Kind != of.ModifyGroup || g == nil || !strings.Contains(of.FormatGroup(g), "nat(dst=10.201.0.1:8080)") ||
		strings.Contains(of.FormatGroup(g), "nat(dst=10.200.") {
		t.Fatalf("want a modify-group to the new endpoint only, got %s", opTexts(ops))
	}
	// A sync with nothing pending sends nothing.
	h.bridge.Reset()
	h.sync()
	if h.bridge.ApplyCount() != 0 {
		t.Fatalf("idle sync sent %d bundle(s)", h.bridge.ApplyCount())
	}
}

// BenchmarkFullSync10k measures a full sync of 10,000 Services into the fake bridge.
func BenchmarkFullSync10k(b *testing.B) {
	for i := 0; i < b.N; i++ {
		t := &testing.T{}
		h := newHarness(t, testOptions())
		manyServices(h, 10000)
		if err := h.p.SyncNow(b.Context(), true); err != nil {
			b.Fatal(err)
		}
	}
}

// TestStaleEndpointMarkIsNotRecomputed: a Service whose EndpointSlices were marked dirty after
// a sync had drained the marks but before it read the Service's inputs was computed by that
// sync; the next one does not compute it again. A real change of its slices, a Service change
// and a Service never committed are computed.
func TestStaleEndpointMarkIsNotRecomputed(t *testing.T) {
	h := newHarness(t, testOptions())
	web := types.NamespacedName{Namespace: "ns1", Name: "web"}
	h.addService(makeService("ns1", "web", "10.96.0.10"))
	s1 := makeSlice("ns1", "web", "web-1", 8080, v1.ProtocolTCP, "http", ep{ip: "10.10.1.5", node: testNode, ready: true})
	h.addSlice(s1)
	h.sync()
	mark := func(d tracker.Drained) bool {
		h.p.dirty = sets.New[types.NamespacedName]()
		h.p.dirtyDrained(d)
		return h.p.dirty.Has(web)
	}
	if mark(tracker.Drained{DirtyEndpoints: sets.New(web)}) {
		t.Error("a stale mark of a Service computed from its current inputs made it dirty")
	}
	h.updateSlice(s1, makeSlice("ns1", "web", "web-1", 8080, v1.ProtocolTCP, "http", ep{ip: "10.10.1.6", node: testNode, ready: true}))
	if !mark(tracker.Drained{DirtyEndpoints: sets.New(web)}) {
		t.Error("a real change of the Service's slices did not make it dirty")
	}
	h.sync()
	if !mark(tracker.Drained{ServiceChanges: map[types.NamespacedName]tracker.ServiceChange{web: {}}}) {
		t.Error("a Service change did not make it dirty")
	}
	other := types.NamespacedName{Namespace: "ns1", Name: "other"}
	h.p.dirty = sets.New[types.NamespacedName]()
	h.p.dirtyDrained(tracker.Drained{DirtyEndpoints: sets.New(other)})
	if !h.p.dirty.Has(other) {
		t.Error("a Service never computed was not made dirty")
	}
}
