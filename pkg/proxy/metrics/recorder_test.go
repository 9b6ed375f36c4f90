package metrics

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/antrea-proxy/antrea-proxy/pkg/httpserver"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/observe"
)

// snapshot is the gathered registry: metric name (without labels) to its family.
type snapshot map[string]*dto.MetricFamily

func gather(t *testing.T, r *Recorder) snapshot {
	t.Helper()
	fams, err := r.Registry().Gather()
	require.NoError(t, err)
	out := snapshot{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

// metric returns the metric of family name whose labels include all of labels (k=v pairs).
func (s snapshot) metric(t *testing.T, name string, labels ...string) *dto.Metric {
	t.Helper()
	f, ok := s[Namespace+"_"+name]
	require.True(t, ok, "metric %s_%s not registered", Namespace, name)
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			if have[labels[i]] != labels[i+1] {
				match = false
			}
		}
		if match {
			return m
		}
	}
	t.Fatalf("no %s with labels %v", name, labels)
	return nil
}

func (s snapshot) value(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	m := s.metric(t, name, labels...)
	switch {
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	}
	t.Fatalf("%s is neither a gauge nor a counter", name)
	return 0
}

func (s snapshot) histogram(t *testing.T, name string) (count uint64, sum float64) {
	t.Helper()
	h := s.metric(t, name).GetHistogram()
	require.NotNil(t, h, "%s is not a histogram", name)
	return h.GetSampleCount(), h.GetSampleSum()
}

var (
	svcA = types.NamespacedName{Namespace: "ns", Name: "a"}
	svcB = types.NamespacedName{Namespace: "ns", Name: "b"}
)

func TestRecorderSyncs(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	clk := clocktesting.NewFakeClock(t0)
	r := NewRecorder(clk)

	// Nothing synced yet: the no-local gauges exist with both labels.
	s := gather(t, r)
	require.Equal(t, 0.0, s.value(t, "sync_proxy_rules_no_local_endpoints_total", "traffic_policy", "internal"))
	require.Equal(t, 0.0, s.value(t, "sync_proxy_rules_no_local_endpoints_total", "traffic_policy", "external"))

	r.QueuedUpdate()
	require.Equal(t, float64(t0.Unix()), gather(t, r).value(t, "sync_proxy_rules_last_queued_timestamp_seconds"))

	// Sync 1 (full, success): two Services; endpoints of A were triggered 2 s before the end.
	start := t0.Add(time.Second)
	r.SyncDone(observe.SyncResult{
		Start: start, Duration: 500 * time.Millisecond, Full: true,
		ServiceChanges: 2, EndpointChanges: 1,
		TriggerTimes: map[types.NamespacedName]time.Time{svcA: start.Add(500 * time.Millisecond).Add(-2 * time.Second)},
		Services: map[types.NamespacedName]*observe.ServiceSummary{
			svcA: {Ports: 2, Endpoints: 4, NoLocalExternal: 1},
			svcB: {Ports: 1, Endpoints: 1, NoLocalInternal: 1},
		},
		Flows: 40, Groups: 3,
	})
	s = gather(t, r)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"services_installed", nil, 2},
		{"endpoints_installed", nil, 5},
		{"flows_installed", nil, 40},
		{"groups_installed", nil, 3},
		{"sync_failures_total", nil, 0},
		{"sync_proxy_rules_service_changes_total", nil, 2},
		{"sync_proxy_rules_endpoint_changes_total", nil, 1},
		{"sync_proxy_rules_no_local_endpoints_total", []string{"traffic_policy", "internal"}, 1},
		{"sync_proxy_rules_no_local_endpoints_total", []string{"traffic_policy", "external"}, 1},
		{"sync_proxy_rules_last_timestamp_seconds", nil, float64(t0.Unix()) + 1.5},
	} {
		require.Equal(t, c.want, s.value(t, c.name, c.labels...), "%s %v after sync 1", c.name, c.labels)
	}
	n, sum := s.histogram(t, "sync_proxy_rules_duration_seconds")
	require.Equal(t, uint64(1), n)
	require.InDelta(t, 0.5, sum, 1e-9)
	n, _ = s.histogram(t, "sync_full_proxy_rules_duration_seconds")
	require.Equal(t, uint64(1), n)
	n, _ = s.histogram(t, "sync_partial_proxy_rules_duration_seconds")
	require.Equal(t, uint64(0), n)
	n, sum = s.histogram(t, "network_programming_duration_seconds")
	require.Equal(t, uint64(1), n)
	require.InDelta(t, 2.0, sum, 1e-9)

	// Sync 2 (partial, fails): its trigger time is kept, nothing installed changes.
	start2 := t0.Add(10 * time.Second)
	r.SyncDone(observe.SyncResult{
		Start: start2, Duration: time.Second, Err: errors.New("bundle rejected"),
		EndpointChanges: 1,
		TriggerTimes:    map[types.NamespacedName]time.Time{svcB: start2.Add(-time.Second)},
		Services:        map[types.NamespacedName]*observe.ServiceSummary{svcB: nil},
		Flows:           40, Groups: 3,
	})
	s = gather(t, r)
	require.Equal(t, 1.0, s.value(t, "sync_failures_total"))
	require.Equal(t, 2.0, s.value(t, "services_installed"), "a failed sync must not change installed Services")
	require.Equal(t, float64(t0.Unix())+1.5, s.value(t, "sync_proxy_rules_last_timestamp_seconds"), "a failed sync is not a successful one")
	require.Equal(t, 2.0, s.value(t, "sync_proxy_rules_endpoint_changes_total"))
	n, _ = s.histogram(t, "network_programming_duration_seconds")
	require.Equal(t, uint64(1), n, "trigger times of a failed sync are not observed yet")
	n, _ = s.histogram(t, "sync_partial_proxy_rules_duration_seconds")
	require.Equal(t, uint64(1), n)

	// Sync 3 (retry succeeds): B is removed and A loses its no-local port; B's retained trigger
	// time is observed now (retry ends 4 s after it), a future trigger time is ignored.
	start3 := t0.Add(12 * time.Second)
	r.SyncDone(observe.SyncResult{
		Start: start3, Duration: time.Second,
		TriggerTimes: map[types.NamespacedName]time.Time{svcA: start3.Add(time.Hour)},
		Services: map[types.NamespacedName]*observe.ServiceSummary{
			svcA: {Ports: 2, Endpoints: 2},
			svcB: nil,
		},
		Flows: 20, Groups: 2,
	})
	s = gather(t, r)
	require.Equal(t, 1.0, s.value(t, "services_installed"))
	require.Equal(t, 2.0, s.value(t, "endpoints_installed"))
	require.Equal(t, 20.0, s.value(t, "flows_installed"))
	require.Equal(t, 2.0, s.value(t, "groups_installed"))
	require.Equal(t, 0.0, s.value(t, "sync_proxy_rules_no_local_endpoints_total", "traffic_policy", "internal"))
	require.Equal(t, 0.0, s.value(t, "sync_proxy_rules_no_local_endpoints_total", "traffic_policy", "external"))
	require.Equal(t, float64(t0.Unix())+13, s.value(t, "sync_proxy_rules_last_timestamp_seconds"))
	n, sum = s.histogram(t, "network_programming_duration_seconds")
	require.Equal(t, uint64(2), n)
	require.InDelta(t, 2.0+4.0, sum, 1e-9)
	n, _ = s.histogram(t, "sync_proxy_rules_duration_seconds")
	require.Equal(t, uint64(3), n)
}

