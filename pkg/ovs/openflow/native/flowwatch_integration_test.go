package native

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// TestIntegrationFlowWatch runs a FlowWatch against Open vSwitch: the Bridge's own bundles are
// abbreviated updates, not reported; `ovs-ofctl add-flow` and `del-flows` are reported; after
// an ovs-vswitchd restart the watch is back on the new connection and reports again.
func TestIntegrationFlowWatch(t *testing.T) {
	o := startOVS(t)
	br := addBridge(t, o)
	b := New(o.MgmtSocket(br), nil)
	w := b.NewFlowWatch()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { b.Run(ctx); done <- struct{}{} }()
	go func() { w.Run(ctx); done <- struct{}{} }()
	defer func() { cancel(); <-done; <-done }()

	waitChange(t, w, "watching turned on")
	require.True(t, w.Watching())

	// Two bundles: 2,500 groups and 2,500 flows, then their deletion.
	var big []openflow.Op
	for i := 1; i <= 2500; i++ {
		big = append(big, openflow.Op{Kind: openflow.AddGroup, Group: testGroup(uint32(i), 2)},
			openflow.Op{Kind: openflow.AddFlow, Flow: testFlow(i)})
	}
	require.NoError(t, b.Apply(ctx, big))
	require.NoError(t, b.Apply(ctx, clearOps(big)))
	// Updates are sent before the reply to a later request: after a barrier every update of
	// the two bundles has been counted.
	c, err := b.connection(ctx)
	require.NoError(t, err)
	require.NoError(t, c.Barrier(ctx))
	st := w.Stats()
	require.Zero(t, st.Foreign, "the Bridge's own changes are abbreviated")
	t.Logf("updates for the Bridge's own bundle of 5,000 ops and the one that clears them: %+v", st)
	require.GreaterOrEqual(t, st.Own, uint64(2), "one abbreviated update per bundle at least")
	require.LessOrEqual(t, st.Own, uint64(10), "the Bridge's own changes are abbreviated per request, not per flow")
	require.Empty(t, w.Changes())

	_, err = o.Ofctl("add-flow", br, "table=3,priority=5,ip,actions=drop")
	require.NoError(t, err)
	waitChange(t, w, "ovs-ofctl add-flow")
	require.Equal(t, uint64(1), w.Stats().Foreign)
	_, err = o.Ofctl("del-flows", br)
	require.NoError(t, err)
	waitChange(t, w, "ovs-ofctl del-flows")
	require.Equal(t, uint64(2), w.Stats().Foreign)

	require.NoError(t, o.RestartVSwitchd(false))
	require.Eventually(t, func() bool { return w.Stats().Monitors == 2 && w.Watching() }, 30*time.Second, 10*time.Millisecond,
		"the monitor is added on the connection to the restarted switch")
	_, err = o.Ofctl("add-flow", br, "table=4,priority=5,ip,actions=drop")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return w.Stats().Foreign == 3 }, 20*time.Second, 10*time.Millisecond,
		"a change on the new connection is reported")
}
