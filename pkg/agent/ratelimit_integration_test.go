package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/config"
	"github.com/antrea-proxy/antrea-proxy/pkg/model"
	"github.com/antrea-proxy/antrea-proxy/pkg/netutil"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/ofconn"
	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/native"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/reject"
	"github.com/antrea-proxy/antrea-proxy/test/lab"
	"github.com/antrea-proxy/antrea-proxy/test/ovssandbox"
)

// inNS runs fn in the network namespace ns.
func inNS(t *testing.T, ns *ovssandbox.NetNS, fn func() error) {
	t.Helper()
	require.NoError(t, netutil.InNetNS("/var/run/netns/"+ns.Name, fn))
}

// limitsLab is a lab bridge, its native backend, and the rate limits rl set up on it as the
// agent does (setupRateLimits), with the proxier options they produce.
func limitsLab(t *testing.T, ctx context.Context, rl config.RateLimitConfig) (*lab.Lab, *native.Bridge, *rejectLimits, proxy.Options) {
	t.Helper()
	l := lab.New(t)
	b := native.New(l.OVS.MgmtSocket(l.Bridge), l.OF)
	t.Cleanup(b.Close)
	cfg := &config.AgentConfig{OVSBridge: l.Bridge, AntreaProxy: config.AntreaProxyConfig{RateLimits: rl}}
	var opts proxy.Options
	limits := setupRateLimits(ctx, cfg, l.DB, b, &opts)
	require.NotNil(t, limits, "the meters are installed")
	return l, b, limits, opts
}

// rejectLab is a lab bridge with the rate limits of cfg set up as the agent does, the base
// flows and a Service without endpoints (TCP 80 and UDP 53 on vip), and a reject responder.
type rejectLab struct {
	l      *lab.Lab
	b      *native.Bridge
	r      *reject.Responder
	limits *rejectLimits
	opts   proxy.Options
}

func newRejectLab(t *testing.T, ctx context.Context, vip string, rl config.RateLimitConfig) *rejectLab {
	t.Helper()
	rlab := &rejectLab{}
	rlab.l, rlab.b, rlab.limits, rlab.opts = limitsLab(t, ctx, rl)
	l, b := rlab.l, rlab.b
	n := pipeline.NodeConfig{Round: 1, IPv4: true, RejectMeters: rlab.opts.RejectMeters, AffinityFlowsPerService: rlab.opts.AffinityFlowsPerService}
	var ops []of.Op
	for _, f := range pipeline.BaseFlows(n) {
		ops = append(ops, of.Op{Kind: of.AddFlow, Flow: &f})
	}
	for i, p := range []struct {
		proto model.Protocol
		port  uint16
	}{{model.TCP, 80}, {model.UDP, 53}} {
		sp := model.ServicePort{ClusterIPs: []netip.Addr{netip.MustParseAddr(vip)}, Port: p.port, Protocol: p.proto}
		for _, f := range pipeline.ServicePort(n, pipeline.ServicePortInput{Port: sp, GroupID: uint32(i + 1)}).Flows {
			ops = append(ops, of.Op{Kind: of.AddFlow, Flow: &f})
		}
	}
	require.NoError(t, b.Apply(ctx, ops))
	conn, err := ofconn.Dial(ctx, l.OVS.MgmtSocket(l.Bridge), ofconn.Options{PacketInQueue: 4096})
	require.NoError(t, err)
	l2 := rl.WithDefaults()
	rlab.r = reject.New(reject.Config{Accept: rejectAccept(),
		Rate: float64(l2.RejectRate), Burst: l2.RejectBurst, SourceRate: float64(l2.RejectSourceRate), SourceBurst: l2.RejectSourceBurst})
	serveCtx, stop := context.WithCancel(ctx)
	served := make(chan struct{})
	go func() { rlab.r.Serve(serveCtx, conn); close(served) }()
	t.Cleanup(func() { stop(); <-served; _ = conn.Close() })
	return rlab
}

// meterTotals sums the statistics of the reject meters.
func (rl *rejectLab) meterTotals(t *testing.T, ctx context.Context) (in, dropped uint64) {
	t.Helper()
	for _, m := range rl.limits.limit.MeterList() {
		st, err := rl.b.MeterStats(ctx, m.ID)
		require.NoError(t, err)
		in, dropped = in+st.Packets, dropped+st.Dropped
	}
	return in, dropped
}

// udpFlood floods addr from ns with UDP datagrams (ovssandbox.Flood).
func udpFlood(t *testing.T, ns *ovssandbox.NetNS, addr string, perTick int, stop <-chan struct{}) (*atomic.Uint64, <-chan struct{}) {
	t.Helper()
	var c net.Conn
	inNS(t, ns, func() (err error) { c, err = net.Dial("udp", addr); return err })
	t.Cleanup(func() { _ = c.Close() })
	sent, done := ovssandbox.Flood(c, perTick, stop)
	return sent, done
}

