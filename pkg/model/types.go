// Package model is the proxy's internal model of Services and their endpoints: the ServicePort
// and Endpoint types that the flow pipeline and antctl consume, and pure functions that convert
// Kubernetes API objects (Service, EndpointSlice) into it. Nothing here talks to the API server
// or to OVS.
package model

import (
	"net/netip"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// Protocol is a Service port protocol.
type Protocol string

const (
	TCP  Protocol = "TCP"
	UDP  Protocol = "UDP"
	SCTP Protocol = "SCTP"
)

// ServicePortName identifies one port of one Service.
type ServicePortName struct {
	types.NamespacedName
	Port     string // the port's name; "" for a single unnamed port
	Protocol Protocol
}

func (n ServicePortName) String() string { return n.StringWith("") }

// StringWith returns n.String() + suffix, built in one allocation.
func (n ServicePortName) StringWith(suffix string) string {
	var b strings.Builder
	b.Grow(len(n.Namespace) + len(n.Name) + len(n.Port) + len(n.Protocol) + len(suffix) + 3)
	b.WriteString(n.Namespace)
	b.WriteByte('/')
	b.WriteString(n.Name)
	b.WriteByte(':')
	if n.Port != "" {
		b.WriteString(n.Port)
		b.WriteByte('/')
	}
	b.WriteString(string(n.Protocol))
	b.WriteString(suffix)
	return b.String()
}

// IPMode is a load balancer ingress ipMode (KEP-1860): "" (unset), "VIP" or "Proxy".
type IPMode string

const (
	IPModeUnset IPMode = ""
	IPModeVIP   IPMode = "VIP"
	IPModeProxy IPMode = "Proxy"
)

// Reason explains an LBIngress decision. The strings are shown to operators by antctl.
type Reason string

const (
	ReasonProgrammedVIP   Reason = "programmed (ipMode VIP)"
	ReasonProgrammedUnset Reason = "programmed (ipMode unset, treated as VIP)"
	ReasonSkippedProxy    Reason = "skipped: ipMode=Proxy"
	ReasonSkippedDisabled Reason = "skipped: proxyLoadBalancerIPs=false"
	ReasonSkippedHostname Reason = "skipped: hostname-only ingress"
	ReasonSkippedFamily   Reason = "skipped: IP family not served"
)

// Decision says whether the proxier programs flows for one LB ingress, and why.
type Decision struct {
	Program bool
	Reason  Reason
}

// LBIngress is one status.loadBalancer.ingress entry together with the proxier's decision.
type LBIngress struct {
	IP       netip.Addr // invalid for a hostname-only ingress
	Hostname string
	IPMode   IPMode
	Decision Decision
}

// ServicePort is everything the proxier needs to program one port of one Service.
type ServicePort struct {
	Name       ServicePortName
	ClusterIPs []netip.Addr // IPv4 and/or IPv6, in spec order
	Port       uint16
	Protocol   Protocol
	NodePort   uint16 // 0 when the Service has no NodePort

	ExternalIPs         []netip.Addr
	LoadBalancerIngress []LBIngress
	SourceRanges        []netip.Prefix // spec.loadBalancerSourceRanges

	ExternalPolicyLocal bool // externalTrafficPolicy=Local (NodePort/LoadBalancer only)
	InternalPolicyLocal bool // internalTrafficPolicy=Local
	// StickyMaxAgeSeconds is > 0 for sessionAffinity=ClientIP.
	StickyMaxAgeSeconds int32
	HealthCheckNodePort uint16
	TrafficDistribution string
}

// Equal reports whether s and o are the same port: every field equal, the lists element by
// element (nil and empty alike).
func (s ServicePort) Equal(o ServicePort) bool {
	return s.Name == o.Name && s.Port == o.Port && s.Protocol == o.Protocol && s.NodePort == o.NodePort &&
		s.ExternalPolicyLocal == o.ExternalPolicyLocal && s.InternalPolicyLocal == o.InternalPolicyLocal &&
		s.StickyMaxAgeSeconds == o.StickyMaxAgeSeconds && s.HealthCheckNodePort == o.HealthCheckNodePort &&
		s.TrafficDistribution == o.TrafficDistribution &&
		slices.Equal(s.ClusterIPs, o.ClusterIPs) && slices.Equal(s.ExternalIPs, o.ExternalIPs) &&
		slices.Equal(s.LoadBalancerIngress, o.LoadBalancerIngress) && slices.Equal(s.SourceRanges, o.SourceRanges)
}

// Endpoint is one backend of one Service port, merged across the Service's EndpointSlices.
type Endpoint struct {
	IP       netip.Addr
	Port     uint16
	NodeName string
	Zone     string
	// Local is true when the endpoint runs on this node.
	Local       bool
	Ready       bool
	Serving     bool
	Terminating bool
	// ZoneHints and NodeHints are the EndpointSlice topology hints ("forZones", "forNodes").
	ZoneHints []string
	NodeHints []string
}

// AddrPort renders "ip:port" (IPv6 in brackets).
func (e Endpoint) AddrPort() string { return netip.AddrPortFrom(e.IP, e.Port).String() }
