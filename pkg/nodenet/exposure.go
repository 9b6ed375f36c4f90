package nodenet

import (
	"net/netip"
	"slices"
)

// PortProto is a protocol ("tcp", "udp", "sctp") and port.
type PortProto struct {
	Protocol string
	Port     uint16
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
	// IPs are the programmed LoadBalancer ingress IPs and the ExternalIPs: the host routes them
	// into OVS through the gateway.
	IPs []netip.Addr
	// ClusterIPs are the ClusterIPs of the installed Services: the host routes them into OVS
	// through the gateway, so that the node itself (node processes, hostNetwork pods) reaches
	// them.
	ClusterIPs []netip.Addr
}

// Equal reports whether e and o hold the same content (NodePorts, IPs and ClusterIPs sorted,
// the addresses in the proxier's order).
func (e Exposure) Equal(o Exposure) bool {
	return slices.Equal(e.NodePorts, o.NodePorts) && slices.Equal(e.NodePortAddresses, o.NodePortAddresses) &&
		slices.Equal(e.IPs, o.IPs) && slices.Equal(e.ClusterIPs, o.ClusterIPs)
}
