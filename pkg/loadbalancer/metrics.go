package loadbalancer

import (
	"net/http"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/antrea-proxy/antrea-proxy/pkg/loadbalancer/conditions"
	"github.com/antrea-proxy/antrea-proxy/pkg/loadbalancer/ipam"
)

// MetricsNamespace prefixes every metric name of antrea-controller.
const MetricsNamespace = "antrea_controller"

// Metrics holds antrea-controller's Prometheus metrics in their own
// registry. Counters and the sync histogram are updated by the
// Controller; pool usage, Services by condition, waiting Services and the
// leader gauge are read from live state at every scrape.
type Metrics struct {
	registry     *prometheus.Registry
	allocations  *prometheus.CounterVec
	releases     *prometheus.CounterVec
	syncDuration prometheus.Histogram
	syncErrors   prometheus.Counter
}

// NewMetrics returns Metrics with a new registry, holding the Go and
// process collectors besides antrea-controller's own.
func NewMetrics() *Metrics {
	m := &Metrics{registry: prometheus.NewRegistry()}
	m.allocations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: MetricsNamespace, Name: "lb_allocations_total",
		Help: "LoadBalancer addresses handed out to Services, by pool (one per Service and address; adopted and restored addresses are not counted).",
	}, []string{"pool"})
	m.releases = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: MetricsNamespace, Name: "lb_releases_total",
		Help: "LoadBalancer addresses Services gave back, by pool, counted once the writes that stop publishing them succeeded.",
	}, []string{"pool"})
	m.syncDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: MetricsNamespace, Name: "lb_sync_duration_seconds",
		Help:    "Duration of one Service sync, successful or not.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
	})
	m.syncErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: MetricsNamespace, Name: "lb_sync_errors_total",
		Help: "Service syncs that failed and were queued again with backoff.",
	})
	m.registry.MustRegister(m.allocations, m.releases, m.syncDuration, m.syncErrors,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

// Registry returns the registry, for collectors of other components.
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// RegisterLeader adds antrea_controller_leader, 1 while leading() is
// true.
func (m *Metrics) RegisterLeader(leading func() bool) error {
	return m.registry.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: MetricsNamespace, Name: "leader",
		Help: "1 while this replica is the one writing (holds the leader Lease, or leader election is disabled), 0 on a standby.",
	}, func() float64 {
		if leading() {
			return 1
		}
		return 0
	}))
}

func (m *Metrics) allocated(as []ipam.Assignment) {
	for _, a := range as {
		if a.Pool != nil {
			m.allocations.WithLabelValues(a.Pool.Name).Inc()
		}
	}
}

func (m *Metrics) released(pool *ipam.Pool) {
	if pool != nil {
		m.releases.WithLabelValues(pool.Name).Inc()
	}
}

func (m *Metrics) synced(d time.Duration, err error) {
	m.syncDuration.Observe(d.Seconds())
	if err != nil {
		m.syncErrors.Inc()
	}
}

// stateCollector reads the controller's state at scrape time.
type stateCollector struct {
	c        *Controller
	poolSize *prometheus.Desc
	poolUsed *prometheus.Desc
	reserved *prometheus.Desc
	services *prometheus.Desc
	waiting  *prometheus.Desc
}

func newStateCollector(c *Controller) *stateCollector {
	name := func(n string) string { return prometheus.BuildFQName(MetricsNamespace, "", n) }
	return &stateCollector{
		c:        c,
		poolSize: prometheus.NewDesc(name("lb_pool_addresses"), "Addresses in the pool.", []string{"pool"}, nil),
		poolUsed: prometheus.NewDesc(name("lb_pool_addresses_used"), "Addresses of the pool held by a Service (or still published by one that dropped it).", []string{"pool"}, nil),
		reserved: prometheus.NewDesc(name("lb_reserved_addresses"),
			"Free addresses of the pool kept for the namespace/name of the deleted Service that held them, until its grace period ends.", []string{"pool"}, nil),
		services: prometheus.NewDesc(name("lb_services"),
			"LoadBalancer Services of this controller's class, by KEP-4631 condition type, status and reason (a Service counts once per condition it carries).",
			[]string{"condition", "status", "reason"}, nil),
		waiting: prometheus.NewDesc(name("lb_waiting_services"), "Services waiting for an address (exhausted pool or requested address in use).", nil, nil),
	}
}

func (s *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- s.poolSize
	ch <- s.poolUsed
	ch <- s.reserved
	ch <- s.services
	ch <- s.waiting
}

func (s *stateCollector) Collect(ch chan<- prometheus.Metric) {
	for _, u := range s.c.alloc.Usage() {
		ch <- prometheus.MustNewConstMetric(s.poolSize, prometheus.GaugeValue, u.Pool.Size(), u.Pool.Name)
		ch <- prometheus.MustNewConstMetric(s.poolUsed, prometheus.GaugeValue, float64(u.Used), u.Pool.Name)
		ch <- prometheus.MustNewConstMetric(s.reserved, prometheus.GaugeValue, float64(u.Reserved), u.Pool.Name)
	}
	ch <- prometheus.MustNewConstMetric(s.waiting, prometheus.GaugeValue, float64(len(s.c.alloc.Waiters())))
	type condKey struct{ typ, status, reason string }
	counts := map[condKey]int{}
	svcs, err := s.c.services.List(labels.Everything())
	if err != nil {
		return
	}
	for _, svc := range svcs {
		if !s.c.handles(svc) {
			continue
		}
		for _, typ := range []string{conditions.TypeServing, conditions.TypeProvisioning, conditions.TypeDegraded} {
			if cond := meta.FindStatusCondition(svc.Status.Conditions, typ); cond != nil {
				counts[condKey{typ, string(cond.Status), cond.Reason}]++
			}
		}
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(s.services, prometheus.GaugeValue, float64(n), k.typ, k.status, k.reason)
	}
}

// countReleased counts the addresses a Service dropped, by pool.
func (c *Controller) countReleased(dropped []netip.Addr) {
	for _, a := range dropped {
		c.metrics.released(c.alloc.PoolOf(a))
	}
}
