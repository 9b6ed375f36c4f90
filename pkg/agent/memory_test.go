package agent

import (
	"errors"
	"testing"

	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/observe"
)

func TestStartupReleaseOnceAfterFirstFullSync(t *testing.T) {
	released := 0
	r := &startupRelease{release: func() { released++ }, spawn: func(f func()) { f() }}
	r.SyncDone(observe.SyncResult{Full: false})
	r.SyncDone(observe.SyncResult{Full: true, Err: errors.New("bundle refused")})
	if released != 0 {
		t.Fatal("released before a successful full sync")
	}
	r.SyncDone(observe.SyncResult{Full: true})
	if released != 1 {
		t.Fatalf("released %d times after the first successful full sync, want 1", released)
	}
	r.SyncDone(observe.SyncResult{Full: true})
	r.SyncDone(observe.SyncResult{Full: false})
	if released != 1 {
		t.Fatalf("released %d times after later syncs, want 1", released)
	}
}
