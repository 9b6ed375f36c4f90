package healthcheck

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/antrea-proxy/antrea-proxy/pkg/httpserver"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/observe"
)

const syncPeriod = 30 * time.Second

func get(t *testing.T, h http.Handler) (int, healthResponse, http.Header) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	var body healthResponse
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body), "body %q", rec.Body.String())
	return rec.Code, body, rec.Header()
}

func node(deleting bool, taints ...string) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1"}}
	if deleting {
		now := metav1.Now()
		n.DeletionTimestamp = &now
	}
	for _, k := range taints {
		n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: k, Effect: v1.TaintEffectNoSchedule})
	}
	return n
}

func TestProxyHealthStaleness(t *testing.T) {
	type step struct {
		name    string
		advance time.Duration
		do      func(h *ProxyHealth)
		healthz int
		livez   int
	}
	queue := func(h *ProxyHealth) { h.QueuedUpdate() }
	okSync := func(h *ProxyHealth) { h.SyncDone(observe.SyncResult{}) }
	failSync := func(h *ProxyHealth) { h.SyncDone(observe.SyncResult{Err: errors.New("ovs down")}) }
	tests := []struct {
		name  string
		steps []step
	}{
		{
			name: "healthy at start and without pending changes, however long",
			steps: []step{
				{name: "start", healthz: 200, livez: 200},
				{name: "idle 10 periods", advance: 10 * syncPeriod, healthz: 200, livez: 200},
			},
		},
		{
			name: "pending change turns stale at exactly 2×syncPeriod",
			steps: []step{
				{name: "queued", do: queue, healthz: 200, livez: 200},
				{name: "just under", advance: 2*syncPeriod - time.Millisecond, healthz: 200, livez: 200},
				{name: "at timeout", advance: time.Millisecond, healthz: 503, livez: 503},
				{name: "successful sync recovers", do: okSync, healthz: 200, livez: 200},
			},
		},
		{
			name: "only the oldest pending change counts",
			steps: []step{
				{name: "first change", do: queue, healthz: 200, livez: 200},
				{name: "second change later", advance: syncPeriod, do: queue, healthz: 200, livez: 200},
				{name: "2×period after the first", advance: syncPeriod, healthz: 503, livez: 503},
			},
		},
		{
			name: "failed syncs do not count as updates",
			steps: []step{
				{name: "queued", do: queue, healthz: 200, livez: 200},
				{name: "fails", advance: syncPeriod, do: failSync, healthz: 200, livez: 200},
				{name: "fails again past timeout", advance: syncPeriod, do: failSync, healthz: 503, livez: 503},
				{name: "new change while stale keeps oldest", advance: time.Second, do: queue, healthz: 503, livez: 503},
				{name: "success", do: okSync, healthz: 200, livez: 200},
				{name: "fresh change after success is young", do: queue, healthz: 200, livez: 200},
			},
		},
		{
			name: "node being deleted fails healthz only",
			steps: []step{
				{name: "deletionTimestamp", do: func(h *ProxyHealth) { h.NodeUpdated(node(true)) }, healthz: 503, livez: 200},
				{name: "node back to normal", do: func(h *ProxyHealth) { h.NodeUpdated(node(false)) }, healthz: 200, livez: 200},
				{name: "autoscaler taint", do: func(h *ProxyHealth) { h.NodeUpdated(node(false, "other", ToBeDeletedTaint)) }, healthz: 503, livez: 200},
				{name: "stale as well", do: queue, advance: 0, healthz: 503, livez: 200},
				{name: "stale and tainted", advance: 2 * syncPeriod, healthz: 503, livez: 503},
				{name: "synced, taint removed", do: func(h *ProxyHealth) { okSync(h); h.NodeUpdated(node(false, "other")) }, healthz: 200, livez: 200},
				{name: "nil node ignored", do: func(h *ProxyHealth) { h.NodeUpdated(nil) }, healthz: 200, livez: 200},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
			h := NewProxyHealth(syncPeriod, clk)
			for _, s := range tc.steps {
				clk.Step(s.advance)
				if s.do != nil {
					s.do(h)
				}
				code, body, hdr := get(t, h.HealthzHandler())
				require.Equal(t, s.healthz, code, "%s: /healthz", s.name)
				require.Equal(t, "application/json", hdr.Get("Content-Type"))
				require.Equal(t, "nosniff", hdr.Get("X-Content-Type-Options"))
				require.NotNil(t, body.NodeEligible, "%s: /healthz reports nodeEligible", s.name)
				require.True(t, body.CurrentTime.Equal(clk.Now()), "%s: currentTime", s.name)
				if code == 200 {
					require.True(t, body.LastUpdated.Equal(clk.Now()), "%s: healthy lastUpdated is now", s.name)
				}
				code, body, _ = get(t, h.LivezHandler())
				require.Equal(t, s.livez, code, "%s: /livez", s.name)
				require.Nil(t, body.NodeEligible, "%s: /livez has no nodeEligible", s.name)
				require.Equal(t, s.livez == 200, h.IsHealthy(), "%s: IsHealthy", s.name)
			}
		})
	}
}

