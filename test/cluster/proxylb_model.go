//go:build cluster

package cluster

import (
	"net/netip"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// What the external load balancer (ProxyLB) serves, computed from the API objects alone, as a
// cloud's LoadBalancer controller computes it: one frontend per ingress address, port and
// protocol of a Service whose address the Proxy pool holds, relaying to every eligible node's
// NodePort (or, for a Service without NodePorts, to its ready endpoints, as a cloud load balancer
// with IP targets does).

// frontendKey is one address:port/protocol the load balancer serves.
type frontendKey struct {
	Addr  netip.AddrPort
	Proto corev1.Protocol
}

func (k frontendKey) String() string { return k.Addr.String() + "/" + string(k.Proto) }

// frontendConfig is where a frontend relays to and whom it admits.
type frontendConfig struct {
	// Service is namespace/name, for the log.
	Service string
	// Targets are "ip:port", sorted; empty refuses every connection.
	Targets []string
	// Affinity is ClientIP session affinity: one client address, one target.
	Affinity bool
	// SourceRanges admit only these client addresses; empty admits every one.
	SourceRanges []netip.Prefix
}

// equal reports whether two configs relay the same way.
func (c frontendConfig) equal(o frontendConfig) bool {
	if c.Service != o.Service || c.Affinity != o.Affinity || len(c.Targets) != len(o.Targets) || len(c.SourceRanges) != len(o.SourceRanges) {
		return false
	}
	for i := range c.Targets {
		if c.Targets[i] != o.Targets[i] {
			return false
		}
	}
	for i := range c.SourceRanges {
		if c.SourceRanges[i] != o.SourceRanges[i] {
			return false
		}
	}
	return true
}

// admits reports whether a client address may use the frontend.
func (c frontendConfig) admits(client netip.Addr) bool {
	if len(c.SourceRanges) == 0 {
		return true
	}
	for _, p := range c.SourceRanges {
		if p.Contains(client.Unmap()) {
			return true
		}
	}
	return false
}

// healthKey is one health check: a node's address and a Service's healthCheckNodePort.
type healthKey struct {
	Node netip.Addr
	Port int32
}

// lbInputs is everything the load balancer's configuration follows.
type lbInputs struct {
	Pool     netip.Prefix
	Services []*corev1.Service
	Nodes    []*corev1.Node
	Slices   []*discoveryv1.EndpointSlice
	// Healthy holds the last result of every health check (healthChecks lists them).
	Healthy map[healthKey]bool
}

// excludeLabel keeps a node out of every external load balancer (the cloud service controller's
// well-known label).
const excludeLabel = "node.kubernetes.io/exclude-from-external-load-balancers"

// sourceRangesAnnotation is the older way to give loadBalancerSourceRanges.
const sourceRangesAnnotation = "service.beta.kubernetes.io/load-balancer-source-ranges"

// eligibleNodes are the InternalIPs of the Ready nodes without excludeLabel, sorted.
func eligibleNodes(nodes []*corev1.Node) []netip.Addr {
	var out []netip.Addr
	for _, n := range nodes {
		if _, excluded := n.Labels[excludeLabel]; excluded || !nodeReady(n) {
			continue
		}
		for _, a := range n.Status.Addresses {
			if ip, err := netip.ParseAddr(a.Address); a.Type == corev1.NodeInternalIP && err == nil {
				out = append(out, ip)
				break
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Less(out[j]) })
	return out
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// proxyIngresses are the Service's ingress addresses that the pool holds with ipMode Proxy.
func proxyIngresses(svc *corev1.Service, pool netip.Prefix) []netip.Addr {
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return nil
	}
	var out []netip.Addr
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		ip, err := netip.ParseAddr(ing.IP)
		if err != nil || !pool.Contains(ip) || ing.IPMode == nil || *ing.IPMode != corev1.LoadBalancerIPModeProxy {
			continue
		}
		out = append(out, ip)
	}
	return out
}

// localPolicy reports externalTrafficPolicy: Local with a health check port, the Services whose
// nodes a cloud load balancer health-checks.
func localPolicy(svc *corev1.Service) bool {
	return svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal && svc.Spec.HealthCheckNodePort != 0
}

// healthChecks are the checks the inputs need: every eligible node on the healthCheckNodePort of
// every served Service with externalTrafficPolicy: Local.
func healthChecks(in lbInputs) []healthKey {
	seen := map[healthKey]bool{}
	var out []healthKey
	nodes := eligibleNodes(in.Nodes)
	for _, svc := range in.Services {
		if !localPolicy(svc) || len(proxyIngresses(svc, in.Pool)) == 0 {
			continue
		}
		for _, n := range nodes {
			k := healthKey{Node: n, Port: svc.Spec.HealthCheckNodePort}
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	return out
}

// desiredFrontends is the load balancer's whole configuration for the inputs.
func desiredFrontends(in lbInputs) map[frontendKey]frontendConfig {
	out := map[frontendKey]frontendConfig{}
	nodes := eligibleNodes(in.Nodes)
	for _, svc := range in.Services {
		ips := proxyIngresses(svc, in.Pool)
		if len(ips) == 0 {
			continue
		}
		targetNodes := nodes
		if localPolicy(svc) {
			targetNodes = healthyNodes(nodes, svc.Spec.HealthCheckNodePort, in.Healthy)
		}
		base := frontendConfig{
			Service:      svc.Namespace + "/" + svc.Name,
			Affinity:     svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP,
			SourceRanges: sourceRanges(svc),
		}
		for _, port := range svc.Spec.Ports {
			if port.Protocol != corev1.ProtocolTCP && port.Protocol != corev1.ProtocolUDP {
				continue
			}
			cfg := base
			if port.NodePort != 0 {
				for _, n := range targetNodes {
					cfg.Targets = append(cfg.Targets, netip.AddrPortFrom(n, uint16(port.NodePort)).String())
				}
			} else {
				cfg.Targets = endpointTargets(svc, port, in.Slices)
			}
			for _, ip := range ips {
				out[frontendKey{Addr: netip.AddrPortFrom(ip, uint16(port.Port)), Proto: port.Protocol}] = cfg
			}
		}
	}
	return out
}

// healthyNodes are the nodes whose health check passes; when none passes, every node, as cloud
// load balancers fail open rather than drop all traffic.
func healthyNodes(nodes []netip.Addr, port int32, healthy map[healthKey]bool) []netip.Addr {
	var out []netip.Addr
	for _, n := range nodes {
		if healthy[healthKey{Node: n, Port: port}] {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nodes
	}
	return out
}

// sourceRanges are the Service's loadBalancerSourceRanges (or the older annotation), sorted;
// entries that do not parse are left out.
func sourceRanges(svc *corev1.Service) []netip.Prefix {
	ranges := svc.Spec.LoadBalancerSourceRanges
	if len(ranges) == 0 && svc.Annotations[sourceRangesAnnotation] != "" {
		ranges = strings.Split(svc.Annotations[sourceRangesAnnotation], ",")
	}
	var out []netip.Prefix
	for _, r := range ranges {
		if p, err := netip.ParsePrefix(strings.TrimSpace(r)); err == nil {
			out = append(out, p.Masked())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// endpointTargets are the ready endpoints of a Service port, "ip:port", sorted.
func endpointTargets(svc *corev1.Service, port corev1.ServicePort, slices []*discoveryv1.EndpointSlice) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range slices {
		if s.Namespace != svc.Namespace || s.Labels[discoveryv1.LabelServiceName] != svc.Name || s.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		for _, p := range s.Ports {
			if p.Port == nil || (p.Name != nil && *p.Name != port.Name) || (p.Name == nil && port.Name != "") ||
				(p.Protocol != nil && *p.Protocol != port.Protocol) {
				continue
			}
			for _, ep := range s.Endpoints {
				if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
					continue
				}
				for _, a := range ep.Addresses {
					t := a + ":" + strconv.Itoa(int(*p.Port))
					if !seen[t] {
						seen[t] = true
						out = append(out, t)
					}
				}
			}
		}
	}
	sort.Strings(out)
	return out
}
