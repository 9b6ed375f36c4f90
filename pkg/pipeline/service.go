package pipeline

import (
	"net/netip"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/model"
)

// ServicePortFlows is what one Service port needs in one IP family.
type ServicePortFlows struct {
	// Group is the port's select group; nil when the port has no usable endpoint.
	Group *of.Group
	// Flows are owned by this Service port alone (cookie category service, object group ID).
	Flows []of.Flow
	// EndpointFlows are DNAT flows that every Service port selecting the same endpoint shares.
	EndpointFlows []of.Flow
}

// ServicePortInput is everything ServicePort needs for one Service port in one family.
type ServicePortInput struct {
	Port      model.ServicePort
	Endpoints []model.Endpoint
	IPv6      bool
	GroupID   uint32
}

var protoOf = map[model.Protocol]of.IPProto{model.TCP: of.ProtoTCP, model.UDP: of.ProtoUDP, model.SCTP: of.ProtoSCTP}

// ServicePort computes the groups and flows of one Service port in one family.
func ServicePort(n NodeConfig, in ServicePortInput) ServicePortFlows {
	fam := familyV4
	if in.IPv6 {
		fam = familyV6
	}
	sp := in.Port
	proto, ok := protoOf[sp.Protocol]
	if !ok {
		return ServicePortFlows{}
	}
	var out ServicePortFlows
	eps := usableEndpoints(in.Endpoints, in.IPv6)
	target := []of.Action{of.Drop{}}
	if len(eps) > 0 {
		out.Group = endpointGroup(in.GroupID, fam, proto, eps)
		target = []of.Action{of.GroupAction{ID: in.GroupID}}
		for _, ep := range eps {
			out.EndpointFlows = append(out.EndpointFlows, endpointDNATFlow(n.Round, fam, proto, ep))
		}
	}
	external := target
	if !sp.ExternalPolicyLocal && len(eps) > 0 {
		external = append([]of.Action{of.SetReg{Reg: RegSource, Value: BitExternalService, Mask: BitExternalService}}, target...)
	}
	cookie := Cookie(n.Round, CategoryService, uint64(in.GroupID))
	addrFlow := func(a netip.Addr, actions []of.Action) of.Flow {
		return of.Flow{Table: TableServiceLB, Priority: PriorityNormal, Cookie: cookie,
			Match: of.Match{EthType: fam.ethType, IPProto: proto, CtState: &of.CtState{Set: of.CtNew | of.CtTrk},
				Dst: netip.PrefixFrom(a, a.BitLen()), TpDst: sp.Port},
			Actions: actions}
	}
	for _, ip := range sp.ClusterIPs {
		if familyOf(ip) == fam {
			out.Flows = append(out.Flows, addrFlow(ip, target))
		}
	}
	for _, ip := range sp.ExternalIPs {
		if familyOf(ip) == fam {
			out.Flows = append(out.Flows, addrFlow(ip, external))
		}
	}
	for _, ing := range sp.LoadBalancerIngress {
		if ing.Decision.Program && ing.IP.IsValid() && familyOf(ing.IP) == fam {
			out.Flows = append(out.Flows, addrFlow(ing.IP, external))
		}
	}
	if sp.NodePort != 0 {
		out.Flows = append(out.Flows, of.Flow{Table: TableServiceLB, Priority: PriorityLow, Cookie: cookie,
			Match: of.Match{EthType: fam.ethType, IPProto: proto, CtState: &of.CtState{Set: of.CtNew | of.CtTrk},
				Regs:  []of.RegMatch{{Reg: RegSource, Value: BitNodePortAddr, Mask: BitNodePortAddr}},
				TpDst: sp.NodePort},
			Actions: external})
	}
	return out
}

// usableEndpoints picks the endpoints of one family that receive new connections: the ready
// ones, or, when none is ready, those that are serving and terminating (KEP-1669).
func usableEndpoints(all []model.Endpoint, ipv6 bool) []model.Endpoint {
	var ready, terminating []model.Endpoint
	for _, ep := range all {
		if !ep.IP.IsValid() || ep.IP.Is6() != ipv6 || ep.Port == 0 {
			continue
		}
		switch {
		case ep.Ready:
			ready = append(ready, ep)
		case ep.Serving && ep.Terminating:
			terminating = append(terminating, ep)
		}
	}
	if len(ready) > 0 {
		return ready
	}
	return terminating
}

func hashFields(fam family, proto of.IPProto) []string {
	src, dst := "ip_src", "ip_dst"
	if fam == familyV6 {
		src, dst = "ipv6_src", "ipv6_dst"
	}
	l4 := map[of.IPProto]string{of.ProtoTCP: "tcp", of.ProtoUDP: "udp", of.ProtoSCTP: "sctp"}[proto]
	return []string{src, dst, l4 + "_src", l4 + "_dst"}
}

func endpointGroup(id uint32, fam family, proto of.IPProto, eps []model.Endpoint) *of.Group {
	g := &of.Group{ID: id, Type: of.GroupTypeSelect, HashFields: hashFields(fam, proto)}
	for i, ep := range eps {
		actions := append(loadEndpointIP(ep.IP),
			of.SetReg{Reg: RegEndpointPort, Value: uint32(ep.Port) | BitEndpointSet, Mask: EndpointPortMask | BitEndpointSet},
			of.Resubmit{Table: TableEndpointDNAT})
		g.Buckets = append(g.Buckets, of.Bucket{ID: uint32(i), Weight: 100, Actions: actions})
	}
	return g
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

func endpointDNATFlow(round uint16, fam family, proto of.IPProto, ep model.Endpoint) of.Flow {
	regs := append(ipWords(ep.IP), of.RegMatch{Reg: RegEndpointPort, Value: uint32(ep.Port) | BitEndpointSet, Mask: EndpointPortMask | BitEndpointSet})
	sortRegs(regs)
	return of.Flow{Table: TableEndpointDNAT, Priority: PriorityNormal, Cookie: Cookie(round, CategoryEndpoint, 0),
		Match: of.Match{EthType: fam.ethType, IPProto: proto, Regs: regs},
		Actions: []of.Action{of.CT{Commit: true, Zone: fam.serviceZone, Table: TableServiceSNAT, HasTable: true,
			NAT:  &of.NAT{Kind: of.NATDst, Addr: ep.IP, Port: ep.Port},
			Exec: []of.Action{of.SetCtMark{Value: CtMarkService, Mask: CtMarkService}}}}}
}

func sortRegs(r []of.RegMatch) {
	for i := 1; i < len(r); i++ {
		for j := i; j > 0 && r[j].Reg < r[j-1].Reg; j-- {
			r[j], r[j-1] = r[j-1], r[j]
		}
	}
}
