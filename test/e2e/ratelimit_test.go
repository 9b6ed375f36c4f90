//go:build e2e

package e2e

import (
	"context"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver/apiv1"
	"github.com/antrea-proxy/antrea-proxy/pkg/config"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
	"github.com/antrea-proxy/antrea-proxy/test/ovssandbox"
)

// sample returns the value of series (a metric name with its labels, as exposed) in a
// Prometheus text exposition.
func sample(exposition, series string) (float64, bool) {
	for _, line := range strings.Split(exposition, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil
		}
	}
	return 0, false
}

// TestRateLimitsRejectFlood runs the agent with its default rate limits on the two-node
// sandbox: a pod flooding a UDP port of a Service without endpoints (2,000 datagrams per
// second) reaches its node's agent only at its meter shard's rate, the rest is dropped inside
// OVS, and /metrics shows both; meanwhile another pod of the same node, in another shard, is
// refused at once every time.
func TestRateLimitsRejectFlood(t *testing.T) {
	sb := framework.StartSandbox(t, framework.SandboxOptions{})
	ctx := context.Background()
	const ns = "ratelimit"
	n1 := sb.Nodes[0]
	require.NoError(t, sb.CreateNamespace(ctx, ns))
	pods, err := sb.RunPods(ctx, framework.EchoPod(ns, "flooder", n1, map[string]string{"app": "flooder"}),
		framework.EchoPod(ns, "victim", n1, map[string]string{"app": "victim"}))
	require.NoError(t, err)
	limits := config.RateLimitConfig{}.WithDefaults()
	meters := uint32(limits.RejectMeters)
	flooderShard := pipeline.RejectShard(netip.MustParseAddr(pods[0].Status.PodIP), meters)
	victimShard := pipeline.RejectShard(netip.MustParseAddr(pods[1].Status.PodIP), meters)
	require.NotEqual(t, flooderShard, victimShard, "pods %s and %s share a meter", pods[0].Status.PodIP, pods[1].Status.PodIP)
	flooder, err := sb.PodNetNS(pods[0])
	require.NoError(t, err)
	victim, err := sb.PodNetNS(pods[1])
	require.NoError(t, err)

	svc := createService(t, sb, echoService(ns, "empty", "nothing", corev1.ServiceTypeClusterIP))
	waitEachNode(t, sb, ns, "empty", "without endpoints", everyRow(func(_ *framework.Node, r apiv1.ServicePort) (bool, string) {
		return r.Buckets == 0 && r.Flows > 0, strconv.Itoa(r.Flows) + " flows"
	}))
	addr := hostPort(svc.Spec.ClusterIP, 80)

	c, err := flooder.Dial(ctx, "udp", addr)
	require.NoError(t, err)
	defer c.Close()
	stop := make(chan struct{})
	sent, done := ovssandbox.Flood(c, 20, stop) // 2,000 datagrams per second
	start := time.Now()
	tick := time.NewTicker(200 * time.Millisecond)
	for range 10 {
		<-tick.C
		requireRefused(t, victim, "tcp", addr)
	}
	tick.Stop()
	close(stop)
	<-done
	elapsed := time.Since(start)

	text, err := n1.AgentMetrics(ctx)
	require.NoError(t, err)
	dropped, ok := sample(text, `antrea_proxy_reject_meter_packets_total{result="dropped"}`)
	require.True(t, ok, "/metrics has the meter drops")
	passed, ok := sample(text, `antrea_proxy_reject_meter_packets_total{result="passed"}`)
	require.True(t, ok, "/metrics has the meter passes")
	replied, _ := sample(text, `antrea_proxy_reject_packets_total{result="replied"}`)
	shareRate := float64(limits.RejectMeterRate) / float64(meters)
	shareBurst := float64(limits.RejectMeterBurst) / float64(meters)
	bound := shareBurst + shareRate*(elapsed.Seconds()+1) + 10 + 6 // the flooder's share, the victim's probes (and other tests' refusals)
	t.Logf("%v: %d datagrams sent; meters passed %v, dropped %v (bound on passed %.0f); %v refusals sent", elapsed.Round(time.Millisecond),
		sent.Load(), passed, dropped, bound, replied)
	require.Greater(t, dropped, float64(sent.Load())/2, "most of the flood is dropped inside OVS")
	require.LessOrEqual(t, passed, bound, "the flooder's meter bounds what reaches the agent")
	_, ok = sample(text, `antrea_proxy_affinity_flow_limit{scope="node"}`)
	require.True(t, ok, "/metrics has the affinity bounds")
}
