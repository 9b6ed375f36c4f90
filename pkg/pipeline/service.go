package pipeline

import (
	"net/netip"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// MaxAffinityTimeout is the longest session affinity an OpenFlow learn action can carry
// (idle_timeout is 16 bits). Longer timeouts are capped to it.
const MaxAffinityTimeout = 65535

// ServicePortFlows is what one Service port needs in one IP family.
type ServicePortFlows struct {
	// Groups are the port's select groups: the cluster group and, with a Local traffic policy,
	// the local group, each preceded by its second-level groups when it is split (SubGroups).
	// A set without endpoints has no group (its traffic is dropped).
	Groups []*of.Group
	// Flows are owned by this Service port alone (cookie category service, object group ID).
	Flows []of.Flow
	// EndpointFlows are DNAT flows that every Service port selecting the same endpoint shares.
	// Only ports with session affinity have them: the buckets of other ports DNAT themselves.
	EndpointFlows []of.Flow
}

// ServicePortInput is everything ServicePort needs for one Service port in one family.
type ServicePortInput struct {
	Port      model.ServicePort
	Endpoints []model.Endpoint
	IPv6      bool
	// GroupID is the cluster group's ID; it is also the cookie object of the port's flows.
	GroupID uint32
	// LocalGroupID is the local group's ID, used with a Local traffic policy.
	LocalGroupID uint32
	// SubGroupIDs and LocalSubGroupIDs are the IDs of the second-level groups of the cluster
	// and local groups when their endpoints are more than one group holds (SubGroups): at
	// least SubGroups(n) each for n endpoints, of which the first SubGroups(n) are used.
	SubGroupIDs, LocalSubGroupIDs []uint32
	// RejectOtherPorts adds the flows that reject new connections to the port's ClusterIPs on a
	// port the Service does not define (kube-proxy nftables rejects them as well). Every port
	// of a Service would need the same flows, so the proxier sets it on one port of each
	// Service and family.
	RejectOtherPorts bool
}

var protoOf = map[model.Protocol]of.IPProto{model.TCP: of.ProtoTCP, model.UDP: of.ProtoUDP, model.SCTP: of.ProtoSCTP}

// servicePort holds what the flow builders of one Service port share.
type servicePort struct {
	n       NodeConfig
	in      ServicePortInput
	fam     family
	proto   of.IPProto
	cookie  uint64
	sets    endpointSets
	timeout uint16 // session affinity idle timeout; 0 without affinity
}

// ServicePort computes the groups and flows of one Service port in one family.
func ServicePort(n NodeConfig, in ServicePortInput) ServicePortFlows {
	proto, ok := protoOf[in.Port.Protocol]
	if !ok {
		return ServicePortFlows{}
	}
	s := &servicePort{n: n, in: in, fam: familyV4, proto: proto,
		cookie: Cookie(n.Round, CategoryService, uint64(in.GroupID)),
		sets:   categorize(in.Endpoints, in.IPv6, n.NodeName, n.Zone)}
	if in.IPv6 {
		s.fam = familyV6
	}
	if t := in.Port.StickyMaxAgeSeconds; t > 0 {
		s.timeout = uint16(min(t, MaxAffinityTimeout))
	}
	var out ServicePortFlows
	useLocal := in.Port.InternalPolicyLocal || (in.Port.ExternalPolicyLocal && s.hasExternal())
	for _, g := range []struct {
		id   uint32
		subs []uint32
		eps  []model.Endpoint
		used bool
	}{{in.GroupID, in.SubGroupIDs, s.sets.cluster, true}, {in.LocalGroupID, in.LocalSubGroupIDs, s.sets.local, useLocal}} {
		if !g.used || len(g.eps) == 0 {
			continue
		}
		out.Groups = s.appendGroups(out.Groups, g.id, g.subs, g.eps)
		if s.timeout > 0 {
			for _, ep := range g.eps {
				out.Flows = append(out.Flows, s.learnFlow(g.id, ep))
			}
		}
	}
	out.EndpointFlows = s.endpointFlows()
	out.Flows = append(out.Flows, s.serviceLBFlows()...)
	return out
}

func (s *servicePort) hasExternal() bool {
	if s.in.Port.NodePort != 0 || len(s.in.Port.ExternalIPs) > 0 {
		return true
	}
	for _, ing := range s.in.Port.LoadBalancerIngress {
		if ing.Decision.Program {
			return true
		}
	}
	return false
}

// target is where one kind of traffic goes: a group, or nowhere.
type target struct {
	gid  uint32
	eps  []model.Endpoint
	snat bool // mark for SNAT when the connection came from outside the node
}

func (s *servicePort) cluster(snat bool) target {
	return target{gid: s.in.GroupID, eps: s.sets.cluster, snat: snat}
}

func (s *servicePort) local() target { return target{gid: s.in.LocalGroupID, eps: s.sets.local} }

// RejectMaxLen is the max_len of the reject controller action: enough for the Ethernet, IP and
// transport headers the responder answers from.
const RejectMaxLen = 128

// RejectAction sends a new connection to a Service port without any endpoint to the agent's
// reject responder (pkg/proxy/reject), which answers with a TCP reset or an ICMP unreachable.
func RejectAction() of.Controller { return of.Controller{MaxLen: RejectMaxLen} }

// noEndpoint is what happens to a new connection whose target has no endpoint: rejected when the
// port has no usable endpoint at all (as kube-proxy does), dropped when only the local set is
// empty (a Local traffic policy on a node without endpoints).
func (s *servicePort) noEndpoint() []of.Action {
	if len(s.sets.cluster) == 0 && len(s.sets.local) == 0 {
		return RejectActions(s.n, s.fam == familyV6)
	}
	return []of.Action{of.Drop{}}
}

// lbActions sends a new connection to the target's group, or, when the target has no endpoint,
// rejects or drops it (noEndpoint).
func (s *servicePort) lbActions(t target) []of.Action {
	if len(t.eps) == 0 {
		return s.noEndpoint()
	}
	var a []of.Action
	if t.snat {
		a = append(a, of.SetReg{Reg: RegSource, Value: BitExternalService, Mask: BitExternalService})
	}
	if s.timeout > 0 {
		a = append(a, of.SetReg{Reg: RegServiceGroup, Value: t.gid})
	}
	return append(a, of.GroupAction{ID: t.gid})
}

// selectedActions continues a connection whose endpoint a learned affinity flow already chose.
func (s *servicePort) selectedActions(t target) []of.Action {
	var a []of.Action
	if t.snat {
		a = append(a, of.SetReg{Reg: RegSource, Value: BitExternalService, Mask: BitExternalService})
	}
	return append(a, of.GotoTable{Table: TableEndpointDNAT})
}

// entry is one way into the Service: a match (without ct_state, protocol or registers set by
// the entry itself) and where its traffic goes.
type entry struct {
	match of.Match
	// reg0 bits the match requires.
	reg0, reg0Mask uint32
	priority       uint16
	to             target
}

// serviceLBFlows builds the ServiceLB flows of every way into the Service port.
func (s *servicePort) serviceLBFlows() []of.Flow {
	sp := s.in.Port
	var entries []entry
	dst := func(a netip.Addr) of.Match { return of.Match{Dst: netip.PrefixFrom(a, a.BitLen()), TpDst: sp.Port} }
	clusterIPTarget := s.cluster(false)
	if sp.InternalPolicyLocal {
		clusterIPTarget = s.local()
	}
	var flows []of.Flow
	for _, ip := range sp.ClusterIPs {
		if familyOf(ip) != s.fam {
			continue
		}
		entries = append(entries, entry{match: dst(ip), priority: PriorityNormal, to: clusterIPTarget})
		if s.in.RejectOtherPorts {
			flows = append(flows, of.Flow{Table: TableServiceLB, Priority: PriorityOtherPort, Cookie: s.cookie,
				Match:   of.Match{EthType: s.fam.ethType, Dst: netip.PrefixFrom(ip, ip.BitLen()), CtState: &of.CtState{Set: of.CtNew | of.CtTrk}},
				Actions: RejectActions(s.n, s.fam == familyV6)})
		}
	}
	for _, ip := range sp.ExternalIPs {
		if familyOf(ip) == s.fam {
			entries = append(entries, s.external(dst(ip), 0, 0, PriorityNormal)...)
		}
	}
	for _, ing := range sp.LoadBalancerIngress {
		if !ing.Decision.Program || !ing.IP.IsValid() || familyOf(ing.IP) != s.fam {
			continue
		}
		e, f := s.rangedEntries(dst(ing.IP))
		entries, flows = append(entries, e...), append(flows, f...)
	}
	if sp.NodePort != 0 {
		entries = append(entries, s.external(of.Match{TpDst: sp.NodePort}, BitNodePortAddr, BitNodePortAddr, PriorityLow)...)
	}
	for _, e := range entries {
		if s.timeout == 0 {
			flows = append(flows, s.flow(e.priority, e.match, e.reg0, e.reg0Mask, s.lbActions(e.to)))
			continue
		}
		notSelected := s.flow(e.priority, e.match, e.reg0, e.reg0Mask, s.lbActions(e.to))
		notSelected.Match.Regs = append(notSelected.Match.Regs, of.RegMatch{Reg: RegEndpointPort, Value: 0, Mask: BitEndpointSet})
		selected := s.flow(e.priority, e.match, e.reg0, e.reg0Mask, s.selectedActions(e.to))
		selected.Match.Regs = append(selected.Match.Regs, of.RegMatch{Reg: RegEndpointPort, Value: BitEndpointSet, Mask: BitEndpointSet})
		if len(e.to.eps) == 0 {
			flows = append(flows, s.flow(e.priority, e.match, e.reg0, e.reg0Mask, s.noEndpoint()))
			continue
		}
		flows = append(flows, notSelected, selected)
	}
	return flows
}

// external returns the entries of a NodePort, LB IP or ExternalIP. With
// externalTrafficPolicy=Local, connections from pods on this node and from the node itself
// (internal traffic, as kube-proxy treats it) short-circuit to the cluster endpoints, and every
// other connection goes to the local endpoints without SNAT, so that the client address is
// preserved. (The node's own connections are SNATed by ServiceSNAT, see BitFromHost.)
func (s *servicePort) external(m of.Match, reg0, mask uint32, prio uint16) []entry {
	if !s.in.Port.ExternalPolicyLocal {
		return []entry{{match: m, reg0: reg0, reg0Mask: mask, priority: prio, to: s.cluster(true)}}
	}
	return []entry{
		{match: m, reg0: reg0 | SourcePod, reg0Mask: mask | SourceMask, priority: prio + 1, to: s.cluster(false)},
		{match: m, reg0: reg0 | BitFromHost, reg0Mask: mask | BitFromHost, priority: prio + 1, to: s.cluster(false)},
		{match: m, reg0: reg0, reg0Mask: mask, priority: prio, to: s.local()},
	}
}

// rangedEntries returns the entries of an LB IP (m matches it) and, with
// loadBalancerSourceRanges, the flows that drop what the ranges do not allow. The node's own
// connections (BitFromHost) reach OVS with the gateway's address as their source (nodenet
// SNATs them to it), so the ranges cannot be checked against their source: like kube-proxy,
// which sees the node's own address, they are allowed when a node IP of the family lies in a
// range, by one entry (or a drop) above the per-range entries; allowed, they are internal
// traffic, as in external.
func (s *servicePort) rangedEntries(m of.Match) ([]entry, []of.Flow) {
	ranges := s.sourceRanges()
	if len(ranges) == 0 {
		return s.external(m, 0, 0, PriorityNormal), nil
	}
	var entries []entry
	for _, r := range ranges {
		rm := m
		rm.Src = r
		for _, e := range s.external(rm, 0, 0, PriorityNormal) {
			if e.reg0Mask&BitFromHost == 0 { // the node's own connections are decided below
				entries = append(entries, e)
			}
		}
	}
	// Anything else to this LB IP is dropped.
	flows := []of.Flow{s.flow(PriorityRangeDrop, m, 0, 0, []of.Action{of.Drop{}})}
	if !s.nodeInRanges(ranges) {
		return entries, append(flows, s.flow(PriorityHostRange, m, BitFromHost, BitFromHost, []of.Action{of.Drop{}}))
	}
	host := s.cluster(true)
	if s.in.Port.ExternalPolicyLocal {
		host = s.cluster(false)
	}
	return append(entries, entry{match: m, reg0: BitFromHost, reg0Mask: BitFromHost, priority: PriorityHostRange, to: host}), flows
}

// nodeInRanges reports whether a node IP of the port's family lies in one of ranges.
func (s *servicePort) nodeInRanges(ranges []netip.Prefix) bool {
	for _, ip := range s.n.NodeIPs {
		if !ip.IsValid() || familyOf(ip) != s.fam {
			continue
		}
		for _, r := range ranges {
			if r.Contains(ip) {
				return true
			}
		}
	}
	return false
}

func (s *servicePort) sourceRanges() []netip.Prefix {
	var out []netip.Prefix
	for _, r := range s.in.Port.SourceRanges {
		if r.IsValid() && r.Addr().Is6() == (s.fam == familyV6) {
			out = append(out, r)
		}
	}
	return out
}

// flow builds a ServiceLB flow for new connections of this port's protocol.
func (s *servicePort) flow(prio uint16, m of.Match, reg0, reg0Mask uint32, actions []of.Action) of.Flow {
	m.EthType, m.IPProto = s.fam.ethType, s.proto
	m.CtState = &of.CtState{Set: of.CtNew | of.CtTrk}
	m.Regs = nil
	if reg0Mask != 0 {
		m.Regs = []of.RegMatch{{Reg: RegSource, Value: reg0, Mask: reg0Mask}}
	}
	return of.Flow{Table: TableServiceLB, Priority: prio, Cookie: s.cookie, Match: m, Actions: actions}
}

// hashFieldSets are the select groups' hash fields by family and protocol: every group of a
// kind shares its slice (read-only, as everything a group holds).
var hashFieldSets = map[bool]map[of.IPProto][]string{
	false: {of.ProtoTCP: {"ip_src", "ip_dst", "tcp_src", "tcp_dst"}, of.ProtoUDP: {"ip_src", "ip_dst", "udp_src", "udp_dst"},
		of.ProtoSCTP: {"ip_src", "ip_dst", "sctp_src", "sctp_dst"}},
	true: {of.ProtoTCP: {"ipv6_src", "ipv6_dst", "tcp_src", "tcp_dst"}, of.ProtoUDP: {"ipv6_src", "ipv6_dst", "udp_src", "udp_dst"},
		of.ProtoSCTP: {"ipv6_src", "ipv6_dst", "sctp_src", "sctp_dst"}},
}

func hashFields(fam family, proto of.IPProto) []string { return hashFieldSets[fam == familyV6][proto] }

// group builds a select group with one bucket per endpoint. Without session affinity a bucket
// commits the connection and DNATs it to its endpoint itself (ct in the bucket, as OVN's load
// balancer groups do), so the port needs no flow per endpoint. With session affinity a bucket
// loads its endpoint into registers and continues to SessionAffinityLearn, which learns the
// choice and continues to EndpointDNAT (the learned flows load the same registers).
func (s *servicePort) group(id uint32, eps []model.Endpoint) *of.Group {
	g := &of.Group{ID: id, Type: of.GroupTypeSelect, HashFields: hashFields(s.fam, s.proto),
		Buckets: make([]of.Bucket, len(eps))}
	// Without affinity every bucket is one ct action: the action slice, the NATs and the shared
	// ct_mark exec are allocated once per group, not per bucket (10k × 10 endpoints: 100k).
	var acts []of.Action
	if s.timeout == 0 {
		nats, exec := make([]of.NAT, len(eps)), markService()
		acts = make([]of.Action, len(eps))
		for i, ep := range eps {
			nats[i] = dnatTo(ep)
			acts[i] = s.dnatCommit(&nats[i], exec)
		}
	}
	for i, ep := range eps {
		var actions []of.Action
		if s.timeout > 0 {
			actions = append(loadEndpointIP(ep.IP),
				of.SetReg{Reg: RegEndpointPort, Value: uint32(ep.Port) | BitEndpointSet, Mask: EndpointPortMask | BitEndpointSet},
				of.Resubmit{Table: TableSessionAffinityLearn})
		} else {
			actions = acts[i : i+1 : i+1]
		}
		g.Buckets[i] = of.Bucket{ID: uint32(i), Weight: 100, Actions: actions}
	}
	return g
}

// dnat commits a new connection in the service zone, DNATed to ep and marked CtMarkService,
// and continues it in ServiceSNAT.
func (s *servicePort) dnat(ep model.Endpoint) of.CT {
	nat := dnatTo(ep)
	return s.dnatCommit(&nat, markService())
}

// dnatCommit is dnat's ct action with its NAT and exec actions given (shared by a group's
// buckets; none of them is modified afterwards).
func (s *servicePort) dnatCommit(nat *of.NAT, exec []of.Action) of.CT {
	return of.CT{Commit: true, Zone: s.fam.serviceZone, Table: TableServiceSNAT, HasTable: true, NAT: nat, Exec: exec}
}

// dnatTo is the NAT to endpoint ep.
func dnatTo(ep model.Endpoint) of.NAT { return of.NAT{Kind: of.NATDst, Addr: ep.IP, Port: ep.Port} }

// markService is the exec of a Service connection's DNAT commit: ct_mark CtMarkService.
func markService() []of.Action {
	return []of.Action{of.SetCtMark{Value: CtMarkService, Mask: CtMarkService}}
}

// endpointMatch matches the endpoint loaded into registers.
func (s *servicePort) endpointMatch(ep model.Endpoint) of.Match {
	regs := append(ipWords(ep.IP), of.RegMatch{Reg: RegEndpointPort, Value: uint32(ep.Port) | BitEndpointSet, Mask: EndpointPortMask | BitEndpointSet})
	sortRegs(regs)
	return of.Match{EthType: s.fam.ethType, IPProto: s.proto, Regs: regs}
}

// endpointFlows are the shared DNAT flows of every endpoint the port's groups may select, for
// ports with session affinity only (their buckets and learned flows load the endpoint into
// registers; the buckets of other ports DNAT themselves).
func (s *servicePort) endpointFlows() []of.Flow {
	if s.timeout == 0 {
		return nil
	}
	seen := map[netip.AddrPort]bool{}
	var flows []of.Flow
	for _, set := range [][]model.Endpoint{s.sets.cluster, s.sets.local} {
		for _, ep := range set {
			k := netip.AddrPortFrom(ep.IP, ep.Port)
			if seen[k] {
				continue
			}
			seen[k] = true
			flows = append(flows, of.Flow{Table: TableEndpointDNAT, Priority: PriorityNormal, Cookie: Cookie(s.n.Round, CategoryEndpoint, 0),
				Match: s.endpointMatch(ep), Actions: []of.Action{s.dnat(ep)}})
		}
	}
	return flows
}

// learnFlow remembers, for sessionAffinity=ClientIP, that this client got this endpoint of
// group gid: the learned flow (in SessionAffinity, keyed by client IP and Service address and
// port) loads the endpoint for the client's next connections until it idles out. The learned
// flows go away with this flow (delete_learned) when the endpoint leaves the Service.
//
// With NodeConfig.AffinityFlowsPerService the learn adds no flow while the port's affinity
// cookie has that many learned flows in the family (the connection is still load-balanced, by
// the group, without affinity); the learn writes its result to BitLearnOK and the flow
// resubmits to its own table once more with BitLearnCounted, where affinityCountFlows
// counts the refusals.
func (s *servicePort) learnFlow(gid uint32, ep model.Endpoint) of.Flow {
	m := s.endpointMatch(ep)
	m.Regs = append(m.Regs, of.RegMatch{Reg: RegServiceGroup, Value: gid})
	sortRegs(m.Regs)
	srcF, dstF, epF := "NXM_OF_IP_SRC", "NXM_OF_IP_DST", "NXM_NX_REG3"
	if s.fam == familyV6 {
		srcF, dstF, epF = "NXM_NX_IPV6_SRC", "NXM_NX_IPV6_DST", "NXM_NX_XXREG3"
	}
	l4 := map[of.IPProto]string{of.ProtoTCP: "NXM_OF_TCP_DST", of.ProtoUDP: "NXM_OF_UDP_DST", of.ProtoSCTP: "OXM_OF_SCTP_DST"}[s.proto]
	whole := func(f string) of.Subfield { return of.Subfield{Field: f, Whole: true} }
	portBits := of.Subfield{Field: "NXM_NX_REG4", Start: 0, End: 16}
	learn := of.Learn{
		Table: TableSessionAffinity, Priority: PriorityNormal, IdleTimeout: s.timeout, DeleteLearned: true,
		Cookie: Cookie(s.n.Round, CategoryAffinity, uint64(s.in.GroupID)), EthType: s.fam.ethType, IPProto: s.proto,
		Limit: s.n.AffinityFlowsPerService,
		Specs: []of.LearnSpec{
			{Kind: of.LearnMatch, Dst: whole(srcF)},
			{Kind: of.LearnMatch, Dst: whole(dstF)},
			{Kind: of.LearnMatch, Dst: whole(l4)},
			{Kind: of.LearnLoad, Src: whole(epF), Dst: whole(epF)},
			{Kind: of.LearnLoad, Src: portBits, Dst: portBits},
		},
	}
	actions := []of.Action{learn, of.Resubmit{Table: TableEndpointDNAT}}
	if learn.Limit != 0 {
		learn.ResultDst = of.Subfield{Field: "NXM_NX_REG4", Start: bitLearnOK, End: bitLearnOK}
		actions = []of.Action{learn,
			of.SetReg{Reg: RegEndpointPort, Value: BitLearnCounted, Mask: BitLearnCounted},
			of.Resubmit{Table: TableSessionAffinityLearn}, of.Resubmit{Table: TableEndpointDNAT}}
	}
	return of.Flow{Table: TableSessionAffinityLearn, Priority: PriorityNormal, Cookie: s.cookie, Match: m, Actions: actions}
}

// ipWords splits an address into the 32-bit register values that hold it, with their registers.
func ipWords(ip netip.Addr) []of.RegMatch {
	b := ip.AsSlice()
	if ip.Is4() {
		return []of.RegMatch{{Reg: RegEndpointIPv4, Value: be32(b)}}
	}
	words := make([]of.RegMatch, 4)
	for i := range words {
		words[i] = of.RegMatch{Reg: RegEndpointIPv6First + uint8(i), Value: be32(b[4*i:])}
	}
	return words
}

func be32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func loadEndpointIP(ip netip.Addr) []of.Action {
	var actions []of.Action
	for _, w := range ipWords(ip) {
		actions = append(actions, of.SetReg{Reg: w.Reg, Value: w.Value})
	}
	return actions
}

func sortRegs(r []of.RegMatch) {
	for i := 1; i < len(r); i++ {
		for j := i; j > 0 && r[j].Reg < r[j-1].Reg; j-- {
			r[j], r[j-1] = r[j-1], r[j]
		}
	}
}
