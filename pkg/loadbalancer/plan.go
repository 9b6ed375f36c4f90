package loadbalancer

import (
	"fmt"
	"net/netip"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/antrea-proxy/antrea-proxy/pkg/lbapi"
	"github.com/antrea-proxy/antrea-proxy/pkg/loadbalancer/conditions"
	"github.com/antrea-proxy/antrea-proxy/pkg/loadbalancer/ipam"
)

// request is the package function request with the labels of the
// Service's namespace, which pools' namespaceSelectors match.
func (c *Controller) request(svc *v1.Service) (ipam.Request, []conditions.Unmet) {
	req, bad := request(svc)
	if ns, err := c.namespaces.Get(svc.Namespace); err == nil {
		req.NamespaceLabels = ns.Labels
	}
	return req, bad
}

// request turns a Service into an allocation request. Malformed
// annotations are returned as unmet features: they make the Service
// unsupported whatever it requires.
func request(svc *v1.Service) (ipam.Request, []conditions.Unmet) {
	req := ipam.Request{
		Owner:    types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name},
		Families: families(svc),
		Pool:     svc.Annotations[lbapi.AnnotationPool],
		ShareKey: svc.Annotations[lbapi.AnnotationAllowSharedIP],
		Labels:   svc.Labels,
	}
	var bad []conditions.Unmet
	if s := svc.Spec.LoadBalancerIP; s != "" {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" { // as lbapi.ParseIPList: a zoned address is never allocatable
			bad = append(bad, conditions.Unmet{Feature: conditions.FeatureLoadBalancerIP,
				Why: fmt.Sprintf("spec.loadBalancerIP %q is not an IP address", s)})
		} else {
			req.Wanted = append(req.Wanted, a.Unmap())
		}
	}
	if s, ok := svc.Annotations[lbapi.AnnotationLoadBalancerIPs]; ok {
		ips, err := lbapi.ParseIPList(s)
		if err != nil {
			bad = append(bad, conditions.Unmet{Feature: conditions.FeatureLoadBalancerIP,
				Why: fmt.Sprintf("annotation %s: %v", lbapi.AnnotationLoadBalancerIPs, err)})
		}
		for _, a := range ips {
			if !slices.Contains(req.Wanted, a) {
				req.Wanted = append(req.Wanted, a)
			}
		}
	}
	req.Ports = portKeys(svc)
	return req, bad
}

// families returns the families to allocate: spec.ipFamilies, cut to one
// for SingleStack. An empty list (not defaulted by an API server) is
// derived from the ClusterIP, else IPv4.
func families(svc *v1.Service) []v1.IPFamily {
	fams := slices.Clone(svc.Spec.IPFamilies)
	if len(fams) == 0 {
		fams = []v1.IPFamily{v1.IPv4Protocol}
		if a, err := netip.ParseAddr(svc.Spec.ClusterIP); err == nil && !a.Unmap().Is4() {
			fams[0] = v1.IPv6Protocol
		}
	}
	if p := svc.Spec.IPFamilyPolicy; (p == nil || *p == v1.IPFamilyPolicySingleStack) && len(fams) > 1 {
		fams = fams[:1]
	}
	return fams
}

func portKeys(svc *v1.Service) []ipam.PortKey {
	out := make([]ipam.PortKey, 0, len(svc.Spec.Ports))
	for _, p := range svc.Spec.Ports {
		proto := p.Protocol
		if proto == "" {
			proto = v1.ProtocolTCP
		}
		out = append(out, ipam.PortKey{Protocol: proto, Port: p.Port})
	}
	return out
}

// evaluation is what the controller concluded about a Service after
// allocation: which features are unmet, and whether it refuses the Service.
type evaluation struct {
	unsupported    []conditions.Unmet
	degraded       []conditions.Unmet
	infrastructure []string
}

// refused reports whether the Service gets no load balancer at all.
func (e evaluation) refused() bool { return len(e.unsupported) > 0 }

