package nodenet

import (
	"cmp"
	"net/netip"
	"slices"
)

// PortProto is a protocol ("tcp", "udp", "sctp") and port.
type PortProto struct {
	Protocol string
	Port     uint16
}

// AddrPortProto is an address, protocol ("tcp", "udp", "sctp") and port.
type AddrPortProto struct {
	Addr     netip.Addr
	Protocol string
	Port     uint16
}

// Compare orders by address, then protocol, then port.
func (t AddrPortProto) Compare(o AddrPortProto) int {
	return cmp.Or(t.Addr.Compare(o.Addr), cmp.Compare(t.Protocol, o.Protocol), cmp.Compare(t.Port, o.Port))
}

// Exposure is what the host sends into OVS for Services, as the proxier programmed them. The
// agent derives it from the proxier's installed Services; this package never sees the proxier.
type Exposure struct {
	// NodePorts are served on every address of NodePortAddresses.
	NodePorts []PortProto
	// NodePortAddresses are the node addresses on which the proxier's flows serve NodePorts
	// (InternalIPs and ExternalIPs within antreaProxy.nodePortAddresses, chosen by the
	// proxier): the host DNATs the NodePorts on exactly these, in this order.
	NodePortAddresses []netip.Addr
	// Ports are the (address, protocol, port) tuples of the programmed LoadBalancer ingress IPs
	// and the ExternalIPs: the host sends exactly these into OVS through the gateway (a mark and
	// a policy route); other ports of the same addresses are routed as if no Service existed.
	Ports []AddrPortProto
	// ClusterIPs are the ClusterIPs of the installed Services: the host routes them (whole
	// addresses) into OVS through the gateway, so that the node itself (node processes,
	// hostNetwork pods) reaches them. A ClusterIP inside one of ServiceCIDRs needs no route of
	// its own.
	ClusterIPs []netip.Addr
	// ServiceCIDRs are the ranges ClusterIPs are allocated from (the ServiceCIDR API), empty
	// when not known: the host routes each into OVS with one route.
	ServiceCIDRs []netip.Prefix
}

// Equal reports whether e and o hold the same content (NodePorts, Ports, ClusterIPs and
// ServiceCIDRs sorted, the addresses in the proxier's order).
func (e Exposure) Equal(o Exposure) bool {
	return slices.Equal(e.NodePorts, o.NodePorts) && slices.Equal(e.NodePortAddresses, o.NodePortAddresses) &&
		slices.Equal(e.Ports, o.Ports) && slices.Equal(e.ClusterIPs, o.ClusterIPs) && slices.Equal(e.ServiceCIDRs, o.ServiceCIDRs)
}

// PortAddrs returns the addresses of Ports, sorted, each once: the LB IPs and ExternalIPs the
// proxier programs.
func (e Exposure) PortAddrs() []netip.Addr {
	out := make([]netip.Addr, 0, len(e.Ports))
	for _, t := range e.Ports {
		out = append(out, t.Addr)
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}