func TestRecorderOwnRegistry(t *testing.T) {
	// Two Recorders must not collide (no global registry).
	a, b := NewRecorder(nil), NewRecorder(nil)
	a.SyncDone(observe.SyncResult{Err: errors.New("x")})
	require.Equal(t, 1.0, gather(t, a).value(t, "sync_failures_total"))
	require.Equal(t, 0.0, gather(t, b).value(t, "sync_failures_total"))
}

func TestServeMetrics(t *testing.T) {
	r := NewRecorder(clocktesting.NewFakeClock(time.Unix(100, 0)))
	r.SyncDone(observe.SyncResult{Services: map[types.NamespacedName]*observe.ServiceSummary{svcA: {Ports: 1}}, Flows: 7})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- httpserver.Serve(ctx, ln, r.Mux(), nil) }()

	resp, err := http.Get("http://" + ln.Addr().String() + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	for _, line := range []string{"antrea_proxy_flows_installed 7", "antrea_proxy_services_installed 1", "antrea_proxy_sync_proxy_rules_duration_seconds_count 1"} {
		require.Contains(t, strings.Split(string(body), "\n"), line)
	}
	cancel()
	require.NoError(t, <-done)
}

func TestServeListenError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	err = NewRecorder(nil).Serve(context.Background(), ln.Addr().String(), nil)
	require.ErrorContains(t, err, ln.Addr().String())
}

// TestRecorderConntrack: the UDP conntrack reconciler's removals add up per reason, and its
// failures in one counter.
func TestRecorderConntrack(t *testing.T) {
	r := NewRecorder(nil)
	r.SyncDone(observe.SyncResult{Full: true, Conntrack: observe.ConntrackResult{Removed: map[string]int{"EndpointGone": 2, "ServiceGone": 1}}})
	r.SyncDone(observe.SyncResult{Conntrack: observe.ConntrackResult{Removed: map[string]int{"EndpointGone": 3}, Failures: 1}})
	s := gather(t, r)
	require.Equal(t, 5.0, s.value(t, "udp_conntrack_entries_removed_total", "reason", "EndpointGone"))
	require.Equal(t, 1.0, s.value(t, "udp_conntrack_entries_removed_total", "reason", "ServiceGone"))
	require.Equal(t, 1.0, s.value(t, "udp_conntrack_reconcile_failures_total"))
}
