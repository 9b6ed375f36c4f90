package proxy

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

// InstallBaseFlows installs this round's node-level flows (pipeline.BaseFlows) without any
// Service, when no sync has succeeded yet: every packet, pod-to-pod traffic included, walks
// their tables, so a node whose ovs-vswitchd lost its flows forwards nothing without them.
// The agent calls it when the first sync is late (it fails, or waits for caches, or for a long
// bundle) before it clears flow-restore-wait. It does not wait for a sync in progress. The
// first sync's bundle deletes them and adds its own, atomically. After a successful sync it
// does nothing.
func (p *Proxier) InstallBaseFlows(ctx context.Context) error {
	p.mu.Lock()
	if p.syncs > 0 {
		p.mu.Unlock()
		return nil
	}
	n := p.earlyNodeConfig()
	p.earlyBase = true
	p.mu.Unlock()
	flows := pipeline.BaseFlows(n)
	ops := make([]of.Op, len(flows))
	for i := range flows {
		ops[i] = of.Op{Kind: of.AddFlow, Flow: &flows[i]}
	}
	if err := p.bridge.Apply(ctx, ops); err != nil {
		return fmt.Errorf("installing %d node-level flows before the first sync: %w", len(ops), err)
	}
	klog.InfoS("Installed the node-level flows before the first sync", "flows", len(ops), "ipv4", n.IPv4, "ipv6", n.IPv6)
	return nil
}

// earlyNodeConfig is the node-level configuration InstallBaseFlows uses, from what is known
// without a sync (call with p.mu held): the last Node update and the peers, no ServiceCIDRs
// (nothing is dropped as unallocated) and the configured skipped addresses. Before any Node
// update, the families are the configured ones, else those of the gateway's addresses.
func (p *Proxier) earlyNodeConfig() pipeline.NodeConfig {
	fam := p.opts.Families
	if !fam.IPv4 && !fam.IPv6 && p.node != nil {
		fam = model.FamiliesOf(model.NodePodCIDRs(p.node))
	}
	if !fam.IPv4 && !fam.IPv6 {
		fam = model.Families{IPv4: p.opts.GatewayIPv4.IsValid() || !p.opts.GatewayIPv6.IsValid(), IPv6: p.opts.GatewayIPv6.IsValid()}
	}
	n := pipeline.NodeConfig{
		Round: p.round, IPv4: fam.IPv4, IPv6: fam.IPv6,
		GatewayOFPort: p.opts.GatewayOFPort, GatewayIPv4: p.opts.GatewayIPv4, GatewayIPv6: p.opts.GatewayIPv6,
		NodePortAddresses: model.NodePortAddresses(p.node, p.opts.NodePortAddresses, fam),
		NodeIPs:           nodeIPs(p.node, fam),
		NodeName:          p.opts.NodeName,
		Zone:              nodeZone(p.node),
		ExemptClusterIPs:  p.opts.Skip.IPs.UnsortedList(),
	}
	for _, ips := range p.peers {
		n.PeerNodeIPs = append(n.PeerNodeIPs, ips...)
	}
	slices.SortFunc(n.PeerNodeIPs, func(a, b netip.Addr) int { return a.Compare(b) })
	slices.SortFunc(n.ExemptClusterIPs, func(a, b netip.Addr) int { return a.Compare(b) })
	return n
}

// earlyBaseDelete is the first bundle's delete of the node-level flows InstallBaseFlows
// installed, unless the start-up scan found flows of that category in this round already.
func (p *Proxier) earlyBaseDelete(current []of.Op) []of.Op {
	del := of.Op{Kind: of.DeleteFlows, Flow: &of.Flow{
		Cookie: pipeline.Cookie(p.round, pipeline.CategoryBase, 0), CookieMask: pipeline.RoundMask | pipeline.CategoryMask}}
	for _, op := range current {
		if op.Kind == del.Kind && op.Flow.Cookie == del.Flow.Cookie && op.Flow.CookieMask == del.Flow.CookieMask {
			return current
		}
	}
	return append(slices.Clone(current), del)
}
