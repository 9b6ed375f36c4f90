package servicetrace

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver/apiv1"
	"github.com/antrea-proxy/antrea-proxy/pkg/model"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/oftrace"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy"
)

// How a destination address belongs to a Service port.
type addrKind string

const (
	kindClusterIP  addrKind = "ClusterIP"
	kindNodePort   addrKind = "NodePort"
	kindExternalIP addrKind = "ExternalIP"
	kindLBIngress  addrKind = "LoadBalancer ingress"
)

// owner is a Service port that the destination belongs to.
type owner struct {
	svc  *proxy.ServiceStatus
	port *proxy.PortStatus
	kind addrKind
	lb   *model.LBIngress // kindLBIngress
}

func (o owner) name() string {
	return o.svc.Name.String() + ":" + portLabel(o.port.Port)
}

func portLabel(p model.ServicePort) string {
	if p.Name.Port != "" {
		return p.Name.Port
	}
	return fmt.Sprintf("%d/%s", p.Port, p.Protocol)
}

// explain fills the trace's Service and Reasons (and Notes) from the proxier's status of the
// Service port that owns the destination.
func explain(in *Inputs, req apiv1.TraceRequest, pkt oftrace.Packet, out *apiv1.Trace) {
	dst, dport, proto := req.To.Addr(), req.To.Port(), model.Protocol(req.Protocol)
	owners, samePortless := findOwners(in, dst, dport, proto)
	chosen := out.Chosen != ""
	var ownerSvc types.NamespacedName
	if len(owners) == 0 && !chosen {
		out.Reasons = append(out.Reasons, noOwnerReasons(samePortless, dst, dport, proto)...)
	}
	if len(owners) > 0 {
		ownerSvc = owners[0].svc.Name
		explainOwner(owners[0], req, pkt, out)
	}
	out.Reasons = append(out.Reasons, problemsNaming(in, ownerSvc, dst, dport, proto)...)
}

// explainOwner fills what the owning Service port o says about the trace.
func explainOwner(o owner, req apiv1.TraceRequest, pkt oftrace.Packet, out *apiv1.Trace) {
	chosen := out.Chosen != ""
	out.Service = o.name()
	if o.port.Port.StickyMaxAgeSeconds > 0 {
		out.Notes = append(out.Notes, "sessionAffinity=ClientIP: flows OVS learned for earlier connections are not traced; a client with an affinity entry keeps its endpoint")
	}
	if len(out.Candidates) > 1 {
		out.Notes = append(out.Notes, "chosen is the tracer's pick among the candidates; OVS's own hash may pick another")
	}
	if !chosen {
		out.Reasons = append(out.Reasons, whyNot(o, req, pkt.Src)...)
	}
	if pr := o.svc.Problem; pr != nil {
		out.Reasons = append(out.Reasons, fmt.Sprintf("Service %s has a problem: %s: %s", o.svc.Name, pr.Reason, pr.Message))
	}
}

// findOwners returns the Service ports whose address and port match (sorted by name), and the
// Services that own the address on other ports only.
func findOwners(in *Inputs, dst netip.Addr, dport uint16, proto model.Protocol) ([]owner, []string) {
	var owners []owner
	other := map[string]bool{}
	nodeAddr := slices.Contains(in.NodeAddresses, dst)
	for i := range in.Services {
		svc := &in.Services[i]
		for j := range svc.Ports {
			ps := &svc.Ports[j]
			kind, lb, ok := addressKind(ps.Port, dst, nodeAddr)
			if !ok {
				continue
			}
			port := ps.Port.Port
			if kind == kindNodePort {
				port = ps.Port.NodePort
			}
			if port != dport || ps.Port.Protocol != proto {
				if kind != kindNodePort {
					other[fmt.Sprintf("%s (%s %d/%s)", svc.Name, kind, ps.Port.Port, ps.Port.Protocol)] = true
				}
				continue
			}
			owners = append(owners, owner{svc: svc, port: ps, kind: kind, lb: lb})
		}
	}
	sort.SliceStable(owners, func(i, j int) bool { return owners[i].name() < owners[j].name() })
	names := make([]string, 0, len(other))
	for n := range other {
		names = append(names, n)
	}
	sort.Strings(names)
	return owners, names
}

func addressKind(p model.ServicePort, dst netip.Addr, nodeAddr bool) (addrKind, *model.LBIngress, bool) {
	switch {
	case slices.Contains(p.ClusterIPs, dst):
		return kindClusterIP, nil, true
	case slices.Contains(p.ExternalIPs, dst):
		return kindExternalIP, nil, true
	}
	for i := range p.LoadBalancerIngress {
		if p.LoadBalancerIngress[i].IP == dst {
			return kindLBIngress, &p.LoadBalancerIngress[i], true
		}
	}
	if nodeAddr && p.NodePort != 0 {
		return kindNodePort, nil, true
	}
	return "", nil, false
}

