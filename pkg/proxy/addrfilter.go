package proxy

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
)

// ProblemAddressRefused: an ExternalIP or load balancer IP of the Service is one no Service
// may have programmed (model.AddrPolicy: loopback, link-local, multicast, unspecified, the
// agent's virtual IPs, another ClusterIP's ServiceCIDR, outside antreaProxy.externalIPCIDRs);
// it is left out, the rest of the Service works.
const ProblemAddressRefused = "AddressRefused"

// addrIssue is one address a Service asked for and does not get: refused, or owned by another
// Service (claims.go).
type addrIssue struct {
	reason  string // ProblemAddressRefused or ProblemFlowConflict
	message string
}

// claimsOf returns the tuples ports claim, sorted, once each (a Service claiming one tuple both
// as a ClusterIP and externally keeps the ClusterIP claim): every ClusterIP, and every
// ExternalIP, programmed LB ingress IP and NodePort that policy does not refuse.
func claimsOf(ports []model.ServicePort, policy model.AddrPolicy) []claim {
	var out []claim
	for _, sp := range ports {
		for _, ip := range sp.ClusterIPs {
			out = append(out, claim{key: tupleKey{v6: ip.Is6(), addr: ip}, kind: claimClusterIP})
		}
		for _, ip := range sp.ExternalIPs {
			if policy.Refuse(ip, model.KindExternalIP, sp.ClusterIPs) == "" {
				out = append(out, claim{key: tupleOf(ip, sp.Protocol, sp.Port), kind: claimExternal})
			}
		}
		for _, ing := range sp.LoadBalancerIngress {
			if ing.Decision.Program && policy.Refuse(ing.IP, model.KindLoadBalancerIP, sp.ClusterIPs) == "" {
				out = append(out, claim{key: tupleOf(ing.IP, sp.Protocol, sp.Port), kind: claimExternal})
			}
		}
		if sp.NodePort != 0 {
			for _, v6 := range [...]bool{false, true} {
				if hasFamily(sp.ClusterIPs, v6) {
					out = append(out, claim{key: tupleKey{v6: v6, proto: sp.Protocol, port: sp.NodePort}, kind: claimExternal})
				}
			}
		}
	}
	slices.SortFunc(out, compareClaims)
	return slices.Compact(out)
}

func tupleOf(ip netip.Addr, proto model.Protocol, port uint16) tupleKey {
	return tupleKey{v6: ip.Is6(), addr: ip, proto: proto, port: port}
}

func compareClaims(a, b claim) int {
	if c := cmp.Compare(a.kind, b.kind); c != 0 {
		return c
	}
	return compareTuples(a.key, b.key)
}

func compareTuples(a, b tupleKey) int {
	switch {
	case a.v6 != b.v6:
		if a.v6 {
			return 1
		}
		return -1
	case a.addr != b.addr:
		return a.addr.Compare(b.addr)
	case a.proto != b.proto:
		return strings.Compare(string(a.proto), string(b.proto))
	}
	return cmp.Compare(a.port, b.port)
}

// filterPorts removes from nn's ports every ExternalIP and LB ingress IP that policy refuses or
// whose tuple another Service owns (idx), and a NodePort another Service owns, and returns the
// issues, one per address and reason, sorted. An LB ingress left out stays listed with
// Decision.Program false and a reason saying why. The ports are modified in place (the
// caller's own conversion).
func filterPorts(nn types.NamespacedName, ports []model.ServicePort, policy model.AddrPolicy, idx *claimIndex) []addrIssue {
	var issues []addrIssue
	note := func(reason, msg string) {
		if !slices.Contains(issues, addrIssue{reason, msg}) {
			issues = append(issues, addrIssue{reason, msg})
		}
	}
	check := func(sp *model.ServicePort, ip netip.Addr, kind model.AddrKind) model.Reason {
		if why := policy.Refuse(ip, kind, sp.ClusterIPs); why != "" {
			note(ProblemAddressRefused, fmt.Sprintf("%s %s is refused: %s", kind, ip, why))
			return model.ReasonSkippedRefused
		}
		if w, lost := idx.lost(nn, tupleOf(ip, sp.Protocol, sp.Port)); lost {
			note(ProblemFlowConflict, fmt.Sprintf("%s %s is claimed by %s", kind,
				netip.AddrPortFrom(ip, sp.Port).String()+"/"+string(sp.Protocol), describe(w)))
			return model.ReasonSkippedClaimed(w.svc.String())
		}
		return ""
	}
	for i := range ports {
		sp := &ports[i]
		sp.ExternalIPs = slices.DeleteFunc(sp.ExternalIPs, func(ip netip.Addr) bool {
			return check(sp, ip, model.KindExternalIP) != ""
		})
		for j := range sp.LoadBalancerIngress {
			ing := &sp.LoadBalancerIngress[j]
			if !ing.Decision.Program {
				continue
			}
			if r := check(sp, ing.IP, model.KindLoadBalancerIP); r != "" {
				ing.Decision = model.Decision{Program: false, Reason: r}
			}
		}
		if sp.NodePort == 0 {
			continue
		}
		for _, v6 := range [...]bool{false, true} {
			if !hasFamily(sp.ClusterIPs, v6) {
				continue
			}
			if w, lost := idx.lost(nn, tupleKey{v6: v6, proto: sp.Protocol, port: sp.NodePort}); lost {
				note(ProblemFlowConflict, fmt.Sprintf("NodePort %d/%s is claimed by %s", sp.NodePort, sp.Protocol, describe(w)))
				sp.NodePort = 0
				break
			}
		}
	}
	slices.SortFunc(issues, func(a, b addrIssue) int { return strings.Compare(a.message, b.message) })
	return issues
}

// describe names a tuple's owner for a Problem message.
func describe(c claimant) string {
	if c.kind == claimClusterIP {
		return c.svc.String() + " (its ClusterIP)"
	}
	return c.svc.String()
}

// hasExternalAddrs reports whether svc asks for any ExternalIP or LB ingress IP (what a change
// of the address policy can change).
func hasExternalAddrs(svc *v1.Service) bool {
	return len(svc.Spec.ExternalIPs) > 0 || len(svc.Status.LoadBalancer.Ingress) > 0
}

// issuesProblem turns a Service's address issues into its Problem: FlowConflict when another
// Service owns one of its tuples, else AddressRefused; the message lists every issue.
func issuesProblem(issues []addrIssue) (reason, message string) {
	reason = ProblemAddressRefused
	msgs := make([]string, len(issues))
	for i, is := range issues {
		msgs[i] = is.message
		if is.reason == ProblemFlowConflict {
			reason = ProblemFlowConflict
		}
	}
	return reason, strings.Join(msgs, "; ")
}
