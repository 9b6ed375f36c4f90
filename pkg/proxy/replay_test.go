package proxy

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

// replayServices are Services of several shapes (cluster and local groups, UDP, NodePort, LB).
func replayServices() []*v1.Service {
	return []*v1.Service{
		makeService("ns1", "web", "10.96.0.10", withLB(30080, vip("172.18.0.100")), withETPLocal),
		makeService("ns1", "dns", "10.96.0.53", withPorts(v1.ServicePort{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP})),
		makeService("ns2", "api", "10.96.0.20", withNodePort(30100)),
	}
}

func installReplayServices(t *testing.T, h *harness) {
	t.Helper()
	for _, svc := range replayServices() {
		h.addService(svc)
		for _, s := range twoEndpointSlices(svc) {
			h.addSlice(s)
		}
	}
	h.sync()
}

func mustVerify(t *testing.T, h *harness, want bool, when string) {
	t.Helper()
	ok, err := h.p.Reconciler().Verify(context.Background(), h.bridge)
	if err != nil {
		t.Fatal(err)
	}
	if ok != want {
		t.Fatalf("%s: Verify = %v, want %v", when, ok, want)
	}
}

func TestVerifyAndReplay(t *testing.T) {
	for _, tc := range []struct {
		name string
		lose func(h *harness)
	}{
		{"vswitchd restart", func(h *harness) { h.bridge.Wipe() }},
		{"del-flows", func(h *harness) { h.bridge.ClearFlows(of.FlowFilter{}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, testOptions())
			installReplayServices(t, h)
			want := h.bridge.Dump()
			mustVerify(t, h, true, "after the sync")
			tc.lose(h)
			mustVerify(t, h, false, "after the loss")
			h.bridge.Reset()
			if err := h.p.Reconciler().Replay(context.Background()); err != nil {
				t.Fatal(err)
			}
			if h.bridge.ApplyCount() != 1 {
				t.Errorf("Replay: want one bundle, got %d", h.bridge.ApplyCount())
			}
			if got := h.bridge.Dump(); got != want {
				t.Fatalf("Replay did not restore the state:\n got:\n%s\nwant:\n%s", got, want)
			}
			mustVerify(t, h, true, "after the replay")
			// Replaying an intact bridge changes nothing.
			if err := h.p.Reconciler().Replay(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := h.bridge.Dump(); got != want {
				t.Fatalf("a second Replay changed the state:\n%s", got)
			}
		})
	}
}

// TestServiceChangedAfterWipe: a Service changed after a vswitchd restart is installed
// correctly once the proxier replayed.
func TestServiceChangedAfterWipe(t *testing.T) {
	h := newHarness(t, testOptions())
	installReplayServices(t, h)
	h.bridge.Wipe()
	old := replayServices()[2]
	h.updateService(old, makeService("ns2", "api", "10.96.0.20", withNodePort(30101)))
	h.addService(makeService("ns3", "new", "10.96.0.30"))
	h.addSlice(makeSlice("ns3", "new", "new-1", 8080, v1.ProtocolTCP, "http", twoEndpoints()...))
	if err := h.p.Reconciler().Replay(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.sync()
	fresh := newHarness(t, testOptions())
	installReplayServices(t, fresh)
	fresh.updateService(old, makeService("ns2", "api", "10.96.0.20", withNodePort(30101)))
	fresh.addService(makeService("ns3", "new", "10.96.0.30"))
	fresh.addSlice(makeSlice("ns3", "new", "new-1", 8080, v1.ProtocolTCP, "http", twoEndpoints()...))
	fresh.sync()
	if got, want := h.bridge.Dump(), fresh.bridge.Dump(); got != want {
		t.Fatalf("after wipe, change and replay the bridge differs from a bridge that never lost anything:\n got:\n%s\nwant:\n%s", got, want)
	}
	for _, st := range h.p.Services() {
		if st.Problem != nil {
			t.Errorf("%s: unexpected problem %+v", st.Name, st.Problem)
		}
	}
}

// TestReplayBeforeFirstSyncInstallsBaseFlowsOnly: before the first sync a replay (ovs-vswitchd
// restarted) sends one bundle that only adds the node-level flows every packet needs
// (InstallBaseFlows).
func TestReplayBeforeFirstSyncInstallsBaseFlowsOnly(t *testing.T) {
	h := newHarness(t, testOptions())
	if err := h.p.Reconciler().Replay(context.Background()); err != nil {
		t.Fatal(err)
	}
	calls := h.bridge.ApplyCalls()
	if len(calls) != 1 {
		t.Fatalf("Replay before the first sync sent %d bundles, want 1", len(calls))
	}
	for _, op := range calls[0] {
		if op.Kind != of.AddFlow || pipeline.CookieCategory(op.Flow.Cookie) != pipeline.CategoryBase {
			t.Fatalf("Replay before the first sync sent %s of cookie %#x, want only node-level flow adds", op.Kind, op.Flow.Cookie)
		}
	}
	mustVerify(t, h, true, "before the first sync")
}

// TestFailedReplayIsRepeatedByTheNextSync: a replay OVS refused is owed; the next sync does it
// first.
func TestFailedReplayIsRepeatedByTheNextSync(t *testing.T) {
	h := newHarness(t, testOptions())
	installReplayServices(t, h)
	want := h.bridge.Dump()
	h.bridge.Wipe()
	h.bridge.FailNextApply(context.DeadlineExceeded)
	if err := h.p.Reconciler().Replay(context.Background()); err == nil {
		t.Fatal("want the injected error")
	}
	h.sync()
	if got := h.bridge.Dump(); got != want {
		t.Fatalf("the next sync did not replay:\n%s", got)
	}
}

func TestReplayHonoursContext(t *testing.T) {
	h := newHarness(t, testOptions())
	installReplayServices(t, h)
	batch := h.p.Reconciler().Begin() // a sync's bundle is being applied
	defer batch.Abort()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.p.Reconciler().Replay(ctx); err == nil {
		t.Fatal("Replay should give up when ctx is done")
	}
}
