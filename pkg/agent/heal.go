package agent

import (
	"context"
	"path/filepath"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/antrea-proxy/antrea-proxy/pkg/config"
	"github.com/antrea-proxy/antrea-proxy/pkg/healer"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/ofconn"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/native"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/ofctl"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/healthcheck"
	"github.com/antrea-proxy/antrea-proxy/pkg/reconciler"
)

// mgmtSocket is the OpenFlow management socket of the agent's bridge.
func mgmtSocket(cfg *config.AgentConfig) string {
	return "unix:" + filepath.Join(cfg.OVSRunDir, cfg.OVSBridge+".mgmt")
}

// The bridge's reconciler tells the healer its flows per table, so that the periodic check is
// one table statistics request (both backends report them).
var (
	_ healer.TableCounts    = (*reconciler.Reconciler)(nil)
	_ openflow.TableCounter = (*native.Bridge)(nil)
	_ openflow.TableCounter = (*ofctl.Bridge)(nil)
	_ healer.ChangeFeed     = (*native.FlowWatch)(nil)
)

// startSelfHealing keeps an OpenFlow connection to the bridge open and runs the healer: when the
// connection comes back after a loss (ovs-vswitchd restarted) every owner replays what it
// installed, in order (the reject meters, the gateway device and host routes, then the bridge's
// reconciler: the flows of the gateway, of the pods, then the Services' flows and groups, one
// bundle each), and then
// flow-restore-wait is cleared; the Services' replay holds that up for at most
// antreaProxy.flowRestoreTimeout (boundedReplay). A check compares one table statistics
// request with what the owners installed per table (OVS answers it from per-table counters,
// whatever the number of flows); only when the counts moved, and every 10 minutes, is each
// owner's flow count checked against OVS, and a mismatching owner replays (an external
// del-flows). With the native backend OVS reports every change of the flows that the agent's
// connection did not make (an OpenFlow flow monitor, native.FlowWatch): each is checked at
// once, and otherwise a check runs every 30 s; with ovs-ofctl, or while the monitor is not in
// place, a check runs every second. Call it once the data path has started.
func (c *Components) startSelfHealing(ctx context.Context, cfg *config.AgentConfig) {
	// The native backend's own connection is the one to watch: it reconnects and reports a
	// reset after a loss. With ovs-ofctl, a monitor keeps a connection open for that purpose.
	var (
		resets  <-chan struct{}
		conn    healthcheck.OVSConnection
		changes healer.ChangeFeed
	)
	if nb := c.nativeOF; nb != nil {
		go nb.Run(ctx)
		resets, conn = nb.Resets(), nb
		w := nb.NewFlowWatch()
		go w.Run(ctx)
		changes = w
	} else {
		mon := ofconn.NewMonitor(mgmtSocket(cfg), ofconn.MonitorOptions{})
		go mon.Run(ctx)
		resets, conn = mon.Resets(), mon
	}
	var owners []healer.Owner
	if c.rejectLimits != nil {
		owners = append(owners, c.rejectLimits) // before any flow that uses its meters and groups
	}
	if d := c.DataPath; d != nil {
		owners = append(owners, gatewayHost{d}) // the gateway device before the flows that name it
	}
	if cfg.AntreaProxy.Enabled() {
		owners = append(owners, newBoundedReplay(c.bridgeState, clock.RealClock{}, cfg.AntreaProxy.FlowRestoreTimeout.Duration))
	} else {
		owners = append(owners, c.bridgeState)
	}
	db := c.OVSDB
	h := healer.New(healer.Options{
		Counter: c.Bridge,
		Owners:  owners,
		Tables:  []healer.TableCounts{c.bridgeState},
		Resets:  resets,
		Changes: changes,
		AfterReplayAll: func(ctx context.Context) error {
			return clearFlowRestoreWait(ctx, db)
		},
	})
	if err := h.RegisterMetrics(c.observers.metrics.Registry()); err != nil {
		klog.ErrorS(err, "Registering the healer's metrics failed")
	}
	go h.Run(ctx)
	c.observers.health.WatchOVS(conn) // read when /livez or /healthz is asked
}

// clearFlowRestoreWait tells ovs-vswitchd that the flows are restored (start-ovs sets
// flow-restore-wait before it starts ovs-vswitchd, which then keeps the datapath as it was).
func clearFlowRestoreWait(ctx context.Context, db flowRestoreDB) error {
	on, err := db.FlowRestoreWait(ctx)
	if err != nil || !on {
		return err
	}
	if err := db.SetFlowRestoreWait(ctx, false); err != nil {
		return err
	}
	klog.InfoS("Flows restored; cleared flow-restore-wait")
	return nil
}

// clearFlowRestoreWaitAtStart clears flow-restore-wait once the proxier has installed its
// first sync, or once antreaProxy.flowRestoreTimeout has passed without one (flowRestoreGate);
// call it after the data path started (the gateway and pod flows are in).
func (c *Components) clearFlowRestoreWaitAtStart(ctx context.Context, cfg *config.AgentConfig) {
	g := flowRestoreGate{clock: clock.RealClock{}, db: c.OVSDB, timeout: cfg.AntreaProxy.FlowRestoreTimeout.Duration}
	if cfg.AntreaProxy.Enabled() {
		g.proxier = c.Proxier
	}
	g.run(ctx)
}
