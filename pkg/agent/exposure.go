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
// port, its ClusterIPs, its ExternalIPs, and the LoadBalancer ingress IPs the proxier decided to program
// (Decision.Program; an ingress with ipMode=Proxy or with proxyLoadBalancerIPs=false is left
// to normal routing). Only addresses of the port status's family count. The NodePorts, IPs and
// ClusterIPs are sorted and free of duplicates; nodePortAddrs, the addresses the proxier's flows serve
// NodePorts on (Proxier.NodePortAddresses), are passed through as they are.
func exposureOf(services []proxy.ServiceStatus, nodePortAddrs []netip.Addr) nodenet.Exposure {
	ports := map[nodenet.PortProto]bool{}
	ips := map[netip.Addr]bool{}
	clusterIPs := map[netip.Addr]bool{}
	for _, s := range services {
		for _, ps := range s.Ports {
			sp := ps.Port
			if sp.NodePort != 0 {
				ports[nodenet.PortProto{Protocol: strings.ToLower(string(sp.Protocol)), Port: sp.NodePort}] = true
			}
			for _, ip := range sp.ExternalIPs {
				if ip.IsValid() && ip.Is6() == ps.IPv6 {
					ips[ip] = true
				}
			}
			for _, ip := range sp.ClusterIPs {
				if ip.IsValid() && ip.Is6() == ps.IPv6 {
					clusterIPs[ip] = true
				}
			}
			for _, ing := range sp.LoadBalancerIngress {
				if ing.Decision.Program && ing.IP.IsValid() && ing.IP.Is6() == ps.IPv6 {
					ips[ing.IP] = true
				}
			}
		}
	}
	e := nodenet.Exposure{NodePortAddresses: slices.Clone(nodePortAddrs)}
	for p := range ports {
		e.NodePorts = append(e.NodePorts, p)
	}
	slices.SortFunc(e.NodePorts, func(a, b nodenet.PortProto) int {
		return cmp.Or(cmp.Compare(a.Protocol, b.Protocol), cmp.Compare(a.Port, b.Port))
	})
	e.IPs = slices.SortedFunc(maps.Keys(ips), netip.Addr.Compare)
	e.ClusterIPs = slices.SortedFunc(maps.Keys(clusterIPs), netip.Addr.Compare)
	return e
}
