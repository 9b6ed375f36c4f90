package agent

import (
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/observe"
)

// TestStartupReleaseAfterFirstFullSyncAndAtRest: the first successful full sync sets the
// steady GC percent and releases; the first later full sync that recomputed nothing releases
// once more; nothing before, between or after does.
func TestStartupReleaseAfterFirstFullSyncAndAtRest(t *testing.T) {
	released := 0
	var percents []int
	r := &startupRelease{release: func() { released++ }, spawn: func(f func()) { f() },
		setGCPercent: func(p int) int { percents = append(percents, p); return 100 }}
	r.SyncDone(observe.SyncResult{Full: false})
	r.SyncDone(observe.SyncResult{Full: true, Err: errors.New("bundle refused")})
	if released != 0 || len(percents) != 0 {
		t.Fatalf("released %d times, GC percents %v before a successful full sync", released, percents)
	}
	r.SyncDone(observe.SyncResult{Full: true, Services: map[types.NamespacedName]*observe.ServiceSummary{{Name: "a"}: {}}})
	if released != 1 || len(percents) != 1 || percents[0] != steadyGCPercent {
		t.Fatalf("after the first full sync: released %d times, GC percents %v; want 1 and [%d]", released, percents, steadyGCPercent)
	}
	r.SyncDone(observe.SyncResult{Full: true, EndpointChanges: 3})
	r.SyncDone(observe.SyncResult{Full: true, Services: map[types.NamespacedName]*observe.ServiceSummary{{Name: "b"}: nil}})
	r.SyncDone(observe.SyncResult{Full: false})
	r.SyncDone(observe.SyncResult{Full: true, Err: errors.New("bundle refused")})
	if released != 1 {
		t.Fatalf("full syncs that recomputed something: released %d times, want 1", released)
	}
	r.SyncDone(observe.SyncResult{Full: true})
	if released != 2 || len(percents) != 1 {
		t.Fatalf("the first full sync at rest: released %d times, GC percents %v; want 2 and one", released, percents)
	}
	r.SyncDone(observe.SyncResult{Full: true})
	r.SyncDone(observe.SyncResult{Full: false})
	if released != 2 || len(percents) != 1 {
		t.Fatalf("later syncs: released %d times, GC percents %v; want 2 and one", released, percents)
	}
}

// TestStartupReleaseKeepsEnvironmentGOGC: with GOGC or GOMEMLIMIT set, the GC percent is the
// environment's.
func TestStartupReleaseKeepsEnvironmentGOGC(t *testing.T) {
	for _, env := range []string{"GOGC", "GOMEMLIMIT"} {
		t.Run(env, func(t *testing.T) {
			t.Setenv("GOGC", "")
			t.Setenv("GOMEMLIMIT", "")
			t.Setenv(env, map[string]string{"GOGC": "200", "GOMEMLIMIT": "1GiB"}[env])
			if r := newStartupRelease(); r.setGCPercent != nil {
				t.Errorf("%s set: the GC percent would be changed", env)
			}
		})
	}
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	if r := newStartupRelease(); r.setGCPercent == nil {
		t.Error("neither set: the steady GC percent would not be applied")
	}
}