func noOwnerReasons(samePortless []string, dst netip.Addr, dport uint16, proto model.Protocol) []string {
	if len(samePortless) > 0 {
		return []string{fmt.Sprintf("undefined port: %s is served by %s, which defines no port %d/%s: new connections to a ClusterIP on another port are rejected",
			dst, strings.Join(samePortless, ", "), dport, proto)}
	}
	return []string{fmt.Sprintf("no Service programmed on this node serves %s (ClusterIP, NodePort, ExternalIP or LoadBalancer ingress)",
		netip.AddrPortFrom(dst, dport).String()+"/"+string(proto))}
}

// whyNot says why a packet to o's address chose no endpoint.
func whyNot(o owner, req apiv1.TraceRequest, src netip.Addr) []string {
	ps := o.port
	var out []string
	if o.lb != nil && !o.lb.Decision.Program {
		out = append(out, fmt.Sprintf("LoadBalancer ingress %s of %s is not captured by this node (%s): traffic to it goes to the load balancer",
			o.lb.IP, o.svc.Name, o.lb.Decision.Reason))
	}
	external := req.FromKind == apiv1.FromExternal && o.kind != kindClusterIP
	if len(o.port.Port.SourceRanges) > 0 && o.kind == kindLBIngress && !inRanges(o.port.Port.SourceRanges, src) {
		out = append(out, fmt.Sprintf("source range: %s is not in loadBalancerSourceRanges %s of %s: dropped", src, join(o.port.Port.SourceRanges), o.svc.Name))
	}
	switch {
	case ps.GroupID == 0:
		out = append(out, fmt.Sprintf("%s has no endpoint that receives new connections (%d endpoints, %d ready, %d serving): new connections are rejected",
			o.name(), ps.Endpoints.Total, ps.Endpoints.Ready, ps.Endpoints.Serving))
	case external && ps.Port.ExternalPolicyLocal && ps.Endpoints.Local == 0:
		out = append(out, fmt.Sprintf("externalTrafficPolicy=Local and %s has no endpoint on this node (%d elsewhere): external connections to its %s are dropped",
			o.name(), ps.Endpoints.Total, o.kind))
	case req.FromKind != apiv1.FromExternal && ps.Port.InternalPolicyLocal && ps.Endpoints.Local == 0 && o.kind == kindClusterIP:
		out = append(out, fmt.Sprintf("internalTrafficPolicy=Local and %s has no endpoint on this node: connections to its ClusterIP are dropped", o.name()))
	}
	if len(out) == 0 {
		out = append(out, fmt.Sprintf("the trace reached no endpoint of %s (%s); see the steps", o.name(), o.kind))
	}
	return out
}

func inRanges(ranges []netip.Prefix, ip netip.Addr) bool {
	for _, r := range ranges {
		if r.Contains(ip) {
			return true
		}
	}
	return false
}

// problemsNaming returns the problems of Services other than owner whose message names the
// destination: its address, or its NodePort when it is a node address. An address refused or
// lost to another Service (AddressRefused, FlowConflict) is in none of the programmed ports.
func problemsNaming(in *Inputs, owner types.NamespacedName, dst netip.Addr, dport uint16, proto model.Protocol) []string {
	nodePort := ""
	if slices.Contains(in.NodeAddresses, dst) {
		nodePort = fmt.Sprintf("NodePort %d/%s ", dport, proto)
	}
	var out []string
	for _, s := range in.Services {
		if s.Problem == nil || s.Name == owner {
			continue
		}
		if msg := s.Problem.Message; mentions(msg, dst.String()) || (nodePort != "" && strings.Contains(msg, nodePort)) {
			out = append(out, fmt.Sprintf("Service %s has a problem: %s: %s", s.Name, s.Problem.Reason, msg))
		}
	}
	sort.Strings(out)
	return out
}

// mentions reports whether msg holds ip as a whole address (not 10.0.0.1 in 10.0.0.10).
func mentions(msg, ip string) bool {
	for i := 0; ; {
		j := strings.Index(msg[i:], ip)
		if j < 0 {
			return false
		}
		end := i + j + len(ip)
		if end == len(msg) || !strings.ContainsRune("0123456789abcdefABCDEF.:", rune(msg[end])) || (msg[end] == ':' && !strings.Contains(ip, ":")) {
			return true
		}
		i = end
	}
}
