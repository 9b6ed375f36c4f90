package model

import (
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

// Shape counts what a Service asks for, per IP family, without materialising anything
// proportional to ports × addresses: what a flow budget needs to decide, before any
// conversion, whether the Service may be programmed at all. Every count is an upper bound of
// what ServicePortsFromService and EndpointsForServicePort return (addresses are counted
// before duplicates are removed).
type Shape struct {
	// Ports are the ports ServicePortsFromService converts (known protocol, port in 1..65535).
	Ports []ShapePort
	// Families are the counts of each served family: [0] IPv4, [1] IPv6.
	Families [2]ShapeFamily
	// ExternalLocal, InternalLocal and Sticky are the traffic policies and session affinity
	// (ServicePort.ExternalPolicyLocal, InternalPolicyLocal, StickyMaxAgeSeconds > 0).
	ExternalLocal, InternalLocal, Sticky bool
}

// ShapePort is one port of a Shape.
type ShapePort struct {
	Name     string
	Protocol Protocol
	// NodePort is set for a NodePort or LoadBalancer Service with a node port.
	NodePort bool
}

// ShapeFamily counts the addresses of one family a Service asks for.
type ShapeFamily struct {
	ClusterIPs, ExternalIPs int
	// LBIngress counts the ingress IPs the flows would program (DecideLBIngress), SourceRanges
	// the loadBalancerSourceRanges (LoadBalancer Services only).
	LBIngress, SourceRanges int
}

// familyIndex is 0 for IPv4 (and IPv4-mapped IPv6) and 1 for IPv6.
func familyIndex(s string) (int, bool) {
	a, ok := parseAddr(s)
	if !ok {
		return 0, false
	}
	if a.Is4() {
		return 0, true
	}
	return 1, true
}

// ServiceShape returns svc's Shape for the served families, with the KEP-1860 decision of
// opts.ProxyLoadBalancerIPs. It parses each address once, whatever the number of ports.
func ServiceShape(svc *v1.Service, opts ConvertOptions) Shape {
	var sh Shape
	if svc == nil {
		return sh
	}
	spec := &svc.Spec
	served := [2]bool{opts.Served.IPv4, opts.Served.IPv6}
	count := func(addrs []string, field func(*ShapeFamily) *int) {
		for _, s := range addrs {
			if i, ok := familyIndex(s); ok && served[i] {
				*field(&sh.Families[i])++
			}
		}
	}
	count(clusterIPStrings(svc), func(f *ShapeFamily) *int { return &f.ClusterIPs })
	if sh.Families[0].ClusterIPs+sh.Families[1].ClusterIPs == 0 {
		return Shape{}
	}
	count(spec.ExternalIPs, func(f *ShapeFamily) *int { return &f.ExternalIPs })
	lbType := spec.Type == v1.ServiceTypeLoadBalancer
	nodePortType := lbType || spec.Type == v1.ServiceTypeNodePort
	if lbType {
		for _, ing := range svc.Status.LoadBalancer.Ingress {
			if DecideLBIngress(opts.ProxyLoadBalancerIPs, ing, opts.Served).Program {
				count([]string{ing.IP}, func(f *ShapeFamily) *int { return &f.LBIngress })
			}
		}
		for _, r := range spec.LoadBalancerSourceRanges {
			if p, ok := parsePrefix(r); ok && opts.Served.Serves(p.Addr()) {
				i := 0
				if !p.Addr().Is4() {
					i = 1
				}
				sh.Families[i].SourceRanges++
			}
		}
	}
	sh.ExternalLocal = externalPolicyLocal(svc)
	sh.InternalLocal = spec.InternalTrafficPolicy != nil && *spec.InternalTrafficPolicy == v1.ServiceInternalTrafficPolicyLocal
	sh.Sticky = spec.SessionAffinity == v1.ServiceAffinityClientIP
	for i := range spec.Ports {
		p := &spec.Ports[i]
		proto, ok := protocolOf(p.Protocol)
		if !ok || portNumber(p.Port) == 0 {
			continue
		}
		sh.Ports = append(sh.Ports, ShapePort{Name: p.Name, Protocol: proto, NodePort: nodePortType && portNumber(p.NodePort) != 0})
	}
	return sh
}

// EndpointCount counts endpoints: all of them, and those on this node.
type EndpointCount struct {
	All, Local int
}

// SliceEndpointCounts returns, per port (name and protocol) of a Service and family, how many
// endpoints its EndpointSlices list, and how many of them on nodeName: an upper bound of what
// EndpointsForServicePort returns (duplicates and unusable endpoints are counted). slices are
// the Service's own.
func SliceEndpointCounts(slices []*EndpointSlice, nodeName string, served Families) map[ShapePortKey][2]EndpointCount {
	out := map[ShapePortKey][2]EndpointCount{}
	for _, s := range slices {
		if s == nil || !servesAddressType(served, s.AddressType) {
			continue
		}
		i := 0
		if s.AddressType == discovery.AddressTypeIPv6 {
			i = 1
		}
		local := 0
		for j := range s.Endpoints {
			if nodeName != "" && s.Endpoints[j].Node() == nodeName {
				local++
			}
		}
		for _, p := range s.Ports {
			k := ShapePortKey{Protocol: TCP}
			if p.Name != nil {
				k.Name = *p.Name
			}
			if p.Protocol != nil {
				if proto, ok := protocolOf(*p.Protocol); ok {
					k.Protocol = proto
				}
			}
			c := out[k]
			c[i].All += len(s.Endpoints)
			c[i].Local += local
			out[k] = c
		}
	}
	return out
}

// ShapePortKey names a Service port in SliceEndpointCounts.
type ShapePortKey struct {
	Name     string
	Protocol Protocol
}