// refusedFrom dials TCP addr from src in ns and reports how long the refusal took, or fails.
func refusedFrom(t *testing.T, ns *ovssandbox.NetNS, src, addr string) time.Duration {
	t.Helper()
	var elapsed time.Duration
	inNS(t, ns, func() error {
		d := net.Dialer{Timeout: 3 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
		start := time.Now()
		c, err := d.Dial("tcp", addr)
		elapsed = time.Since(start)
		if err == nil {
			_ = c.Close()
			return fmt.Errorf("%s from %s connected", addr, src)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return fmt.Errorf("%s from %s: %w, not refused", addr, src, err)
		}
		return nil
	})
	return elapsed
}

// TestIntegrationRejectFloodIsMeteredAndFair: a client flooding a UDP port of a Service without
// endpoints reaches the agent only at its meter's share of the rate (16 meters share 160
// packets per second; the low bits of the client's address choose one of them): every flooded packet that
// reached OVS is a packet-in or a meter drop, and the packet-ins stay within that meter's
// burst and rate. Meanwhile a second client, whose address is in another shard, still gets
// its TCP connection refused at once, every time (it stays within its own meter's share).
func TestIntegrationRejectFloodIsMeteredAndFair(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const vip = "10.96.0.99"
	const flooderIP, otherIP = "10.10.0.10", "10.10.0.20"
	rl := newRejectLab(t, ctx, vip, config.RateLimitConfig{RejectMeterRate: 160, RejectMeterBurst: 32, RejectMeters: 16})
	require.NotEqual(t, pipeline.RejectShard(netip.MustParseAddr(flooderIP), 16), pipeline.RejectShard(netip.MustParseAddr(otherIP), 16),
		"the two clients use different meters")
	flooder := rl.l.AddHost(t, "rlflood", flooderIP)
	other := rl.l.AddHost(t, "rlother", otherIP)

	stop := make(chan struct{})
	start := time.Now()
	sent, done := udpFlood(t, flooder.NS, vip+":53", 20, stop) // 2000 per second
	var stopped bool
	stopFlood := func() {
		if !stopped {
			stopped = true
			close(stop)
			<-done
		}
	}
	defer stopFlood()
	require.Eventually(t, func() bool { return sent.Load() > 1000 }, 30*time.Second, 10*time.Millisecond, "the flood runs")
	// A client within its meter's share (here 10 per second, one attempt every 200 ms).
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for i := range 10 {
		<-tick.C
		elapsed := refusedFrom(t, other.NS, otherIP, vip+":80")
		require.Less(t, elapsed, time.Second, "attempt %d from %s during the flood: refused only after %v", i, otherIP, elapsed)
	}

	stopFlood()
	elapsed := time.Since(start)
	var in, dropped uint64
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	for deadline := time.Now().Add(20 * time.Second); ; <-poll.C {
		in, dropped = rl.meterTotals(t, ctx)
		if got := rl.r.Stats().Received; got+dropped == in {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("%d packets entered the meters, %d were dropped there, but %d packet-ins arrived", in, dropped, got)
		}
	}
	st := rl.r.Stats()
	// The flooder's share: its meter's burst (32/16) and rate (160/16) over the flood, plus the
	// second client's packets through the other meters.
	bound := uint64(2+10*(elapsed.Seconds()+1)) + 10
	t.Logf("flood of %v: %d datagrams sent, %d entered the meters, %d dropped there, %d packet-ins (bound %d), %d replies, %d source-limited",
		elapsed.Round(time.Millisecond), sent.Load(), in, dropped, st.Received, bound, st.Replied, st.SourceLimited)
	require.Greater(t, in, uint64(1000), "the flood reached OVS")
	require.LessOrEqual(t, st.Received, bound, "the meters bound the packet-ins")
	require.Greater(t, dropped, in/2, "most of the flood is dropped in OVS")

	reg := prometheus.NewRegistry()
	reg.MustRegister(newRateLimitCollector("antrea_proxy", rl.b, rl.opts.RejectMeters, 1, config.RateLimitConfig{}.WithDefaults()))
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(fmt.Sprintf(`# HELP antrea_proxy_reject_meter_packets_total Packets that entered the OVS meters in front of the reject responder, by result (passed or dropped).
# TYPE antrea_proxy_reject_meter_packets_total counter
antrea_proxy_reject_meter_packets_total{result="dropped"} %d
antrea_proxy_reject_meter_packets_total{result="passed"} %d
`, dropped, in-dropped)), "antrea_proxy_reject_meter_packets_total"))
}
