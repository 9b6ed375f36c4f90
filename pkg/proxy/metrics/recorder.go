package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/observe"
)

// Namespace prefixes every metric name: kube-proxy's "kubeproxy_" becomes "antrea_proxy_".
const Namespace = "antrea_proxy"

// Traffic policy label values of NoLocalEndpoints, as in kube-proxy.
const (
	TrafficPolicyInternal = "internal"
	TrafficPolicyExternal = "external"
)

// Recorder is an observe.Observer that keeps the proxier's Prometheus metrics in its own registry.
type Recorder struct {
	clock    clock.PassiveClock
	registry *prometheus.Registry

	syncDuration        prometheus.Histogram
	fullSyncDuration    prometheus.Histogram
	partialSyncDuration prometheus.Histogram
	lastSync            prometheus.Gauge
	lastQueued          prometheus.Gauge
	programming         prometheus.Histogram
	serviceChanges      prometheus.Counter
	endpointChanges     prometheus.Counter
	noLocal             *prometheus.GaugeVec
	services            prometheus.Gauge
	endpoints           prometheus.Gauge
	flows               prometheus.Gauge
	groups              prometheus.Gauge
	failures            prometheus.Counter
	ctRemoved           *prometheus.CounterVec
	ctFailures          prometheus.Counter

	mu sync.Mutex
	// installed holds, for every installed Service, the counts of its last summary that the
	// gauges sum (what a new summary of the Service replaces); totals is their sum.
	installed map[types.NamespacedName]counts
	totals    totals
	// retained holds trigger times of failed syncs: they are observed when a sync succeeds.
	retained map[types.NamespacedName][]time.Time
}

var _ observe.Observer = (*Recorder)(nil)

// NewRecorder returns a Recorder with a new registry; clk supplies timestamps (nil means the
// real clock).
func NewRecorder(clk clock.PassiveClock) *Recorder {
	if clk == nil {
		clk = clock.RealClock{}
	}
	r := &Recorder{
		clock:     clk,
		registry:  prometheus.NewRegistry(),
		installed: map[types.NamespacedName]counts{},
		retained:  map[types.NamespacedName][]time.Time{},
	}
	syncBuckets := prometheus.ExponentialBuckets(0.001, 2, 15)
	r.syncDuration = r.histogram("sync_proxy_rules_duration_seconds", "SyncProxyRules latency in seconds: how long one sync took, successful or not.", syncBuckets)
	r.fullSyncDuration = r.histogram("sync_full_proxy_rules_duration_seconds", "SyncProxyRules latency in seconds for full resyncs.", syncBuckets)
	r.partialSyncDuration = r.histogram("sync_partial_proxy_rules_duration_seconds", "SyncProxyRules latency in seconds for partial resyncs.", syncBuckets)
	r.lastSync = r.gauge("sync_proxy_rules_last_timestamp_seconds", "The last time flows were successfully synced (Unix seconds).")
	r.lastQueued = r.gauge("sync_proxy_rules_last_queued_timestamp_seconds", "The last time a sync of flows was queued (Unix seconds).")
	r.programming = r.histogram("network_programming_duration_seconds", "In-cluster network programming latency in seconds: from an EndpointSlice's last-change-trigger-time to the end of the sync that installed it.", programmingBuckets())
	r.serviceChanges = r.counter("sync_proxy_rules_service_changes_total", "Cumulative Service changes processed by syncs (one per changed Service per sync).")
	r.endpointChanges = r.counter("sync_proxy_rules_endpoint_changes_total", "Cumulative endpoint changes processed by syncs (one per Service whose EndpointSlices changed per sync).")
	r.noLocal = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "sync_proxy_rules_no_local_endpoints_total",
		Help: "Number of Service ports (per IP family) with a Local traffic policy and no usable local endpoint.",
	}, []string{"traffic_policy"})
	r.registry.MustRegister(r.noLocal)
	r.services = r.gauge("services_installed", "Number of Services with flows installed.")
	r.endpoints = r.gauge("endpoints_installed", "Number of endpoints installed, counted once per Service port and IP family.")
	r.flows = r.gauge("flows_installed", "Number of OpenFlow flows the proxier has installed.")
	r.groups = r.gauge("groups_installed", "Number of OpenFlow groups the proxier has installed.")
	r.failures = r.counter("sync_failures_total", "Cumulative syncs that failed to install flows.")
	r.ctRemoved = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "udp_conntrack_entries_removed_total",
		Help: "Cumulative stale UDP conntrack entries the reconciler deleted, by reason (EndpointGone, ServiceGone, NoEndpointsThen).",
	}, []string{"reason"})
	r.registry.MustRegister(r.ctRemoved)
	r.ctFailures = r.counter("udp_conntrack_reconcile_failures_total", "Cumulative conntrack dumps and deletions of the UDP conntrack reconciler that failed.")
	// Both label values exist from the start, as kube-proxy's do after its first sync.
	r.noLocal.WithLabelValues(TrafficPolicyInternal).Set(0)
	r.noLocal.WithLabelValues(TrafficPolicyExternal).Set(0)
	return r
}

