package pipeline

import (
	"net/netip"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// serviceCIDRFlows are the ServiceLB flows of the ServiceCIDRs of the families served: a new
// connection to an address inside one that no Service port claimed is dropped
// (PriorityServiceCIDR), except to a skipped Service's ClusterIP, which continues as to any
// address (PriorityServiceCIDRExempt). New ICMP keeps continuing above both
// (PriorityOtherPortICMP).
func serviceCIDRFlows(n NodeConfig, c uint64) []of.Flow {
	var flows []of.Flow
	for _, cidr := range n.ServiceCIDRs {
		f, ok := n.served(cidr.Addr())
		if !ok || !cidr.IsValid() {
			continue
		}
		flows = append(flows, of.Flow{Table: TableServiceLB, Priority: PriorityServiceCIDR, Cookie: c,
			Match:   of.Match{EthType: f.ethType, Dst: cidr.Masked(), CtState: &of.CtState{Set: of.CtNew | of.CtTrk}},
			Actions: []of.Action{of.Drop{}}})
	}
	if len(flows) == 0 {
		return nil
	}
	for _, ip := range n.ExemptClusterIPs {
		f, ok := n.served(ip)
		if !ok || !n.inServiceCIDR(ip) {
			continue
		}
		flows = append(flows, of.Flow{Table: TableServiceLB, Priority: PriorityServiceCIDRExempt, Cookie: c,
			Match:   of.Match{EthType: f.ethType, Dst: netip.PrefixFrom(ip, ip.BitLen()), CtState: &of.CtState{Set: of.CtNew | of.CtTrk}},
			Actions: []of.Action{of.GotoTable{Table: TableConntrackCommit}}})
	}
	return flows
}

// served returns a's family when n serves it.
func (n *NodeConfig) served(a netip.Addr) (family, bool) {
	if !a.IsValid() {
		return family{}, false
	}
	f := familyOf(a)
	return f, (f == familyV4 && n.IPv4) || (f == familyV6 && n.IPv6)
}

// inServiceCIDR reports whether ip lies in one of n's ServiceCIDRs.
func (n *NodeConfig) inServiceCIDR(ip netip.Addr) bool {
	for _, c := range n.ServiceCIDRs {
		if c.Contains(ip) {
			return true
		}
	}
	return false
}