func TestProxyHealthReportsLastUpdateWhenStale(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	h := NewProxyHealth(syncPeriod, clk)
	h.Updated()
	synced := clk.Now()
	clk.Step(time.Second)
	h.QueuedUpdate()
	clk.Step(2 * syncPeriod)
	code, body, _ := get(t, h.LivezHandler())
	require.Equal(t, 503, code)
	require.True(t, body.LastUpdated.Equal(synced), "lastUpdated %v, want %v", body.LastUpdated, synced)
}

func TestProxyHealthServe(t *testing.T) {
	h := NewProxyHealth(syncPeriod, nil)
	h.NodeUpdated(node(true))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- httpserver.Serve(ctx, ln, h.Mux(), nil) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	for path, want := range map[string]int{"/healthz": 503, "/livez": 200} {
		resp, err := http.Get("http://" + ln.Addr().String() + path)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, want, resp.StatusCode, path)
	}
}

func getLivez(t *testing.T, h *ProxyHealth) (int, map[string]any) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.LivezHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/livez", nil))
	var body map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body), "body %q", rec.Body.String())
	return rec.Code, body
}

// fakeOVS is an OpenFlow connection whose state a test sets.
type fakeOVS struct {
	mu    sync.Mutex
	up    bool
	since time.Time
}

func (f *fakeOVS) Connected() (bool, time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.up, f.since
}

func (f *fakeOVS) set(up bool, since time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.up, f.since = up, since
}

func TestLivezFailsWhenOVSStaysDisconnected(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	h := NewProxyHealth(syncPeriod, clk)
	code, body := getLivez(t, h)
	require.Equal(t, http.StatusOK, code, "connected while no connection is watched")
	require.Equal(t, true, body["ovsConnected"])
	require.NotContains(t, body, "reason")

	ovs := &fakeOVS{up: true, since: clk.Now()}
	h.WatchOVS(ovs)
	require.True(t, h.IsHealthy())
	lost := clk.Now()
	ovs.set(false, lost) // read when asked: nothing reports the loss to the health
	clk.Step(DefaultOVSDisconnectGrace - time.Second)
	code, body = getLivez(t, h)
	require.Equal(t, http.StatusOK, code, "within the grace period")
	require.Equal(t, false, body["ovsConnected"])
	require.Equal(t, lost.UTC().Format(time.RFC3339), body["ovsDisconnectedSince"])

	clk.Step(time.Second)
	code, body = getLivez(t, h)
	require.Equal(t, http.StatusServiceUnavailable, code, "grace period over")
	require.Contains(t, body["reason"], "OpenFlow connection to OVS has been down for 1m0s")
	require.False(t, h.IsHealthy())
	hz, hzBody, _ := get(t, h.HealthzHandler())
	require.Equal(t, http.StatusServiceUnavailable, hz, "/healthz includes /livez's verdict")
	require.Contains(t, hzBody.Reason, "OVS")

	ovs.set(true, clk.Now())
	code, body = getLivez(t, h)
	require.Equal(t, http.StatusOK, code, "reconnected")
	require.Equal(t, true, body["ovsConnected"])
	require.NotContains(t, body, "ovsDisconnectedSince")
}

func TestOVSDisconnectGraceOption(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	h := NewProxyHealth(syncPeriod, clk, WithOVSDisconnectGrace(5*time.Second))
	h.WatchOVS(&fakeOVS{up: false, since: clk.Now()})
	clk.Step(4 * time.Second)
	require.True(t, h.IsHealthy())
	clk.Step(time.Second)
	require.False(t, h.IsHealthy())

	// Both reasons at once: a stalled sync and OVS down.
	h.QueuedUpdate()
	clk.Step(2 * syncPeriod)
	code, body := getLivez(t, h)
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, body["reason"], "waited 1m0s for a sync")
	require.Contains(t, body["reason"], "OVS has been down for 1m5s")
}