func (r *Recorder) histogram(name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: name, Help: help, Buckets: buckets})
	r.registry.MustRegister(h)
	return h
}

func (r *Recorder) gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: name, Help: help})
	r.registry.MustRegister(g)
	return g
}

func (r *Recorder) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help})
	r.registry.MustRegister(c)
	return c
}

// programmingBuckets are kube-proxy's network programming buckets: 0.25 s and 0.5 s, every
// second up to 59 s, every 5 s up to 115 s, every 30 s up to 5 min.
func programmingBuckets() []float64 {
	out := []float64{0.25, 0.5}
	out = append(out, prometheus.LinearBuckets(1, 1, 59)...)
	out = append(out, prometheus.LinearBuckets(60, 5, 12)...)
	return append(out, prometheus.LinearBuckets(120, 30, 7)...)
}

// Registry returns the Recorder's registry, e.g. to add Go runtime and process collectors.
func (r *Recorder) Registry() *prometheus.Registry { return r.registry }

// QueuedUpdate implements Observer.
func (r *Recorder) QueuedUpdate() { r.lastQueued.Set(unixSeconds(r.clock.Now())) }

// NodeUpdated implements Observer; no metric depends on the Node.
func (r *Recorder) NodeUpdated(*v1.Node) {}

// SyncDone implements Observer.
func (r *Recorder) SyncDone(res observe.SyncResult) {
	secs := res.Duration.Seconds()
	r.syncDuration.Observe(secs)
	if res.Full {
		r.fullSyncDuration.Observe(secs)
	} else {
		r.partialSyncDuration.Observe(secs)
	}
	r.serviceChanges.Add(float64(res.ServiceChanges))
	for reason, n := range res.Conntrack.Removed {
		r.ctRemoved.WithLabelValues(reason).Add(float64(n))
	}
	r.ctFailures.Add(float64(res.Conntrack.Failures))
	r.endpointChanges.Add(float64(res.EndpointChanges))

	r.mu.Lock()
	defer r.mu.Unlock()
	if res.Err != nil {
		r.failures.Inc()
		for nn, t := range res.TriggerTimes {
			r.retained[nn] = append(r.retained[nn], t)
		}
		return
	}
	end := res.Start.Add(res.Duration)
	r.lastSync.Set(unixSeconds(end))
	observe := func(nn types.NamespacedName, t time.Time) {
		if t.IsZero() {
			return
		}
		d := end.Sub(t)
		if d < 0 {
			klog.V(4).InfoS("Ignoring last-change-trigger-time in the future", "service", nn, "triggerTime", t, "syncEnd", end)
			return
		}
		r.programming.Observe(d.Seconds())
	}
	for nn, ts := range r.retained {
		for _, t := range ts {
			observe(nn, t)
		}
	}
	clear(r.retained)
	for nn, t := range res.TriggerTimes {
		observe(nn, t)
	}
	for nn, s := range res.Services {
		r.totals.add(r.installed[nn], -1)
		if s == nil {
			delete(r.installed, nn)
			continue
		}
		c := countsOf(s)
		r.installed[nn] = c
		r.totals.add(c, 1)
	}
	r.services.Set(float64(len(r.installed)))
	r.endpoints.Set(float64(r.totals.endpoints))
	r.noLocal.WithLabelValues(TrafficPolicyInternal).Set(float64(r.totals.noLocalInternal))
	r.noLocal.WithLabelValues(TrafficPolicyExternal).Set(float64(r.totals.noLocalExternal))
	r.flows.Set(float64(res.Flows))
	r.groups.Set(float64(res.Groups))
}

// counts are the numbers of one Service's summary that the gauges sum (ServiceSummary's
// Endpoints, NoLocalInternal and NoLocalExternal), kept small: the Recorder holds one per
// installed Service.
type counts struct {
	endpoints, noLocalInternal, noLocalExternal uint32
}

func countsOf(s *observe.ServiceSummary) counts {
	return counts{endpoints: uint32(s.Endpoints), noLocalInternal: uint32(s.NoLocalInternal),
		noLocalExternal: uint32(s.NoLocalExternal)}
}

// totals are the sums of the installed Services' counts.
type totals struct {
	endpoints, noLocalInternal, noLocalExternal int64
}

// add adds c to t sign times (1: a Service's new counts, -1: the counts it replaces).
func (t *totals) add(c counts, sign int64) {
	t.endpoints += sign * int64(c.endpoints)
	t.noLocalInternal += sign * int64(c.noLocalInternal)
	t.noLocalExternal += sign * int64(c.noLocalExternal)
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
