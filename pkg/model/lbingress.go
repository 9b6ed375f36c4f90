package model

import (
	"net/netip"

	v1 "k8s.io/api/core/v1"
)

// ReasonSkippedUnknownMode is the decision for an ingress whose ipMode is set to a value other
// than "VIP" or "Proxy". The apiserver only accepts those two values, so this can only happen
// with a malformed or future object; the proxier then stays conservative and does not program
// the IP rather than guess whether the load balancer delivers packets with the VIP intact.
const ReasonSkippedUnknownMode Reason = "skipped: unknown ipMode"

// Families says which IP families this proxier serves. A dual-stack proxier sets both.
type Families struct {
	IPv4 bool
	IPv6 bool
}

// DualStack serves both families.
var DualStack = Families{IPv4: true, IPv6: true}

// Serves reports whether addr is valid and of a served family. IPv4-mapped IPv6 addresses
// count as IPv4 (they are unmapped by this package's parsers anyway).
func (f Families) Serves(addr netip.Addr) bool {
	if !addr.IsValid() {
		return false
	}
	if addr.Is4() || addr.Is4In6() {
		return f.IPv4
	}
	return f.IPv6
}

// String renders e.g. "IPv4,IPv6" or "none".
func (f Families) String() string {
	switch {
	case f.IPv4 && f.IPv6:
		return "IPv4,IPv6"
	case f.IPv4:
		return "IPv4"
	case f.IPv6:
		return "IPv6"
	}
	return "none"
}

// DecideLBIngress is KEP-1860 "Option 1": the single place that decides whether the proxier
// programs flows for one status.loadBalancer.ingress entry. The flow pipeline and
// `antctl get servicemap` both call it so that what is shown is what is programmed.
//
// The checks run in this order, the first that applies wins:
//  1. no parseable IP (hostname-only ingress)     → skipped, ReasonSkippedHostname
//  2. IP of a family this proxier does not serve  → skipped, ReasonSkippedFamily
//  3. proxyLoadBalancerIPs=false                  → skipped, ReasonSkippedDisabled
//  4. ipMode "Proxy"                              → skipped, ReasonSkippedProxy
//  5. ipMode "VIP"                                → programmed, ReasonProgrammedVIP
//  6. ipMode unset (nil or "")                    → programmed, ReasonProgrammedUnset
//  7. any other ipMode value                      → skipped, ReasonSkippedUnknownMode
//
// It never panics, whatever the input.
func DecideLBIngress(proxyLoadBalancerIPs bool, ing v1.LoadBalancerIngress, served Families) Decision {
	ip, ok := parseAddr(ing.IP)
	if !ok {
		return Decision{Program: false, Reason: ReasonSkippedHostname}
	}
	if !served.Serves(ip) {
		return Decision{Program: false, Reason: ReasonSkippedFamily}
	}
	if !proxyLoadBalancerIPs {
		return Decision{Program: false, Reason: ReasonSkippedDisabled}
	}
	switch ingressMode(ing) {
	case IPModeProxy:
		return Decision{Program: false, Reason: ReasonSkippedProxy}
	case IPModeVIP:
		return Decision{Program: true, Reason: ReasonProgrammedVIP}
	case IPModeUnset:
		return Decision{Program: true, Reason: ReasonProgrammedUnset}
	}
	return Decision{Program: false, Reason: ReasonSkippedUnknownMode}
}

// LBIngressFromAPI converts one ingress entry, including its Option 1 decision. IP is the zero
// netip.Addr when the entry has no parseable IP.
func LBIngressFromAPI(proxyLoadBalancerIPs bool, ing v1.LoadBalancerIngress, served Families) LBIngress {
	ip, _ := parseAddr(ing.IP)
	return LBIngress{
		IP:       ip,
		Hostname: ing.Hostname,
		IPMode:   ingressMode(ing),
		Decision: DecideLBIngress(proxyLoadBalancerIPs, ing, served),
	}
}

func ingressMode(ing v1.LoadBalancerIngress) IPMode {
	if ing.IPMode == nil {
		return IPModeUnset
	}
	return IPMode(*ing.IPMode)
}
