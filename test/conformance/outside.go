package conformance

import "net/netip"

// outsideAddresses are the addresses the router owns and answers on OtherPort, so that the
// probes of the lb-other, externalIP-other and clusterIP-unallocated rows that a node does not
// capture are answered by "outside": every shape's LoadBalancer IP and externalIP, and
// UnallocatedClusterIP.
func outsideAddresses(shapes []Shape) []netip.Addr {
	out := []netip.Addr{UnallocatedClusterIP}
	for _, s := range shapes {
		if s.Type == "LoadBalancer" && s.LBIP.IsValid() {
			out = append(out, s.LBIP)
		}
		if s.ExternalIP.IsValid() {
			out = append(out, s.ExternalIP)
		}
	}
	return out
}
