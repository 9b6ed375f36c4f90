package agent

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/config"
	"github.com/antrea-proxy/antrea-proxy/pkg/nodenet"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
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
	return d.gwFlows.install(ctx, d.opts.Bridge, d.gatewayFlows())
}

// gatewayFlowSet installs the gateway flows and remembers how many it installed (what Verify
// expects OVS to hold).
type gatewayFlowSet struct {
	mu        sync.Mutex
	installed int // -1 until the first install
	round     uint16
}

// install replaces every gateway flow (of any round) with flows, in one bundle: it needs no dump
// of what OVS holds, so stale rounds and a flushed bridge are handled alike.
func (s *gatewayFlowSet) install(ctx context.Context, bridge openflow.Bridge, flows []openflow.Flow) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := bridge.Apply(ctx, pipeline.ReplaceCategory(pipeline.CategoryGateway, flows)); err != nil {
		return fmt.Errorf("installing gateway flows: %w", err)
	}
	s.installed = len(flows)
	if len(flows) > 0 {
		s.round = pipeline.CookieRound(flows[0].Cookie)
	}
	klog.InfoS("Gateway flows installed", "round", s.round, "flows", len(flows))
	return nil
}

// verify compares the number of this round's gateway flows in OVS with what was installed. It
// holds the lock, so an install in flight is never mistaken for a loss.
func (s *gatewayFlowSet) verify(ctx context.Context, c openflow.FlowCounter) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.installed < 0 {
		return true, nil
	}
	n, err := c.CountFlows(ctx, openflow.FlowFilter{Cookie: pipeline.GatewayCookie(s.round), CookieMask: pipeline.RoundMask | pipeline.CategoryMask})
	if err != nil {
		return false, err
	}
	return n == s.installed, nil
}

// gatewayOwner is the healer.Owner of the gateway: its flows and, after a restart of a netdev
// ovs-vswitchd (which re-creates the gateway's tap device), the host side of the device.
type gatewayOwner struct{ d *DataPath }

// Name implements healer.Owner.
func (gatewayOwner) Name() string { return "gateway" }

// Verify implements healer.Owner.
func (g gatewayOwner) Verify(ctx context.Context, c openflow.FlowCounter) (bool, error) {
	return g.d.gwFlows.verify(ctx, c)
}

// Replay implements healer.Owner: the gateway device as configured (MAC, MTU, TX checksum
// offload, addresses), its flows, then every host route, neighbour and nftables rule.
func (g gatewayOwner) Replay(ctx context.Context) error {
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
	if err := d.gwFlows.install(ctx, d.opts.Bridge, d.gatewayFlows()); err != nil {
		return err
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
