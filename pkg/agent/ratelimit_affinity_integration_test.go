package agent

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/config"
	"github.com/antrea-proxy/antrea-proxy/pkg/model"
	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
	"github.com/antrea-proxy/antrea-proxy/test/ovssandbox"
)

// askUDP sends one datagram from src (a new source port) in ns to addr and reports whether an
// answer came back within a second.
func askUDP(t *testing.T, ns *ovssandbox.NetNS, src, addr string) bool {
	t.Helper()
	var answered bool
	inNS(t, ns, func() error {
		c, err := net.DialUDP("udp", &net.UDPAddr{IP: net.ParseIP(src)}, net.UDPAddrFromAddrPort(netip.MustParseAddrPort(addr)))
		if err != nil {
			return err
		}
		defer c.Close()
		if _, err := c.Write([]byte("q\n")); err != nil {
			return err
		}
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		buf := make([]byte, 256)
		n, err := c.Read(buf)
		answered = err == nil && n > 0
		return nil
	})
	return answered
}

// TestIntegrationAffinityLearnBounds: clients from 12 addresses open UDP connections to two
// Services with sessionAffinity=ClientIP, over three rounds of new connections (so the
// datapath's cached flows and their revalidation learn again too). With
// affinityFlowsPerService 5 and affinityFlowsTotal 6 (the table's flow limit 6+4 with the
// miss flow: 9 learned flows), the first Service learns 5 flows and the second the 4 the table
// has left; every client is answered all the same (load-balanced without affinity), and the
// metrics show the learned flows, the refused learns and the bounds.
func TestIntegrationAffinityLearnBounds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rl := config.RateLimitConfig{AffinityFlowsPerService: 5, AffinityFlowsTotal: 6}
	l, b, _, opts := limitsLab(t, ctx, rl)
	require.Equal(t, uint32(5), opts.AffinityFlowsPerService)

	l.AddPod(t, "rlpod", "10.10.0.50", 8080)
	var srcs []string
	for i := 100; i < 112; i++ {
		srcs = append(srcs, fmt.Sprintf("10.10.0.%d", i))
	}
	client := l.AddHost(t, "rlaff", srcs[0], srcs[1:]...)

	n := pipeline.NodeConfig{Round: 1, IPv4: true, AffinityFlowsPerService: opts.AffinityFlowsPerService}
	var ops []of.Op
	for _, f := range pipeline.BaseFlows(n) {
		ops = append(ops, of.Op{Kind: of.AddFlow, Flow: &f})
	}
	vips := []string{"10.96.0.70", "10.96.0.71"}
	for i, vip := range vips {
		sp := model.ServicePort{ClusterIPs: []netip.Addr{netip.MustParseAddr(vip)}, Port: 80, Protocol: model.UDP, StickyMaxAgeSeconds: 600}
		out := pipeline.ServicePort(n, pipeline.ServicePortInput{Port: sp, GroupID: uint32(i + 1),
			Endpoints: []model.Endpoint{{IP: netip.MustParseAddr("10.10.0.50"), Port: 8080, Ready: true, Serving: true}}})
		for _, g := range out.Groups {
			ops = append(ops, of.Op{Kind: of.AddGroup, Group: g})
		}
		for _, f := range append(out.Flows, out.EndpointFlows...) {
			ops = append(ops, of.Op{Kind: of.AddFlow, Flow: &f})
		}
	}
	require.NoError(t, b.Apply(ctx, ops))

	learned := func(group uint32) int {
		c, err := b.CountFlows(ctx, of.FlowFilter{Table: pipeline.TableSessionAffinity, TableSet: true,
			Cookie: pipeline.Cookie(1, pipeline.CategoryAffinity, uint64(group)), CookieMask: ^uint64(0)})
		require.NoError(t, err)
		return c
	}
	tick := time.NewTicker(700 * time.Millisecond) // rounds apart: the revalidators run in between
	defer tick.Stop()
	for round := range 3 {
		for i, vip := range vips {
			for _, src := range srcs {
				require.True(t, askUDP(t, client.NS, src, vip+":80"), "round %d: %s answers %s", round, vip, src)
			}
			t.Logf("round %d: Service %d learned %d flows", round, i+1, learned(uint32(i+1)))
		}
		<-tick.C
	}
	require.Equal(t, 5, learned(1), "the per-Service bound")
	require.Equal(t, 4, learned(2), "the node bound leaves the second Service 4")

	reg := prometheus.NewRegistry()
	reg.MustRegister(newRateLimitCollector("antrea_proxy", b, 0, 1, rl.WithDefaults()))
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`# HELP antrea_proxy_affinity_flow_limit Bounds of the learned session affinity flows, per Service port and family (service) and of the node (node).
# TYPE antrea_proxy_affinity_flow_limit gauge
antrea_proxy_affinity_flow_limit{scope="node"} 6
antrea_proxy_affinity_flow_limit{scope="service"} 5
# HELP antrea_proxy_affinity_learned_flows Session affinity flows learned in OVS.
# TYPE antrea_proxy_affinity_learned_flows gauge
antrea_proxy_affinity_learned_flows 9
`), "antrea_proxy_affinity_flow_limit", "antrea_proxy_affinity_learned_flows"))
	refused, err := testutil.GatherAndCount(reg, "antrea_proxy_affinity_learn_refused_packets_total")
	require.NoError(t, err)
	require.Equal(t, 1, refused)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "antrea_proxy_affinity_learn_refused_packets_total" {
			v := mf.GetMetric()[0].GetCounter().GetValue()
			t.Logf("refused learns counted: %v packets", v)
			// Service 1 refused 7 clients in each of 3 rounds; Service 2's learns beyond the
			// table's limit report success (the table refuses them), so they are not counted.
			require.GreaterOrEqual(t, v, float64(3*7))
		}
	}
}
