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
	// NodePorts are served on every NodePort address of the node.
	NodePorts []PortProto
	// IPs are the programmed LoadBalancer ingress IPs and the ExternalIPs: the host routes them
	// into OVS through the gateway.
	IPs []netip.Addr
}

// Equal reports whether e and o hold the same (sorted) content.
func (e Exposure) Equal(o Exposure) bool {
	return slices.Equal(e.NodePorts, o.NodePorts) && slices.Equal(e.IPs, o.IPs)
}
