package agent

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/cni/server"
	"github.com/antrea-proxy/antrea-proxy/pkg/config"
	"github.com/antrea-proxy/antrea-proxy/pkg/nodenet"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
	"github.com/antrea-proxy/antrea-proxy/pkg/reconciler"
)

// gatewayConfig is the host gateway as the agent wants it.
func (d *DataPath) gatewayConfig() nodenet.GatewayConfig {
	cfg := d.cfg
	return nodenet.GatewayConfig{
		Name: cfg.HostGateway, Bridge: cfg.OVSBridge, MAC: nodenet.GatewayMAC(cfg.NodeName), MTU: cfg.NodeNetwork.MTU,
		DisableTXChecksumOffload: cfg.OVSDatapathType == config.DatapathNetdev,
	}
}

// gatewayFlows are the gateway's flows of this round.
func (d *DataPath) gatewayFlows() []openflow.Flow {
	ipv4, ipv6 := families(d.podCIDRs)
	return pipeline.GatewayFlows(d.round, pipeline.Gateway{OFPort: d.gw.OFPort, MAC: d.gw.MAC, IPv4: ipv4, IPv6: ipv6,
		NodePortVirtualIPs: d.nodePortVIPs, PodCIDRs: d.podCIDRs})
}

// GatewayWriter is the gateway as a writer of the bridge (reconciler.Options.Writers): one
// owner, gatewayFlowOwner, of gateway-category flows.
func GatewayWriter() reconciler.Writer {
	return reconciler.Writer{Kind: reconciler.KindGateway, Categories: []pipeline.Category{pipeline.CategoryGateway}}
}

// gatewayFlowOwner owns the gateway's flows.
func gatewayFlowOwner() reconciler.Owner { return reconciler.Owner{Kind: reconciler.KindGateway} }

// setupGateway gives the gateway its addresses, turns forwarding on, keeps the host from
// answering pods' ARP requests on their own interfaces (nodenet.Host.RestrictPodARP) and
// installs the gateway flows of this round.
func (d *DataPath) setupGateway(ctx context.Context) error {
	if err := d.host.SetGatewayAddresses(d.gw.Name, nodenet.GatewayAddresses(d.podCIDRs)); err != nil {
		return err
	}
	_, ipv6 := families(d.podCIDRs)
	if err := d.host.EnableForwarding(ipv6); err != nil {
		return err
	}
	// Before the CNI server creates or restores pod interfaces: pods must learn the gateway's
	// MAC, not their veth's, or the host forwards a second copy of their packets.
	if err := d.host.RestrictPodARP(); err != nil {
		return err
	}
	r, err := d.reconciler()
	if err != nil {
		return err
	}
	return d.gwFlows.install(ctx, r, d.gatewayFlows())
}

// gatewayFlowSet installs the gateway flows through the bridge's reconciler, which verifies and
// replays them.
type gatewayFlowSet struct {
	mu        sync.Mutex
	installed int // -1 until the first install
	// bridge is the bridge's reconciler (useReconciler); nil until set or the first use, which
	// creates one of the data path's own over its bridge.
	bridge *reconciler.Reconciler
}

// install replaces every gateway flow (of any round) with flows, in one bundle (the gateway's
// first bundle, reconciler.Batch.First): it needs no dump of what OVS holds, so stale rounds
// and a flushed bridge are handled alike.
func (s *gatewayFlowSet) install(ctx context.Context, r *reconciler.Reconciler, flows []openflow.Flow) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := r.Begin()
	b.First(reconciler.KindGateway)
	b.Set(gatewayFlowOwner(), nil, flows)
	if err := b.Commit(ctx); err != nil {
		return fmt.Errorf("installing gateway flows: %w", err)
	}
	s.installed = len(flows)
	klog.InfoS("Gateway flows installed", "round", r.Round(), "flows", len(flows))
	return nil
}

// useReconciler makes the data path install its flows through r (one per bridge, shared with
// the proxier); call it before Start. Without it the data path uses one of its own.
func (d *DataPath) useReconciler(r *reconciler.Reconciler) {
	d.gwFlows.mu.Lock()
	defer d.gwFlows.mu.Unlock()
	d.gwFlows.bridge = r
}

// reconciler returns the reconciler the gateway and the CNI server install their flows
// through, creating one of the data path's own when none was given.
func (d *DataPath) reconciler() (*reconciler.Reconciler, error) {
	d.gwFlows.mu.Lock()
	defer d.gwFlows.mu.Unlock()
	if d.gwFlows.bridge == nil {
		r, err := reconciler.New(reconciler.Options{Bridge: d.opts.Bridge, Round: d.round,
			Writers: []reconciler.Writer{GatewayWriter(), server.PodWriter()}})
		if err != nil {
			return nil, err
		}
		d.gwFlows.bridge = r
	}
	return d.gwFlows.bridge, nil
}

// Reconciler returns the reconciler of the gateway's and the pods' flows (nil before Start):
// the healer's owner of them.
func (d *DataPath) Reconciler() *reconciler.Reconciler {
	d.gwFlows.mu.Lock()
	defer d.gwFlows.mu.Unlock()
	return d.gwFlows.bridge
}

// gatewayHost is the healer.Owner of the gateway's host side: after a restart of a netdev
// ovs-vswitchd (which re-creates the gateway's tap device) the device as configured, then every
// host route, neighbour and nftables rule. It holds no flows (the reconciler replays those), so
// it has nothing to verify: it is replayed after a reset.
type gatewayHost struct{ d *DataPath }

// Name implements healer.Owner.
func (gatewayHost) Name() string { return "gateway" }

// Verify implements healer.Owner: nothing to count.
func (gatewayHost) Verify(context.Context, openflow.FlowCounter) (bool, error) { return true, nil }

// Replay implements healer.Owner: the gateway device as configured (MAC, MTU, TX checksum
// offload, addresses), then every host route, neighbour and nftables rule.
func (g gatewayHost) Replay(ctx context.Context) error {
	d := g.d
	if !d.started() {
		return nil
	}
	gw, err := d.host.RestoreGateway(ctx, d.opts.OVSDB, d.gatewayConfig(), nodenet.GatewayAddresses(d.podCIDRs))
	if err != nil {
		return err
	}
	if gw.OFPort != d.gw.OFPort {
		// Every flow names the old port; only a restart of the agent rebuilds them all.
		return fmt.Errorf("the gateway's OpenFlow port changed from %d to %d: restart antrea-agent", d.gw.OFPort, gw.OFPort)
	}
	d.exposeMu.Lock()
	rec := d.rec
	d.exposeMu.Unlock()
	if rec == nil {
		return nil
	}
	return rec.Resync(ctx)
}

// started reports whether Start has set the gateway up.
func (d *DataPath) started() bool {
	d.gwFlows.mu.Lock()
	defer d.gwFlows.mu.Unlock()
	return d.gwFlows.installed >= 0
}
