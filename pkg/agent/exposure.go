package agent

import (
	"cmp"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/antrea-proxy/antrea-proxy/pkg/nodenet"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy"
)

// exposureOf derives the exposure from the proxier's installed Services: the NodePort of every
// port, its ClusterIPs, and the (address, protocol, port) tuples of its ExternalIPs and of the
// LoadBalancer ingress IPs the proxier decided to program (Decision.Program; an ingress with
// ipMode=Proxy or with proxyLoadBalancerIPs=false is left to normal routing), with the port's
// protocol and port. Only addresses of the port status's family count. The NodePorts, Ports,
// ClusterIPs and ServiceCIDRs are sorted and free of duplicates; nodePortAddrs, the addresses the
// proxier's flows serve NodePorts on (Proxier.NodePortAddresses), are passed through as they
// are; serviceCIDRs are the cluster's ServiceCIDRs (none when the API is absent).
func exposureOf(services []proxy.ServiceStatus, nodePortAddrs []netip.Addr, serviceCIDRs []netip.Prefix) nodenet.Exposure {
	nodePorts := map[nodenet.PortProto]bool{}
	tuples := map[nodenet.AddrPortProto]bool{}
	clusterIPs := map[netip.Addr]bool{}
	for _, s := range services {
		for _, ps := range s.Ports {
			sp := ps.Port
			proto := strings.ToLower(string(sp.Protocol))
			if sp.NodePort != 0 {
				nodePorts[nodenet.PortProto{Protocol: proto, Port: sp.NodePort}] = true
			}
			claim := func(ip netip.Addr) {
				if ip.IsValid() && ip.Is6() == ps.IPv6 {
					tuples[nodenet.AddrPortProto{Addr: ip, Protocol: proto, Port: sp.Port}] = true
				}
			}
			for _, ip := range sp.ExternalIPs {
				claim(ip)
			}
			for _, ing := range sp.LoadBalancerIngress {
				if ing.Decision.Program {
					claim(ing.IP)
				}
			}
			for _, ip := range sp.ClusterIPs {
				if ip.IsValid() && ip.Is6() == ps.IPv6 {
					clusterIPs[ip] = true
				}
			}
		}
	}
	e := nodenet.Exposure{NodePortAddresses: slices.Clone(nodePortAddrs)}
	e.NodePorts = slices.SortedFunc(maps.Keys(nodePorts), func(a, b nodenet.PortProto) int {
		return cmp.Or(cmp.Compare(a.Protocol, b.Protocol), cmp.Compare(a.Port, b.Port))
	})
	e.Ports = slices.SortedFunc(maps.Keys(tuples), nodenet.AddrPortProto.Compare)
	e.ClusterIPs = slices.SortedFunc(maps.Keys(clusterIPs), netip.Addr.Compare)
	for _, p := range serviceCIDRs {
		if p.IsValid() {
			e.ServiceCIDRs = append(e.ServiceCIDRs, p.Masked())
		}
	}
	slices.SortFunc(e.ServiceCIDRs, func(a, b netip.Prefix) int {
		return cmp.Or(a.Addr().Compare(b.Addr()), cmp.Compare(a.Bits(), b.Bits()))
	})
	e.ServiceCIDRs = slices.Compact(e.ServiceCIDRs)
	return e
}
