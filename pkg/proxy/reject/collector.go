package reject

import "github.com/prometheus/client_golang/prometheus"

// Collector exports the responder's counters as <namespace>_reject_packets_total, one series per
// result: replied, rate_limited (a refusal the global rate limit swallowed: the client times
// out instead of being refused), source_limited (one the client's own share swallowed), no_reply (nothing to answer, or malformed), ignored (not a reject
// flow's packet-in) and send_failed. They are read at each scrape.
func (r *Responder) Collector(namespace string) prometheus.Collector {
	return &collector{r: r, desc: prometheus.NewDesc(prometheus.BuildFQName(namespace, "reject", "packets_total"),
		"Packet-ins the reject responder handled, by result.", []string{"result"}, nil)}
}

type collector struct {
	r    *Responder
	desc *prometheus.Desc
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := c.r.Stats()
	for _, v := range []struct {
		result string
		n      uint64
	}{{"replied", s.Replied}, {"rate_limited", s.RateLimited}, {"source_limited", s.SourceLimited}, {"no_reply", s.NoReply}, {"ignored", s.Ignored}, {"send_failed", s.SendFailed}} {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(v.n), v.result)
	}
}
