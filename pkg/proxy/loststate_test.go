package proxy

import (
	"context"
	"testing"
)

// TestSyncAfterWipeReplaysInsteadOfQuarantining: a sync that runs after ovs-vswitchd lost every
// flow and group (before the healer replayed) meets a group that no longer exists. That is not
// the Service's fault: nothing is quarantined, no event is raised, and the next sync replays and
// then installs the change.
func TestSyncAfterWipeReplaysInsteadOfQuarantining(t *testing.T) {
	events := &eventLog{}
	opts := testOptions()
	opts.Events = events
	h := newHarness(t, opts)
	installReplayServices(t, h)
	h.bridge.Wipe()
	old := replayServices()[0]
	changed := makeService("ns1", "web", "10.96.0.10", withLB(30081, vip("172.18.0.100")), withETPLocal)
	h.updateService(old, changed)
	if err := h.p.SyncNow(context.Background(), false); err == nil {
		t.Fatal("the sync after the wipe: want an error (the bundle modifies a group OVS lost)")
	}
	for _, st := range h.p.Services() {
		if st.Problem != nil {
			t.Fatalf("%s quarantined after a wipe: %+v", st.Name, st.Problem)
		}
	}
	h.sync()
	fresh := newHarness(t, testOptions())
	installReplayServices(t, fresh)
	fresh.updateService(old, changed)
	fresh.sync()
	if got, want := h.bridge.Dump(), fresh.bridge.Dump(); got != want {
		t.Fatalf("after the wipe and the next sync the bridge differs from one that never lost anything:\n got:\n%s\nwant:\n%s", got, want)
	}
	if e := events.events(); len(e) != 0 {
		t.Fatalf("events after a wipe: %v", e)
	}
}