// evaluate classifies the allocation problems and the features the
// allocated pools cannot deliver. bad are unmet features that make the
// Service unsupported regardless of what it requires.
func evaluate(svc *v1.Service, res ipam.Result, bad []conditions.Unmet) evaluation {
	var e evaluation
	e.unsupported = append(e.unsupported, bad...)
	required := conditions.ParseFeatures(svc.Annotations[lbapi.AnnotationRequiredFeatures])
	for _, f := range required {
		if !f.Known() {
			e.unsupported = append(e.unsupported, conditions.Unmet{Feature: f,
				Why: fmt.Sprintf("unknown feature (known: %s)", conditions.FormatFeatures(conditions.AllFeatures()))})
		}
	}
	var unmet []conditions.Unmet
	for _, p := range res.Problems {
		switch p.Kind {
		case ipam.NoPoolForFamily:
			unmet = append(unmet, conditions.Unmet{Feature: conditions.FeatureIPFamilies, Why: p.Message})
		case ipam.WantedNotInPool:
			unmet = append(unmet, conditions.Unmet{Feature: conditions.FeatureLoadBalancerIP, Why: p.Message})
		case ipam.PoolNotAllowed, ipam.SharingNotAllowed:
			// A pool's scope is a control of the administrator: always refused.
			e.unsupported = append(e.unsupported, conditions.Unmet{Feature: conditions.FeatureLoadBalancerIP, Why: p.Message})
		default:
			e.infrastructure = append(e.infrastructure, p.Message)
		}
	}
	if proxy := proxyAddrs(res.Assigned); len(proxy) > 0 {
		where := fmt.Sprintf("ipMode Proxy address %s", proxy[0])
		if svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal {
			unmet = append(unmet, conditions.Unmet{Feature: conditions.FeatureExternalTrafficPolicy,
				Why: where + " is reached through an external proxy, which does not preserve the client source IP"})
		}
		if svc.Spec.SessionAffinity == v1.ServiceAffinityClientIP {
			unmet = append(unmet, conditions.Unmet{Feature: conditions.FeatureSessionAffinity,
				Why: where + " is reached through an external proxy, so the client IP seen is the proxy's"})
		}
		if len(svc.Spec.LoadBalancerSourceRanges) > 0 && !proxiesEnforceSourceRanges(res.Assigned) {
			// A security control that cannot be enforced: always refused.
			e.unsupported = append(e.unsupported, conditions.Unmet{Feature: conditions.FeatureLoadBalancerSourceRanges,
				Why: where + " is reached through an external proxy, so source ranges cannot be enforced"})
		}
	}
	built := len(res.Assigned) > 0
	for _, u := range unmet {
		switch {
		case slices.Contains(required, u.Feature), !built && len(e.infrastructure) == 0, u.Feature.DegradedReason() == "":
			e.unsupported = append(e.unsupported, u)
		default:
			e.degraded = append(e.degraded, u)
		}
	}
	return e
}

// proxiesEnforceSourceRanges reports whether the external proxy of every Proxy-mode address
// assigned enforces loadBalancerSourceRanges (the pool says so: proxyEnforcesSourceRanges).
func proxiesEnforceSourceRanges(as []ipam.Assignment) bool {
	for _, a := range as {
		if a.Pool.Mode == v1.LoadBalancerIPModeProxy && !a.Pool.ProxyEnforcesSourceRanges {
			return false
		}
	}
	return true
}

func proxyAddrs(as []ipam.Assignment) []netip.Addr {
	var out []netip.Addr
	for _, a := range as {
		if a.Pool != nil && a.Pool.Mode == v1.LoadBalancerIPModeProxy {
			out = append(out, a.Addr)
		}
	}
	return out
}

// ingress renders the status.loadBalancer.ingress entries.
func ingress(svc *v1.Service, as []ipam.Assignment) []v1.LoadBalancerIngress {
	if len(as) == 0 {
		return nil
	}
	out := make([]v1.LoadBalancerIngress, 0, len(as))
	for _, a := range as {
		mode := a.Pool.Mode
		ing := v1.LoadBalancerIngress{IP: a.Addr.String(), IPMode: &mode}
		for _, p := range portKeys(svc) {
			ing.Ports = append(ing.Ports, v1.PortStatus{Port: p.Port, Protocol: p.Protocol})
		}
		out = append(out, ing)
	}
	return out
}

// ingressAddrs returns the addresses of status.loadBalancer.ingress.
func ingressAddrs(svc *v1.Service) []netip.Addr {
	var out []netip.Addr
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		if a, err := netip.ParseAddr(ing.IP); err == nil {
			out = append(out, a.Unmap())
		}
	}
	return out
}
