package pipeline

import (
	"net"
	"net/netip"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// CategoryGateway is the node data path's gateway flows (object 0): forwarding to the host
// gateway, the NodePort virtual IP mark and the SNAT of established external connections.
const CategoryGateway Category = 5

// GatewayCookie is the cookie of the gateway flows of round.
func GatewayCookie(round uint16) uint64 { return Cookie(round, CategoryGateway, 0) }

const (
	// priorityGatewayHairpin sits between the pod flows (PriorityNormal) and the default route
	// to the gateway (PriorityLow) in L3Forwarding.
	priorityGatewayHairpin uint16 = 195
	// priorityGatewayPodSource (drop) and priorityGatewayAddress (classify) sit above the base
	// classification of the gateway port (PriorityNormal) in Classifier.
	priorityGatewayPodSource uint16 = 205
	priorityGatewayAddress   uint16 = 210
	// priorityHostToLocalPod exempts the node's own Service connections to a local pod from
	// the SNAT of ServiceSNAT (PriorityHostSNAT and PriorityNormal).
	priorityHostToLocalPod uint16 = 205
)

// Gateway is what the gateway flows need to know about the host gateway.
type Gateway struct {
	// OFPort is the gateway's OpenFlow port.
	OFPort uint32
	// MAC is the gateway interface's MAC address.
	MAC net.HardwareAddr
	// IPv4 and IPv6 say which families are routed through the gateway.
	IPv4, IPv6 bool
	// NodePortVirtualIPs are the addresses the host DNATs NodePort traffic to before sending it
	// into OVS through the gateway (at most one per family); they serve NodePorts like the
	// node's own addresses.
	NodePortVirtualIPs []netip.Addr
	// PodCIDRs are this node's podCIDRs; the gateway holds the first address of each. Packets
	// from the gateway with another source in them are dropped (see GatewayFlows).
	PodCIDRs []netip.Prefix
}

func (g Gateway) families() []family {
	var fs []family
	if g.IPv4 {
		fs = append(fs, familyV4)
	}
	if g.IPv6 {
		fs = append(fs, familyV6)
	}
	return fs
}

// GatewayFlows returns the flows that tie the host gateway into the pipeline, per family:
//
//   - L3Forwarding, priority 190: any destination that is not a local pod (those match at 200)
//     goes to the host through the gateway, with the gateway's MAC as destination. The host
//     routes it on: to another node's podCIDR, or out of the node (masqueraded).
//   - L3Forwarding, priority 195: a packet that came from the gateway and belongs to a Service
//     connection (ct_mark 0x1, or 0x2 once SNATed) but is not for a local pod goes back out of
//     the gateway with IN_PORT (OpenFlow drops a plain output to the in_port). This is external
//     traffic to a remote endpoint and its replies.
//   - (Established Service connections are SNATed again after DNAT by a base flow in
//     ConntrackState, whatever their source; see BaseFlows.)
//   - NodePortMark, priority 200: the NodePort virtual IP marks reg0[4], like a node address.
//   - Classifier, priority 210: a packet from the gateway with the gateway's own address as
//     source comes from the node itself (the host's stack; nodenet SNATs the node's other
//     addresses to it on the way into OVS): reg0[0..3] from the gateway, and BitFromHost, so
//     that its Service connections are internal traffic (externalTrafficPolicy=Local does not
//     restrict them) and are SNATed to the Service virtual IP (BaseFlows).
//   - ServiceSNAT, priority 205: the node's own Service connection DNATed to a local pod is not
//     SNATed: the pod answers the gateway's address, on-link, through OVS.
//   - Classifier, priority 205: a packet from the gateway whose source is a local pod
//     address (in a podCIDR, other than the gateway's own address) is dropped. A local pod's
//     packets reach OVS through the pod's port; one that comes from the host is a copy the host
//     forwarded (see nodenet.Host.RestrictPodARP) or a spoof. Were it load-balanced, it would
//     be taken for an external connection (from the gateway) and SNATed, and, being first in
//     conntrack, would drag the pod's own connection into that SNAT.
//
// The classification of the gateway port (in_port → reg0 from gateway) is a base flow
// (BaseFlows with NodeConfig.GatewayOFPort).
func GatewayFlows(round uint16, gw Gateway) []of.Flow {
	c := GatewayCookie(round)
	toGateway := []of.Action{of.SetEthDst{MAC: gw.MAC}, of.Output{Port: gw.OFPort}}
	hairpin := []of.Action{of.SetEthDst{MAC: gw.MAC}, of.OutputInPort{}}
	var flows []of.Flow
	for _, f := range gw.families() {
		flows = append(flows,
			of.Flow{Table: TableL3Forwarding, Priority: PriorityLow, Cookie: c,
				Match: of.Match{EthType: f.ethType}, Actions: toGateway},
			of.Flow{Table: TableL3Forwarding, Priority: priorityGatewayHairpin, Cookie: c,
				Match:   of.Match{InPort: gw.OFPort, EthType: f.ethType, CtMark: &of.Masked32{Value: CtMarkService, Mask: CtMarkService}},
				Actions: hairpin},
			of.Flow{Table: TableL3Forwarding, Priority: priorityGatewayHairpin, Cookie: c,
				Match:   of.Match{InPort: gw.OFPort, EthType: f.ethType, CtMark: &of.Masked32{Value: CtMarkSNAT, Mask: CtMarkSNAT}},
				Actions: hairpin},
		)
	}
	for _, cidr := range gw.PodCIDRs {
		cidr = cidr.Masked()
		f := familyOf(cidr.Addr())
		if (f == familyV4 && !gw.IPv4) || (f == familyV6 && !gw.IPv6) {
			continue
		}
		gwIP := cidr.Addr().Next()
		flows = append(flows,
			of.Flow{Table: TableClassifier, Priority: priorityGatewayAddress, Cookie: c,
				Match: of.Match{InPort: gw.OFPort, EthType: f.ethType, Src: netip.PrefixFrom(gwIP, gwIP.BitLen())},
				Actions: []of.Action{
					of.SetReg{Reg: RegSource, Value: SourceGateway | BitFromHost, Mask: SourceMask | BitFromHost},
					of.GotoTable{Table: TableSNATConntrackZone},
				}},
			of.Flow{Table: TableClassifier, Priority: priorityGatewayPodSource, Cookie: c,
				Match: of.Match{InPort: gw.OFPort, EthType: f.ethType, Src: cidr}, Actions: []of.Action{of.Drop{}}},
			of.Flow{Table: TableServiceSNAT, Priority: priorityHostToLocalPod, Cookie: c,
				Match: of.Match{EthType: f.ethType, Dst: cidr, CtState: &of.CtState{Set: of.CtNew | of.CtTrk},
					Regs: []of.RegMatch{{Reg: RegSource, Value: BitFromHost, Mask: BitFromHost}}},
				Actions: []of.Action{serviceTupleCommit(f)}},
		)
	}
	for _, ip := range gw.NodePortVirtualIPs {
		f := familyOf(ip)
		if (f == familyV4 && !gw.IPv4) || (f == familyV6 && !gw.IPv6) {
			continue
		}
		flows = append(flows, of.Flow{Table: TableNodePortMark, Priority: PriorityNormal, Cookie: c,
			Match:   of.Match{EthType: f.ethType, Dst: netip.PrefixFrom(ip, ip.BitLen())},
			Actions: append([]of.Action{of.SetReg{Reg: RegSource, Value: BitNodePortAddr, Mask: BitNodePortAddr}}, ToServiceLB()...)})
	}
	return flows
}
