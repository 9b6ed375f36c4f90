package pipeline

import (
	"net"
	"net/netip"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// Pod is what the pipeline needs to know about one local pod interface.
type Pod struct {
	// ID is the cookie object of the pod's flows; unique among the pods of the node (the CNI
	// server uses the OpenFlow port number).
	ID uint64
	// OFPort is the OpenFlow port of the host end of the pod's veth pair.
	OFPort uint32
	// MAC is the MAC address of the pod's interface.
	MAC net.HardwareAddr
	// IPs are the pod's addresses, at most one per family.
	IPs []netip.Addr
}

// PodCookieMask selects the flows of one pod (any round) together with PodCookie.
const PodCookieMask = CategoryMask | ObjectMask

// PodCookie is the cookie of the flows of the pod with the given ID.
func PodCookie(round uint16, id uint64) uint64 { return Cookie(round, CategoryPod, id) }

// Hairpin sources: a pod that reaches its own Service and lands on itself sees the connection
// come from this address, not from itself (which its kernel would drop as a martian).
var (
	HairpinIPv4 = netip.MustParseAddr("169.254.0.254")
	HairpinIPv6 = netip.MustParseAddr("fc01::aabb:ccdd:ef00")
)

// ipv6LinkLocal is fe80::/10: neighbour discovery and other link-local traffic a pod sends
// before (or besides) using its global address.
var ipv6LinkLocal = netip.MustParsePrefix("fe80::/10")

// PodFlows returns the flows of one local pod:
//
//   - Classifier: packets from the pod's port with the pod's MAC and one of its IPs (or, for
//     IPv6, a link-local source) are marked as coming from a local pod and continue; anything
//     else from that port is dropped, which is the spoof guard. Above it, the neighbour spoof
//     guard (NeighborGuardFlows) switches the pod's ARP and neighbour discovery about itself
//     and drops the rest of them.
//   - L3Forwarding: packets to one of the pod's IPs get the gateway MAC as source (when
//     gatewayMAC is set), the pod's MAC as destination, and leave through the pod's port.
//   - Hairpin: a Service connection from the pod that was DNATed back to the pod itself is
//     SNATed to HairpinIPv4/HairpinIPv6 (ServiceSNAT) and sent back out of the port it came in
//     on (L3Forwarding, IN_PORT).
func PodFlows(round uint16, gatewayMAC net.HardwareAddr, p Pod) []of.Flow {
	c := PodCookie(round, p.ID)
	classify := []of.Action{
		of.SetReg{Reg: RegSource, Value: SourcePod, Mask: SourceMask},
		of.GotoTable{Table: TableSNATConntrackZone},
	}
	var flows []of.Flow
	fromPod := func(f family, src netip.Prefix) of.Flow {
		return of.Flow{Table: TableClassifier, Priority: PriorityNormal, Cookie: c,
			Match:   of.Match{InPort: p.OFPort, EthType: f.ethType, Src: src, Extra: &of.MatchExtra{EthSrc: p.MAC}},
			Actions: classify}
	}
	hasV6 := false
	for _, ip := range p.IPs {
		f := familyOf(ip)
		hasV6 = hasV6 || f == familyV6
		flows = append(flows, fromPod(f, netip.PrefixFrom(ip, ip.BitLen())))
	}
	if hasV6 {
		flows = append(flows, fromPod(familyV6, ipv6LinkLocal))
	}
	flows = append(flows, of.Flow{Table: TableClassifier, Priority: PriorityLow, Cookie: c,
		Match: of.Match{InPort: p.OFPort}, Actions: []of.Action{of.Drop{}}})
	flows = append(flows, NeighborGuardFlows(c, p)...)

	for _, ip := range p.IPs {
		var rewrite []of.Action
		if len(gatewayMAC) != 0 {
			rewrite = append(rewrite, of.SetEthSrc{MAC: gatewayMAC})
		}
		rewrite = append(rewrite, of.SetEthDst{MAC: p.MAC})
		f := familyOf(ip)
		dst := netip.PrefixFrom(ip, ip.BitLen())
		hairpinSrc := HairpinIPv4
		if f == familyV6 {
			hairpinSrc = HairpinIPv6
		}
		flows = append(flows,
			of.Flow{Table: TableL3Forwarding, Priority: PriorityNormal, Cookie: c,
				Match:   of.Match{EthType: f.ethType, Dst: dst},
				Actions: append(append([]of.Action(nil), rewrite...), of.Output{Port: p.OFPort})},
			of.Flow{Table: TableServiceSNAT, Priority: PriorityHigh, Cookie: c,
				Match: of.Match{EthType: f.ethType, InPort: p.OFPort, Dst: dst, CtState: &of.CtState{Set: of.CtNew | of.CtTrk}},
				Actions: []of.Action{of.CT{Commit: true, Zone: f.snatZone, Table: TableL3Forwarding, HasTable: true,
					NAT:  &of.NAT{Kind: of.NATSrc, Addr: hairpinSrc},
					Exec: []of.Action{of.SetCtMark{Value: CtMarkSNAT, Mask: CtMarkSNAT}}}}},
			of.Flow{Table: TableL3Forwarding, Priority: PriorityHigh, Cookie: c,
				Match:   of.Match{EthType: f.ethType, InPort: p.OFPort, Dst: dst},
				Actions: append(append([]of.Action(nil), rewrite...), of.OutputInPort{})},
		)
	}
	return flows
}
