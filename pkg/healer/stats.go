package healer

import (
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Stats is a snapshot of what the Healer did, per owner.
type Stats struct {
	// Owners is keyed by Owner.Name().
	Owners map[string]OwnerStats
	// TableChecks counts the periodic checks answered by a table statistics request,
	// TableCheckErrors the table statistics requests that failed, and FullChecks the passes
	// that verified every owner (each Verify counts OVS's flows of the owner).
	TableChecks, TableCheckErrors, FullChecks int
	// ChangeReports counts the reports of Options.Changes (changes by other writers, and the
	// feed starting or stopping to watch).
	ChangeReports int
}

// OwnerStats is what the Healer did with one owner.
type OwnerStats struct {
	// Replays counts successful replays per trigger; ReplayFailures failed ones.
	Replays        map[Trigger]int
	ReplayFailures map[Trigger]int
	// LastReplayDuration is how long the last replay (successful or not) took.
	LastReplayDuration time.Duration
	// Mismatches counts Verify calls that reported a mismatch; VerifyErrors those that failed.
	Mismatches, VerifyErrors int
}

type statsStore struct {
	mu                                   sync.Mutex
	owners                               map[string]*OwnerStats
	tableChecks, tableErrors, fullChecks int
	changeReports                        int
}

func (s *statsStore) tableChecked()     { s.add(&s.tableChecks) }
func (s *statsStore) tableCheckFailed() { s.add(&s.tableErrors) }
func (s *statsStore) fullChecked()      { s.add(&s.fullChecks) }
func (s *statsStore) changeReported()   { s.add(&s.changeReports) }

func (s *statsStore) add(n *int) {
	s.mu.Lock()
	*n++
	s.mu.Unlock()
}

func newStatsStore() *statsStore { return &statsStore{owners: map[string]*OwnerStats{}} }

func (s *statsStore) owner(name string) *OwnerStats {
	o := s.owners[name]
	if o == nil {
		o = &OwnerStats{Replays: map[Trigger]int{}, ReplayFailures: map[Trigger]int{}}
		s.owners[name] = o
	}
	return o
}

func (s *statsStore) replayed(name string, t Trigger, d time.Duration, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.owner(name)
	o.LastReplayDuration = d
	if err != nil {
		o.ReplayFailures[t]++
	} else {
		o.Replays[t]++
	}
}

func (s *statsStore) verified(name string, ok bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.owner(name)
	switch {
	case err != nil:
		o.VerifyErrors++
	case !ok:
		o.Mismatches++
	}
}

// Stats returns a copy of the Healer's counters.
func (h *Healer) Stats() Stats {
	h.stats.mu.Lock()
	defer h.stats.mu.Unlock()
	out := Stats{Owners: make(map[string]OwnerStats, len(h.stats.owners)),
		TableChecks: h.stats.tableChecks, TableCheckErrors: h.stats.tableErrors, FullChecks: h.stats.fullChecks,
		ChangeReports: h.stats.changeReports}
	for name, o := range h.stats.owners {
		c := *o
		c.Replays = copyCounts(o.Replays)
		c.ReplayFailures = copyCounts(o.ReplayFailures)
		out.Owners[name] = c
	}
	return out
}

func copyCounts(m map[Trigger]int) map[Trigger]int {
	c := make(map[Trigger]int, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// metricsNamespace prefixes the Healer's metric names, like the proxier's.
const metricsNamespace = "antrea_proxy"

// collector exports a Healer's Stats as Prometheus metrics.
type collector struct {
	h                             *Healer
	replays, duration, mismatches *prometheus.Desc
	verifyErrors                  *prometheus.Desc
	checks, tableErrors           *prometheus.Desc
	changeReports, watching       *prometheus.Desc
}

// RegisterMetrics registers the Healer's metrics with reg:
// antrea_proxy_healer_replays_total{owner,trigger,result}, antrea_proxy_healer_last_replay_duration_seconds{owner},
// antrea_proxy_healer_mismatches_total{owner}, antrea_proxy_healer_verify_errors_total{owner},
// antrea_proxy_healer_checks_total{kind} (kind "tables" or "full"),
// antrea_proxy_healer_table_stats_errors_total, antrea_proxy_healer_change_reports_total and
// antrea_proxy_healer_watching.
func (h *Healer) RegisterMetrics(reg prometheus.Registerer) error {
	name := func(n string) string { return prometheus.BuildFQName(metricsNamespace, "healer", n) }
	return reg.Register(&collector{
		h: h,
		replays: prometheus.NewDesc(name("replays_total"),
			"Replays of an owner's flows and groups, by trigger (reset, mismatch, startup) and result (success, failure).",
			[]string{"owner", "trigger", "result"}, nil),
		duration: prometheus.NewDesc(name("last_replay_duration_seconds"),
			"How long the last replay of an owner took, successful or not.", []string{"owner"}, nil),
		mismatches: prometheus.NewDesc(name("mismatches_total"),
			"Periodic checks that found an owner's flows in OVS differing from what it installed.", []string{"owner"}, nil),
		verifyErrors: prometheus.NewDesc(name("verify_errors_total"),
			"Periodic checks of an owner that failed (nothing was replayed).", []string{"owner"}, nil),
		checks: prometheus.NewDesc(name("checks_total"),
			"Checks of OVS against what the owners installed: by a table statistics request (tables) or by verifying every owner (full).",
			[]string{"kind"}, nil),
		tableErrors: prometheus.NewDesc(name("table_stats_errors_total"),
			"Table statistics requests of the periodic check that failed (every owner was verified instead).", nil, nil),
		changeReports: prometheus.NewDesc(name("change_reports_total"),
			"Reports of OVS's flow monitor: changes of the flows by other writers than the agent, and the monitor starting or stopping.", nil, nil),
		watching: prometheus.NewDesc(name("watching"),
			"1 while OVS reports the changes of the flows (checks then run every 30 s and after each change), 0 while the healer checks every second.", nil, nil),
	})
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.replays
	ch <- c.duration
	ch <- c.mismatches
	ch <- c.verifyErrors
	ch <- c.checks
	ch <- c.tableErrors
	ch <- c.changeReports
	ch <- c.watching
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	st := c.h.Stats()
	ch <- prometheus.MustNewConstMetric(c.checks, prometheus.CounterValue, float64(st.TableChecks), "tables")
	ch <- prometheus.MustNewConstMetric(c.checks, prometheus.CounterValue, float64(st.FullChecks), "full")
	ch <- prometheus.MustNewConstMetric(c.tableErrors, prometheus.CounterValue, float64(st.TableCheckErrors))
	ch <- prometheus.MustNewConstMetric(c.changeReports, prometheus.CounterValue, float64(st.ChangeReports))
	watching := 0.0
	if f := c.h.opts.Changes; f != nil && f.Watching() {
		watching = 1
	}
	ch <- prometheus.MustNewConstMetric(c.watching, prometheus.GaugeValue, watching)
	names := make([]string, 0, len(st.Owners))
	for n := range st.Owners {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		o := st.Owners[n]
		for _, t := range []Trigger{TriggerReset, TriggerMismatch, TriggerStartup} {
			ch <- prometheus.MustNewConstMetric(c.replays, prometheus.CounterValue, float64(o.Replays[t]), n, string(t), "success")
			ch <- prometheus.MustNewConstMetric(c.replays, prometheus.CounterValue, float64(o.ReplayFailures[t]), n, string(t), "failure")
		}
		ch <- prometheus.MustNewConstMetric(c.duration, prometheus.GaugeValue, o.LastReplayDuration.Seconds(), n)
		ch <- prometheus.MustNewConstMetric(c.mismatches, prometheus.CounterValue, float64(o.Mismatches), n)
		ch <- prometheus.MustNewConstMetric(c.verifyErrors, prometheus.CounterValue, float64(o.VerifyErrors), n)
	}
}
