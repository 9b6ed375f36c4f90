package server

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// stats counts what went wrong with the server's state on disk, for its metrics.
type stats struct {
	mu              sync.Mutex
	quarantinedBy   map[string]uint64
	writeFailures   uint64
	unsavedRecords  int
	restoreFailures uint64
}

func newStats() *stats { return &stats{quarantinedBy: map[string]uint64{}} }

func (s *stats) quarantined(kind string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.quarantinedBy[kind]++
}

func (s *stats) writeFailed(error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writeFailures++
}

func (s *stats) setUnsaved(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unsavedRecords = n
}

func (s *stats) restoreFailed() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.restoreFailures++
}

// Stats is a snapshot of the server's state problems.
type Stats struct {
	// Quarantined counts the files moved aside (or found unusable and impossible to move or
	// remove), by kind (KindPodRecord, ...).
	Quarantined map[string]uint64
	// WriteFailures counts writes of pod records that failed for lack of space.
	WriteFailures uint64
	// UnsavedRecords and UnsavedAddresses are the pod records and address reservations kept
	// in memory only, until the disk has room again.
	UnsavedRecords, UnsavedAddresses int
	// RestoreFailures counts pods (and spooled DELs) that could not be restored (carried
	// out) at start-up or at a later retry.
	RestoreFailures uint64
}

// Stats returns a snapshot of the server's state problems.
func (s *Server) Stats() Stats {
	s.stats.mu.Lock()
	out := Stats{Quarantined: map[string]uint64{}, WriteFailures: s.stats.writeFailures,
		UnsavedRecords: s.stats.unsavedRecords, RestoreFailures: s.stats.restoreFailures}
	for k, v := range s.stats.quarantinedBy {
		out.Quarantined[k] = v
	}
	s.stats.mu.Unlock()
	out.UnsavedAddresses = s.ipam.Unsaved()
	return out
}

// Collector returns the server's metrics, named namespace_cni_...
func (s *Server) Collector(namespace string) prometheus.Collector {
	name := func(n string) string { return prometheus.BuildFQName(namespace, "cni", n) }
	return &collector{s: s,
		quarantined: prometheus.NewDesc(name("quarantined_files_total"),
			"CNI state files (pod records, spooled DELs, address reservations) that could not be used and were moved aside.", []string{"kind"}, nil),
		writeFailures: prometheus.NewDesc(name("state_write_failures_total"),
			"Writes of pod records that failed because the disk was full (the record is kept in memory and written later).", nil, nil),
		unsaved: prometheus.NewDesc(name("unsaved_state"),
			"CNI state kept in memory only because the disk was full, by what.", []string{"what"}, nil),
		restoreFailures: prometheus.NewDesc(name("restore_failures_total"),
			"Pods and spooled DELs the CNI server could not restore or carry out at start-up (retried later).", nil, nil),
	}
}

type collector struct {
	s                                                    *Server
	quarantined, writeFailures, unsaved, restoreFailures *prometheus.Desc
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.quarantined
	ch <- c.writeFailures
	ch <- c.unsaved
	ch <- c.restoreFailures
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.Stats()
	for _, kind := range []string{KindPodRecord, KindSpooledDel, KindIPAM} {
		ch <- prometheus.MustNewConstMetric(c.quarantined, prometheus.CounterValue, float64(st.Quarantined[kind]), kind)
	}
	ch <- prometheus.MustNewConstMetric(c.writeFailures, prometheus.CounterValue, float64(st.WriteFailures))
	ch <- prometheus.MustNewConstMetric(c.unsaved, prometheus.GaugeValue, float64(st.UnsavedRecords), "pod-records")
	ch <- prometheus.MustNewConstMetric(c.unsaved, prometheus.GaugeValue, float64(st.UnsavedAddresses), "address-reservations")
	ch <- prometheus.MustNewConstMetric(c.restoreFailures, prometheus.CounterValue, float64(st.RestoreFailures))
}
