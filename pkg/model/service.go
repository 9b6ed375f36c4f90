package model

import (
	"fmt"
	"net/netip"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// LabelServiceProxyName is the well-known label that hands a Service to an alternative proxy.
const LabelServiceProxyName = "service.kubernetes.io/service-proxy-name"

// DefaultStickyMaxAgeSeconds is the sessionAffinity=ClientIP timeout when the Service does not
// set one (3 hours, the Kubernetes default).
const DefaultStickyMaxAgeSeconds int32 = 10800

// ConvertOptions are the proxier settings that shape Service conversion.
type ConvertOptions struct {
	// ProxyLoadBalancerIPs is the proxyLoadBalancerIPs setting (see DecideLBIngress).
	ProxyLoadBalancerIPs bool
	// Served are the IP families this proxier programs; addresses of other families are dropped.
	Served Families
}

// ServicePortsFromService converts a Service into one ServicePort per spec.ports entry, in spec
// order. It does not decide whether the Service is handled at all: call ShouldSkipService first.
//
// Addresses (cluster IPs, external IPs, source ranges) that do not parse or that are of a family
// not in opts.Served are dropped. A Service left with no cluster IP of a served family yields
// nil: like kube-proxy, a proxier only handles Services that have a cluster IP of its family.
// Ports with a number outside 1..65535 or a protocol other than TCP, UDP or SCTP (an empty
// protocol means TCP) are dropped. It never panics; a nil Service yields nil.
func ServicePortsFromService(svc *v1.Service, opts ConvertOptions) []ServicePort {
	if svc == nil {
		return nil
	}
	spec := &svc.Spec
	clusterIPs := servedAddrs(clusterIPStrings(svc), opts.Served)
	if len(clusterIPs) == 0 {
		return nil
	}
	nodePortType := spec.Type == v1.ServiceTypeNodePort || spec.Type == v1.ServiceTypeLoadBalancer
	lbType := spec.Type == v1.ServiceTypeLoadBalancer

	externalIPs := servedAddrs(spec.ExternalIPs, opts.Served)

	var ingress []LBIngress
	var sourceRanges []netip.Prefix
	if lbType {
		for _, ing := range svc.Status.LoadBalancer.Ingress {
			ingress = append(ingress, LBIngressFromAPI(opts.ProxyLoadBalancerIPs, ing, opts.Served))
		}
		for _, r := range spec.LoadBalancerSourceRanges {
			if p, ok := parsePrefix(r); ok && opts.Served.Serves(p.Addr()) {
				sourceRanges = append(sourceRanges, p)
			}
		}
	}

	externalLocal := externalPolicyLocal(svc)
	internalLocal := spec.InternalTrafficPolicy != nil &&
		*spec.InternalTrafficPolicy == v1.ServiceInternalTrafficPolicyLocal

	var sticky int32
	if spec.SessionAffinity == v1.ServiceAffinityClientIP {
		sticky = DefaultStickyMaxAgeSeconds
		if c := spec.SessionAffinityConfig; c != nil && c.ClientIP != nil &&
			c.ClientIP.TimeoutSeconds != nil && *c.ClientIP.TimeoutSeconds > 0 {
			sticky = *c.ClientIP.TimeoutSeconds
		}
	}

	var healthCheckNodePort uint16
	if lbType && externalLocal {
		healthCheckNodePort = portNumber(spec.HealthCheckNodePort)
	}
	var trafficDistribution string
	if spec.TrafficDistribution != nil {
		trafficDistribution = *spec.TrafficDistribution
	}

	nn := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	var out []ServicePort
	for i := range spec.Ports {
		p := &spec.Ports[i]
		proto, ok := protocolOf(p.Protocol)
		if !ok {
			continue
		}
		port := portNumber(p.Port)
		if port == 0 {
			continue
		}
		var nodePort uint16
		if nodePortType {
			nodePort = portNumber(p.NodePort)
		}
		out = append(out, ServicePort{
			Name:                ServicePortName{NamespacedName: nn, Port: p.Name, Protocol: proto},
			ClusterIPs:          clone(clusterIPs),
			Port:                port,
			Protocol:            proto,
			NodePort:            nodePort,
			ExternalIPs:         clone(externalIPs),
			LoadBalancerIngress: clone(ingress),
			SourceRanges:        clone(sourceRanges),
			ExternalPolicyLocal: externalLocal,
			InternalPolicyLocal: internalLocal,
			StickyMaxAgeSeconds: sticky,
			HealthCheckNodePort: healthCheckNodePort,
			TrafficDistribution: trafficDistribution,
		})
	}
	return out
}

// externalPolicyLocal is true for externalTrafficPolicy=Local on a Service that is reachable
// from outside the cluster: NodePort, LoadBalancer, or ClusterIP with externalIPs (the
// apiserver accepts eTP on exactly those, and kube-proxy honours it on all of them).
func externalPolicyLocal(svc *v1.Service) bool {
	if svc.Spec.ExternalTrafficPolicy != v1.ServiceExternalTrafficPolicyLocal {
		return false
	}
	switch svc.Spec.Type {
	case v1.ServiceTypeNodePort, v1.ServiceTypeLoadBalancer:
		return true
	case v1.ServiceTypeClusterIP, "":
		return len(svc.Spec.ExternalIPs) > 0
	}
	return false
}

// ClusterIPs returns svc's parseable cluster IPs (spec.clusterIPs, else spec.clusterIP),
// unmapped, in spec order, once each; nil for a nil Service.
func ClusterIPs(svc *v1.Service) []netip.Addr {
	if svc == nil {
		return nil
	}
	return servedAddrs(clusterIPStrings(svc), DualStack)
}

// clusterIPStrings returns spec.clusterIPs, or spec.clusterIP when clusterIPs is empty.
func clusterIPStrings(svc *v1.Service) []string {
	if len(svc.Spec.ClusterIPs) > 0 {
		return svc.Spec.ClusterIPs
	}
	if svc.Spec.ClusterIP != "" {
		return []string{svc.Spec.ClusterIP}
	}
	return nil
}

// servedAddrs parses addresses in order, dropping invalid ones, duplicates and ones of
// families not served.
func servedAddrs(in []string, served Families) []netip.Addr {
	var out []netip.Addr
	for _, s := range in {
		a, ok := parseAddr(s)
		if !ok || !served.Serves(a) {
			continue
		}
		dup := false
		for _, b := range out {
			if a == b {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, a)
		}
	}
	return out
}

func protocolOf(p v1.Protocol) (Protocol, bool) {
	switch p {
	case v1.ProtocolTCP, "":
		return TCP, true
	case v1.ProtocolUDP:
		return UDP, true
	case v1.ProtocolSCTP:
		return SCTP, true
	}
	return "", false
}

// portNumber returns p as a port number, or 0 when it is outside 1..65535.
func portNumber(p int32) uint16 {
	if p < 1 || p > 65535 {
		return 0
	}
	return uint16(p)
}

func clone[T any](s []T) []T {
	if s == nil {
		return nil
	}
	return append([]T(nil), s...)
}

// SkipSet is the skipServices setting: Services this proxier must ignore, by name or by any of
// their cluster IPs. pkg/config parses and validates the entries; pkg/agent builds the SkipSet
// from that result.
type SkipSet struct {
	Names sets.Set[types.NamespacedName]
	IPs   sets.Set[netip.Addr]
}

// Skip reasons returned by ShouldSkipService.
const (
	SkipReasonNil          = "nil Service"
	SkipReasonExternalName = "type ExternalName"
	SkipReasonHeadless     = "headless (clusterIP None)"
	SkipReasonNoClusterIP  = "no valid cluster IP"
	SkipReasonSkipName     = "listed by name in skipServices"
	SkipReasonSkipIP       = "cluster IP listed in skipServices"
)

// ShouldSkipService reports whether the proxier must ignore svc entirely, and why.
//
// Skipped are: ExternalName Services, headless Services (clusterIP "None"), Services without a
// parseable cluster IP, Services labelled service.kubernetes.io/headless (any value, as
// kube-proxy's label selector), Services whose service.kubernetes.io/service-proxy-name label does not
// match serviceProxyName (when serviceProxyName is "", the mere presence of the label means
// skip; when it is set, the label must be present and equal to it), and Services listed in
// skip by name or by any of their cluster IPs.
func ShouldSkipService(svc *v1.Service, serviceProxyName string, skip SkipSet) (bool, string) {
	if svc == nil {
		return true, SkipReasonNil
	}
	if svc.Spec.Type == v1.ServiceTypeExternalName {
		return true, SkipReasonExternalName
	}
	ipStrs := clusterIPStrings(svc)
	for _, s := range ipStrs {
		if strings.TrimSpace(s) == v1.ClusterIPNone {
			return true, SkipReasonHeadless
		}
	}
	var ips []netip.Addr
	for _, s := range ipStrs {
		if a, ok := parseAddr(s); ok {
			ips = append(ips, a)
		}
	}
	if len(ips) == 0 {
		return true, SkipReasonNoClusterIP
	}
	if _, ok := svc.Labels[v1.IsHeadlessService]; ok {
		// kube-proxy's informers select !service.kubernetes.io/headless: a Service with the
		// label is left alone whatever its clusterIP.
		return true, fmt.Sprintf("label %s is set", v1.IsHeadlessService)
	}
	label, hasLabel := svc.Labels[LabelServiceProxyName]
	if serviceProxyName == "" && hasLabel {
		return true, fmt.Sprintf("label %s=%q is set (this proxier has no serviceProxyName)", LabelServiceProxyName, label)
	}
	if serviceProxyName != "" && label != serviceProxyName {
		if !hasLabel {
			return true, fmt.Sprintf("label %s is missing (want %q)", LabelServiceProxyName, serviceProxyName)
		}
		return true, fmt.Sprintf("label %s=%q does not match %q", LabelServiceProxyName, label, serviceProxyName)
	}
	if skip.Names.Has(types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}) {
		return true, SkipReasonSkipName
	}
	for _, a := range ips {
		if skip.IPs.Has(a) {
			return true, SkipReasonSkipIP
		}
	}
	return false, ""
}
