package agent

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/config"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

// rateLimitScrapeTimeout bounds the OVS requests of one scrape.
const rateLimitScrapeTimeout = 5 * time.Second

// rateLimitCollector exports what the datapath rate limits did, read from OVS at each scrape:
//
//   - <ns>_reject_meter_packets_total{result="passed"|"dropped"}: packets that entered the
//     reject meters, summed over the meters (OFPMP_METER_STATS: packet_in_count less the drop
//     band's count, and the drop band's count). Absent when the meters are not installed.
//   - <ns>_affinity_learned_flows: session affinity flows in the SessionAffinity table (its
//     active flow count from the table statistics, less the agent's own miss flow).
//   - <ns>_affinity_learn_refused_packets_total: packets whose learn the per-Service bound
//     refused (the packet count of the counting flow, an aggregate statistics request on its
//     exact cookie); they were load-balanced without affinity.
//   - <ns>_affinity_flow_limit{scope="service"|"node"}: the configured bounds.
type rateLimitCollector struct {
	b                 rateLimitBridge
	meters            uint32
	round             uint16
	perService, total int

	meterPackets, learned, refused, limit *prometheus.Desc
}

func newRateLimitCollector(ns string, b rateLimitBridge, meters uint32, round uint16, l config.RateLimitConfig) *rateLimitCollector {
	return &rateLimitCollector{b: b, meters: meters, round: round, perService: l.AffinityFlowsPerService, total: l.AffinityFlowsTotal,
		meterPackets: prometheus.NewDesc(prometheus.BuildFQName(ns, "", "reject_meter_packets_total"),
			"Packets that entered the OVS meters in front of the reject responder, by result (passed or dropped).", []string{"result"}, nil),
		learned: prometheus.NewDesc(prometheus.BuildFQName(ns, "", "affinity_learned_flows"),
			"Session affinity flows learned in OVS.", nil, nil),
		refused: prometheus.NewDesc(prometheus.BuildFQName(ns, "", "affinity_learn_refused_packets_total"),
			"Packets whose session affinity learn the per-Service bound refused (load-balanced without affinity).", nil, nil),
		limit: prometheus.NewDesc(prometheus.BuildFQName(ns, "", "affinity_flow_limit"),
			"Bounds of the learned session affinity flows, per Service port and family (service) and of the node (node).", []string{"scope"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *rateLimitCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.meterPackets, c.learned, c.refused, c.limit} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *rateLimitCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), rateLimitScrapeTimeout)
	defer cancel()
	ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(c.perService), "service")
	ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(c.total), "node")
	if c.meters > 0 {
		var in, dropped uint64
		ok := true
		for id := pipeline.FirstRejectMeter; id < pipeline.FirstRejectMeter+c.meters; id++ {
			st, err := c.b.MeterStats(ctx, id)
			if err != nil {
				klog.V(2).InfoS("Cannot read a reject meter's statistics", "meter", id, "err", err)
				ok = false
				break
			}
			in, dropped = in+st.Packets, dropped+st.Dropped
		}
		if ok {
			ch <- prometheus.MustNewConstMetric(c.meterPackets, prometheus.CounterValue, float64(in-dropped), "passed")
			ch <- prometheus.MustNewConstMetric(c.meterPackets, prometheus.CounterValue, float64(dropped), "dropped")
		}
	}
	if stats, err := c.b.TableStats(ctx); err == nil {
		n := openflow.FlowsPerTable(stats)[pipeline.TableSessionAffinity]
		ch <- prometheus.MustNewConstMetric(c.learned, prometheus.GaugeValue, float64(max(n-1, 0)))
	} else {
		klog.V(2).InfoS("Cannot read the table statistics", "err", err)
	}
	st, err := c.b.AggregateStats(ctx, openflow.FlowFilter{Table: pipeline.TableSessionAffinityLearn, TableSet: true,
		Cookie: pipeline.AffinityRefusedCookie(c.round), CookieMask: ^uint64(0)})
	if err != nil {
		klog.V(2).InfoS("Cannot read the refused affinity learns", "err", err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(st.PacketCount))
}
