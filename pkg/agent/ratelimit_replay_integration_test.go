package agent

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/config"
	"github.com/antrea-proxy/antrea-proxy/pkg/healer"
	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

// flowsOwner is a healer.Owner that replays a fixed set of flows, as the proxier replays its own.
type flowsOwner struct {
	b     of.Bridge
	flows []of.Flow
}

func (flowsOwner) Name() string                                         { return "flows" }
func (flowsOwner) Verify(context.Context, of.FlowCounter) (bool, error) { return true, nil }
func (o flowsOwner) Replay(ctx context.Context) error {
	ops := make([]of.Op, len(o.flows))
	for i := range o.flows {
		ops[i] = of.Op{Kind: of.AddFlow, Flow: &o.flows[i]}
	}
	return o.b.Apply(ctx, ops)
}

// TestIntegrationRejectMetersReplayedFirst: after ovs-vswitchd restarts (it loses meters and
// flows), the flows that use the reject meters cannot be replayed before the meters
// (OFPMMFC_INVALID_METER); the healer replays the reject-limits owner first, then the flows go in
// and the meters have their configured rates again.
func TestIntegrationRejectMetersReplayedFirst(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l, b, limits, opts := limitsLab(t, ctx, config.RateLimitConfig{RejectMeterRate: 80, RejectMeterBurst: 8, RejectMeters: 8})
	flows := pipeline.BaseFlows(pipeline.NodeConfig{Round: 1, IPv4: true, IPv6: true, RejectMeters: opts.RejectMeters})
	owner := flowsOwner{b: b, flows: flows}
	require.NoError(t, owner.Replay(ctx))
	ok, err := limits.Verify(ctx, nil)
	require.NoError(t, err)
	require.True(t, ok)

	require.NoError(t, l.OVS.RestartVSwitchd(false))
	require.NoError(t, l.OVS.WaitForBridge(l.Bridge))
	require.Eventually(t, func() bool { _, err := l.OVS.Ofctl("dump-meters", l.Bridge); return err == nil }, 20*time.Second,
		50*time.Millisecond, "the restarted ovs-vswitchd serves its bridge")
	ok, err = limits.Verify(ctx, nil)
	require.NoError(t, err)
	require.False(t, ok, "the restarted ovs-vswitchd has no meters")
	require.ErrorContains(t, owner.Replay(ctx), "OFPMMFC_INVALID_METER", "the flows need their meters")

	h := healer.New(healer.Options{Owners: []healer.Owner{limits, owner}})
	require.NoError(t, h.ReplayAll(ctx))
	ok, err = limits.Verify(ctx, nil)
	require.NoError(t, err)
	require.True(t, ok)
	n, err := b.CountFlows(ctx, of.FlowFilter{Table: pipeline.TableRejectMeter, TableSet: true})
	require.NoError(t, err)
	require.Equal(t, 2*8, n, "the RejectMeter flows of both families are back")
	out, err := l.OVS.Ofctl("dump-meters", l.Bridge)
	require.NoError(t, err)
	require.Contains(t, out, "meter=8 pktps burst stats bands=\ntype=drop rate=10 burst_size=1")
}
