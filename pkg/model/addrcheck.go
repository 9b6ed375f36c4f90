package model

import (
	"net/netip"
	"slices"
)

// AddrKind says how a Service asks for an address it does not own by allocation: an
// ExternalIP (spec.externalIPs, set by any user who may edit the Service) or a load balancer
// ingress IP (status.loadBalancer.ingress, set by a controller).
type AddrKind uint8

const (
	KindExternalIP AddrKind = iota
	KindLoadBalancerIP
)

func (k AddrKind) String() string {
	if k == KindLoadBalancerIP {
		return "load balancer IP"
	}
	return "externalIP"
}

// AddrPolicy is what an ExternalIP or a programmed load balancer ingress IP must satisfy to be
// programmed. The zero value refuses only the addresses no Service may ever use (loopback,
// link-local, multicast, unspecified).
type AddrPolicy struct {
	// NodePortVirtualIPs and ServiceVirtualIPs are the agent's own virtual addresses (of both
	// families, pkg/config's nodeNetwork section): the host routes them into OVS.
	NodePortVirtualIPs []netip.Addr
	ServiceVirtualIPs  []netip.Addr
	// ServiceCIDRs are the cluster's ServiceCIDRs (networking.k8s.io/v1): an address inside one
	// is a ClusterIP's, whoever has it allocated; only the Service's own ClusterIP passes.
	ServiceCIDRs []netip.Prefix
	// ExternalIPCIDRs, when not empty, are the only ranges ExternalIPs may come from
	// (antreaProxy.externalIPCIDRs); load balancer IPs are not restricted by them.
	ExternalIPCIDRs []netip.Prefix
}

// Refusal reasons (the start of Refuse's answer).
const (
	RefusedInvalid          = "not a valid address"
	RefusedUnspecified      = "the unspecified address"
	RefusedLoopback         = "a loopback address"
	RefusedLinkLocal        = "a link-local unicast address"
	RefusedLinkLocalMulti   = "a link-local multicast address"
	RefusedMulticast        = "a multicast address"
	RefusedNodePortVirtual  = "the agent's NodePort virtual IP"
	RefusedServiceVirtual   = "the agent's Service virtual IP"
	RefusedServiceCIDR      = "inside ServiceCIDR "
	RefusedOutsideExternals = "outside antreaProxy.externalIPCIDRs"
)

// Refuse returns why addr, asked for as kind by a Service whose ClusterIPs are clusterIPs, must
// not be programmed; "" when it may be. The answer is a phrase such as "a loopback address" or
// "inside ServiceCIDR 10.96.0.0/12 and not this Service's ClusterIP". It is pure and never
// panics.
func (p AddrPolicy) Refuse(addr netip.Addr, kind AddrKind, clusterIPs []netip.Addr) string {
	if !addr.IsValid() {
		return RefusedInvalid
	}
	addr = addr.Unmap()
	switch {
	case addr.IsUnspecified():
		return RefusedUnspecified
	case addr.IsLoopback():
		return RefusedLoopback
	case addr.IsLinkLocalUnicast():
		return RefusedLinkLocal
	case addr.IsLinkLocalMulticast():
		return RefusedLinkLocalMulti
	case addr.IsMulticast():
		return RefusedMulticast
	case slices.Contains(p.NodePortVirtualIPs, addr):
		return RefusedNodePortVirtual
	case slices.Contains(p.ServiceVirtualIPs, addr):
		return RefusedServiceVirtual
	}
	if !slices.Contains(clusterIPs, addr) {
		for _, c := range p.ServiceCIDRs {
			if c.Contains(addr) {
				return RefusedServiceCIDR + c.String() + " and not this Service's ClusterIP"
			}
		}
	}
	if kind == KindExternalIP && len(p.ExternalIPCIDRs) > 0 &&
		!slices.ContainsFunc(p.ExternalIPCIDRs, func(c netip.Prefix) bool { return c.Contains(addr) }) {
		return RefusedOutsideExternals
	}
	return ""
}

// Reasons of an LB ingress decision the proxier overrides after DecideLBIngress: the address is
// refused (AddrPolicy) or another Service owns its tuple.
const (
	ReasonSkippedRefused Reason = "skipped: address refused"
	reasonClaimedPrefix  Reason = "skipped: claimed by "
)

// ReasonSkippedClaimed is the decision reason of an LB ingress whose (address, protocol, port)
// another Service owns: "skipped: claimed by <ns/name>".
func ReasonSkippedClaimed(owner string) Reason { return reasonClaimedPrefix + Reason(owner) }
