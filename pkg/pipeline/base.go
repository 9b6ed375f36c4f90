package pipeline

import (
	"net/netip"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// NodeConfig is what the pipeline needs to know about this node.
type NodeConfig struct {
	// Round is the flow round of this agent run (see Cookie).
	Round uint16
	// IPv4 and IPv6 say which families this proxier serves.
	IPv4, IPv6 bool
	// GatewayOFPort is the OpenFlow port of the host gateway; 0 when there is none.
	GatewayOFPort uint32
	// GatewayIPv4 and GatewayIPv6 are the SNAT sources for external connections to Services
	// with externalTrafficPolicy=Cluster; invalid disables SNAT for that family.
	GatewayIPv4, GatewayIPv6 netip.Addr
	// NodePortAddresses are the node addresses on which NodePorts are served.
	NodePortAddresses []netip.Addr
	// NodeIPs are the node's own addresses (its InternalIPs): the source its connections to
	// LB IPs have before the host SNATs them to the gateway address, against which
	// loadBalancerSourceRanges are checked for them.
	NodeIPs []netip.Addr
	// PeerNodeIPs are the other nodes' addresses (their InternalIPs). A connection another node
	// DNATed and masqueraded arrives with one of them as source, from a port that node's own
	// connections to this node's NodePorts also use: a new TCP connection from one of them
	// that no Service claimed has its source port moved always (peerCommitFlows).
	PeerNodeIPs []netip.Addr
	// NodeName and Zone (the node's topology.kubernetes.io/zone label) drive topology-aware
	// routing.
	NodeName, Zone string
	// ServiceCIDRs are the cluster's ServiceCIDRs: a new connection to an address inside one
	// that no Service port claimed is dropped (ServiceLB, PriorityServiceCIDR), as kube-proxy
	// drops traffic to unallocated ClusterIPs, instead of leaving the node. Empty: none known.
	ServiceCIDRs []netip.Prefix
	// ExemptClusterIPs are the ClusterIPs of Services the proxier skips (skipServices, another
	// proxy's label): their new connections continue as to any address, above that drop.
	ExemptClusterIPs []netip.Addr
	// RejectMeters is how many meters share the reject responder's rate in OVS (a power of
	// two, at most MaxRejectMeters; see RejectActions); 0 sends rejected packets to the
	// responder unmetered. The meters (RejectLimit) must exist before the flows: OVS refuses a
	// flow whose meter does not exist.
	RejectMeters uint32
	// AffinityFlowsPerService bounds the session affinity flows one Service port learns in one
	// family (the learn action's limit, which counts the learned flows with the port's
	// affinity cookie); 0 leaves them unbounded.
	AffinityFlowsPerService uint32
}

// family is one IP family's constants.
type family struct {
	ethType     of.EthType
	serviceZone uint16
	snatZone    uint16
	// unspecified is the all-zero address: a SNAT to it keeps the source address (and moves
	// only the source port, when the reply tuple is taken).
	unspecified netip.Addr
	// icmp is the family's ICMP protocol.
	icmp of.IPProto
}

var (
	familyV4 = family{of.EthTypeIP, ZoneServiceV4, ZoneSNATV4, netip.IPv4Unspecified(), of.ProtoICMP}
	familyV6 = family{of.EthTypeIPv6, ZoneServiceV6, ZoneSNATV6, netip.IPv6Unspecified(), of.ProtoICMPv6}
)

func familyOf(a netip.Addr) family {
	if a.Is4() {
		return familyV4
	}
	return familyV6
}

func (n *NodeConfig) families() []family {
	var fs []family
	if n.IPv4 {
		fs = append(fs, familyV4)
	}
	if n.IPv6 {
		fs = append(fs, familyV6)
	}
	return fs
}

func (n *NodeConfig) gatewayIP(f family) netip.Addr {
	if f == familyV4 {
		return n.GatewayIPv4
	}
	return n.GatewayIPv6
}

// ICMPv6 neighbour discovery message types.
const (
	icmpv6NeighborSolicitation  uint8 = 135
	icmpv6NeighborAdvertisement uint8 = 136
)

// ToServiceLB continues a packet into load balancing: learned session affinity flows first (they
// only load registers, so they are resubmitted to), then ServiceLB.
func ToServiceLB() []of.Action {
	return []of.Action{of.Resubmit{Table: TableSessionAffinity}, of.GotoTable{Table: TableServiceLB}}
}

func gotoFlow(table uint8, cookie uint64, next uint8) of.Flow {
	return of.Flow{Table: table, Priority: PriorityMiss, Cookie: cookie, Actions: []of.Action{of.GotoTable{Table: next}}}
}

// BaseFlows returns the node-level flows: table defaults, conntrack lookups, ct state checks,
// NodePort address marks and the SNAT of external connections.
func BaseFlows(n NodeConfig) []of.Flow {
	c := Cookie(n.Round, CategoryBase, 0)
	flows := []of.Flow{
		{Table: TableClassifier, Priority: PriorityHigh, Cookie: c, Match: of.Match{EthType: of.EthTypeARP},
			Actions: []of.Action{of.Normal{}}},
		gotoFlow(TableClassifier, c, TableSNATConntrackZone),
		gotoFlow(TableSNATConntrackZone, c, TableConntrackZone),
		gotoFlow(TableConntrackZone, c, TableConntrackState),
		{Table: TableConntrackState, Priority: PriorityHigh, Cookie: c,
			Match:   of.Match{CtState: &of.CtState{Set: of.CtInv | of.CtTrk}},
			Actions: []of.Action{of.Drop{}}},
		{Table: TableConntrackState, Priority: PriorityNormal, Cookie: c,
			Match:   of.Match{CtState: &of.CtState{Set: of.CtTrk, Unset: of.CtNew}},
			Actions: []of.Action{of.GotoTable{Table: TableL3Forwarding}}},
		gotoFlow(TableConntrackState, c, TableNodePortMark),
		{Table: TableNodePortMark, Priority: PriorityMiss, Cookie: c, Actions: ToServiceLB()},
		// Only resubmitted to: a miss returns to NodePortMark's goto_table.
		{Table: TableSessionAffinity, Priority: PriorityMiss, Cookie: c, Actions: []of.Action{of.Drop{}}},
		gotoFlow(TableServiceLB, c, TableConntrackCommit),
		gotoFlow(TableConntrackCommit, c, TableL3Forwarding),
		{Table: TableEndpointDNAT, Priority: PriorityMiss, Cookie: c, Actions: []of.Action{of.Drop{}}},
		{Table: TableSessionAffinityLearn, Priority: PriorityMiss, Cookie: c, Actions: []of.Action{of.Resubmit{Table: TableEndpointDNAT}}},
		gotoFlow(TableServiceSNAT, c, TableL3Forwarding),
		{Table: TableL3Forwarding, Priority: PriorityMiss, Cookie: c, Actions: []of.Action{of.Normal{}}},
	}
	flows = append(flows, affinityCountFlows(n)...)
	flows = append(flows, rejectMeterFlows(n)...)
	if n.GatewayOFPort != 0 {
		flows = append(flows, of.Flow{Table: TableClassifier, Priority: PriorityNormal, Cookie: c,
			Match: of.Match{InPort: n.GatewayOFPort},
			Actions: []of.Action{
				of.SetReg{Reg: RegSource, Value: SourceGateway, Mask: SourceMask},
				of.GotoTable{Table: TableSNATConntrackZone},
			}})
	}
	if n.IPv6 {
		// IPv6 neighbour discovery is IPv6's ARP: like ARP it is switched, not tracked
		// (conntrack marks neighbour solicitations and advertisements invalid).
		for _, typ := range []uint8{icmpv6NeighborSolicitation, icmpv6NeighborAdvertisement} {
			flows = append(flows, of.Flow{Table: TableClassifier, Priority: PriorityND, Cookie: c,
				Match:   of.Match{EthType: of.EthTypeIPv6, IPProto: of.ProtoICMPv6, Extra: &of.MatchExtra{ICMPType: &typ}},
				Actions: []of.Action{of.Normal{}}})
		}
	}
	for _, f := range n.families() {
		flows = append(flows, conntrackFlows(n, c, f)...)
		// New ICMP to a ClusterIP is not rejected like its other ports (PriorityOtherPort): it
		// continues as to any address.
		flows = append(flows, of.Flow{Table: TableServiceLB, Priority: PriorityOtherPortICMP, Cookie: c,
			Match: of.Match{EthType: f.ethType, IPProto: f.icmp}, Actions: []of.Action{of.GotoTable{Table: TableConntrackCommit}}})
	}
	flows = append(flows, serviceCIDRFlows(n, c)...)
	for _, a := range n.NodePortAddresses {
		f := familyOf(a)
		if (f == familyV4 && !n.IPv4) || (f == familyV6 && !n.IPv6) {
			continue
		}
		flows = append(flows, of.Flow{Table: TableNodePortMark, Priority: PriorityNormal, Cookie: c,
			Match:   of.Match{EthType: f.ethType, Dst: netip.PrefixFrom(a, a.BitLen())},
			Actions: append([]of.Action{of.SetReg{Reg: RegSource, Value: BitNodePortAddr, Mask: BitNodePortAddr}}, ToServiceLB()...)})
	}
	return flows
}

// conntrackFlows are one family's conntrack lookups and commits, and the SNAT of external
// and of the node's own Service connections.
func conntrackFlows(n NodeConfig, c uint64, f family) []of.Flow {
	flows := []of.Flow{
		// The SNAT zone un-SNATs replies only. Its entries are keyed by a connection's DNATed
		// tuple (client -> endpoint), which a connection straight to the endpoint from the
		// same address and port also has: e.g. another node whose masquerade picked the same
		// port for one connection to this node's NodePort and one to the endpoint. ct(nat)
		// would SNAT that second connection as the first one, whose replies the endpoint's
		// answers then join. So the zone is looked up without nat first, and nat applied
		// only to replies of SNATed connections; later original-direction packets of SNATed
		// connections are SNATed again after their DNAT (ConntrackState, PrioritySNATLookup).
		of.Flow{Table: TableSNATConntrackZone, Priority: PriorityNormal, Cookie: c,
			Match:   of.Match{EthType: f.ethType, CtState: &of.CtState{Unset: of.CtTrk}},
			Actions: []of.Action{of.CT{Zone: f.snatZone, Table: TableSNATConntrackZone, HasTable: true}}},
		of.Flow{Table: TableSNATConntrackZone, Priority: PriorityHigh, Cookie: c,
			Match: of.Match{EthType: f.ethType, CtState: &of.CtState{Set: of.CtTrk | of.CtRpl},
				CtMark: &of.Masked32{Value: CtMarkSNAT, Mask: CtMarkSNAT}},
			Actions: []of.Action{of.CT{Zone: f.snatZone, Table: TableConntrackZone, HasTable: true, NAT: &of.NAT{Kind: of.NATReply}}}},
		// That second connection is found here in the original direction: mark it, so that
		// ConntrackCommit moves its source port off the first one's reply tuple.
		serviceTupleFlow(c, f, CtMarkSNAT),
		serviceTupleFlow(c, f, CtMarkServiceTuple),
		of.Flow{Table: TableConntrackZone, Priority: PriorityNormal, Cookie: c, Match: of.Match{EthType: f.ethType},
			Actions: []of.Action{of.CT{Zone: f.serviceZone, Table: TableConntrackState, HasTable: true, NAT: &of.NAT{Kind: of.NATReply}}}},
		// Later original-direction packets of a committed Service connection (ct_mark bit 0
		// is only set by the DNAT commit of a group bucket or of EndpointDNAT) were DNATed
		// just now; a connection that was also SNATed (ServiceSNAT, hairpin) recorded its SNAT
		// on the DNATed tuple, so the SNAT zone is looked up again after DNAT to re-apply it.
		// Established or not: conntrack reports a connection +new until it sees a reply (a
		// second UDP datagram, a retransmitted SYN), and such a packet, already DNATed, would
		// miss ServiceLB.
		of.Flow{Table: TableConntrackState, Priority: PrioritySNATLookup, Cookie: c,
			Match: of.Match{EthType: f.ethType, CtState: &of.CtState{Set: of.CtTrk, Unset: of.CtRpl},
				CtMark: &of.Masked32{Value: CtMarkService, Mask: CtMarkService}},
			Actions: []of.Action{of.CT{Zone: f.snatZone, Table: TableL3Forwarding, HasTable: true, NAT: &of.NAT{Kind: of.NATReply}}}},
		// A Service connection that ServiceSNAT does not SNAT records its DNATed tuple in the
		// SNAT zone (a SNATed one has its SNAT entry there already), for serviceTupleFlow.
		of.Flow{Table: TableServiceSNAT, Priority: PriorityLow, Cookie: c,
			Match:   of.Match{EthType: f.ethType, CtState: &of.CtState{Set: of.CtNew | of.CtTrk}},
			Actions: []of.Action{serviceTupleCommit(f)}},
	}
	flows = append(flows, conntrackCommitFlows(c, f)...)
	flows = append(flows, peerCommitFlows(n, c, f)...)
	if gw := n.gatewayIP(f); gw.IsValid() {
		flows = append(flows, serviceSNATFlow(c, f, gw, PriorityNormal, SourceGateway|BitExternalService, SourceMask|BitExternalService),
			// The node's own Service connections (BitFromHost, set by the gateway flows): a
			// remote endpoint would answer the gateway's address, which the other node routes
			// back to this node's host stack instead of into OVS. Those to a local pod are
			// exempt (a gateway flow above this one).
			serviceSNATFlow(c, f, gw, PriorityHostSNAT, BitFromHost, BitFromHost))
	}
	return flows
}

// conntrackCommitFlows commit the new connections no Service claimed in the Service zone, so
// that their replies are established, not invalid.
//
// Their tuple may be the DNATed tuple of a Service connection (client -> endpoint), whose
// reply tuple (endpoint -> client) it then shares: a client reusing a port straight towards
// the endpoint, or another node's masquerade picking, towards the endpoint, the port that
// another client used for this node's Service. Linux conntrack gives every connection a null
// NAT binding that moves the source port when its reply tuple is taken; OVS conntrack does
// so only for a connection committed with nat. Without it both entries claim the endpoint's
// replies, and the endpoint sees the two connections as one (a TCP endpoint answers the
// second one's SYN from the first one's TIME_WAIT, and it never gets an answer). Those
// connections (BitServiceTuple, from serviceTupleFlow) are committed with a SNAT to their own
// source address (all-zero, OVS's ct_zero_snat), which moves their port.
//
// The others are committed without nat. ovs-vswitchd 3.1 aborts (conntrack.c:1063,
// conn_update_state) when a lookup finds the un-NAT entry that a nat commit adds for a
// connection whose tuple it did not change, after that connection expired (a SYN reusing the
// port of a closed connection expires it, and the commit that follows in the same pass finds
// the un-NAT entry): every zero-SNAT commit that moves nothing leaves such an entry.
func conntrackCommitFlows(c uint64, f family) []of.Flow {
	commit := serviceZoneCommit(f)
	zeroSNAT := commit
	zeroSNAT.NAT = &of.NAT{Kind: of.NATSrc, Addr: f.unspecified}
	return []of.Flow{
		{Table: TableConntrackCommit, Priority: PriorityHigh, Cookie: c,
			Match: of.Match{EthType: f.ethType, CtState: &of.CtState{Set: of.CtNew | of.CtTrk},
				Regs: []of.RegMatch{{Reg: RegSource, Value: BitServiceTuple, Mask: BitServiceTuple}}},
			Actions: []of.Action{zeroSNAT}},
		{Table: TableConntrackCommit, Priority: PriorityNormal, Cookie: c,
			Match:   of.Match{EthType: f.ethType, CtState: &of.CtState{Set: of.CtNew | of.CtTrk}},
			Actions: []of.Action{commit}},
	}
}

// serviceZoneCommit is ConntrackCommit's commit of a new connection in the Service zone, without
// nat, continuing in L3Forwarding.
func serviceZoneCommit(f family) of.CT {
	return of.CT{Commit: true, Zone: f.serviceZone, Table: TableL3Forwarding, HasTable: true}
}

// serviceTupleFlow marks (BitServiceTuple) the packets found in the SNAT zone in the original
// direction in an entry with ct_mark bit mark: their tuple is a Service connection's DNATed
// tuple.
func serviceTupleFlow(c uint64, f family, mark uint32) of.Flow {
	return of.Flow{Table: TableSNATConntrackZone, Priority: PriorityServiceTuple, Cookie: c,
		Match: of.Match{EthType: f.ethType, CtState: &of.CtState{Set: of.CtTrk, Unset: of.CtRpl},
			CtMark: &of.Masked32{Value: mark, Mask: mark}},
		Actions: []of.Action{of.SetReg{Reg: RegSource, Value: BitServiceTuple, Mask: BitServiceTuple},
			of.GotoTable{Table: TableConntrackZone}}}
}

// serviceTupleCommit records a new Service connection that is not SNATed in the SNAT zone,
// under its DNATed tuple and without nat (CtMarkServiceTuple, and CtMarkService as the Service
// zone has it, for the gateway's hairpin flows), then continues to L3Forwarding.
func serviceTupleCommit(f family) of.CT {
	return of.CT{Commit: true, Zone: f.snatZone, Table: TableL3Forwarding, HasTable: true,
		Exec: []of.Action{of.SetCtMark{Value: CtMarkService | CtMarkServiceTuple, Mask: CtMarkService | CtMarkServiceTuple}}}
}

// serviceSNATFlow SNATs new Service connections whose reg0 matches value/mask to the Service
// virtual IP gw, marking them CtMarkSNAT.
func serviceSNATFlow(c uint64, f family, gw netip.Addr, prio uint16, value, mask uint32) of.Flow {
	return of.Flow{Table: TableServiceSNAT, Priority: prio, Cookie: c,
		Match: of.Match{EthType: f.ethType, CtState: &of.CtState{Set: of.CtNew | of.CtTrk},
			Regs: []of.RegMatch{{Reg: RegSource, Value: value, Mask: mask}}},
		Actions: []of.Action{of.CT{Commit: true, Zone: f.snatZone, Table: TableL3Forwarding, HasTable: true,
			NAT:  &of.NAT{Kind: of.NATSrc, Addr: gw},
			Exec: []of.Action{of.SetCtMark{Value: CtMarkSNAT, Mask: CtMarkSNAT}}}}}
}

// Source port ranges of peerCommitFlows: a port from 32768 up moves below, a lower one above.
const (
	peerPortsLow  = 1024 // the first port a moved connection may get (Linux keeps <1024 below)
	peerPortsMid  = 32768
	peerPortsHigh = 65535
)

// peerCommitFlows commit, in ConntrackCommit, the new TCP connections from another node's
// address (NodeConfig.PeerNodeIPs) that no Service claimed, with a SNAT to their own address
// and a port range that does not hold their port, so that the port always moves.
//
// Such a connection is usually one the other node DNATed and masqueraded, and its tuple may be
// the DNATed tuple of a closed connection from the same node address and port to a NodePort of
// this node, whose record would have tagged it (serviceTupleFlow) but that its SYN expired: a
// SYN on a connection both of whose sides closed starts a new one. Committed plain, it would
// share the closed connection's reply tuple, and the endpoint, which may hold that tuple in
// TIME_WAIT, refuses its SYN when its timestamp is older (docs/conformance.md, antrea-lossy).
// A zero SNAT cannot be used without the tag: when the reply tuple is free it moves nothing,
// and ovs-vswitchd 3.1 aborts on such an un-NAT entry (conntrackCommitFlows). A port range
// with the connection's own address moves the port whether the reply tuple is taken or not;
// OVS takes the first free port from a hash of the tuple. Only the first packet (SYN without
// ACK) is matched: a connection OVS picks up in the middle (after a restart) keeps its port.
// Ports below 1024 keep the plain commit (their class is small and they are rare).
func peerCommitFlows(n NodeConfig, c uint64, f family) []of.Flow {
	syn := &of.TCPFlags{Set: of.TCPSyn, Unset: of.TCPAck}
	newConn := &of.CtState{Set: of.CtNew | of.CtTrk}
	var flows []of.Flow
	for _, a := range n.PeerNodeIPs {
		if familyOf(a) != f {
			continue
		}
		src := netip.PrefixFrom(a, a.BitLen())
		commit := func(lo, hi uint16) of.CT {
			ct := serviceZoneCommit(f)
			ct.NAT = &of.NAT{Kind: of.NATSrc, Addr: a, Port: lo, PortMax: hi}
			return ct
		}
		plain := serviceZoneCommit(f)
		m := of.Match{EthType: f.ethType, IPProto: of.ProtoTCP, Src: src, CtState: newConn, Extra: &of.MatchExtra{TCPFlags: syn}}
		low, high := m, m
		low.TpSrcMask = 0xfc00 // 0-1023
		high.TpSrc, high.TpSrcMask = peerPortsMid, peerPortsMid
		flows = append(flows,
			of.Flow{Table: TableConntrackCommit, Priority: PriorityPeerLowPorts, Cookie: c, Match: low, Actions: []of.Action{plain}},
			of.Flow{Table: TableConntrackCommit, Priority: PriorityPeerHighPorts, Cookie: c, Match: high,
				Actions: []of.Action{commit(peerPortsLow, peerPortsMid-1)}},
			of.Flow{Table: TableConntrackCommit, Priority: PriorityPeer, Cookie: c, Match: m,
				Actions: []of.Action{commit(peerPortsMid, peerPortsHigh)}})
	}
	return flows
}
