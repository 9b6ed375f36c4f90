package loadbalancer

import (
	"hash/fnv"
	"net/netip"
	"slices"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"

	"github.com/antrea-proxy/antrea-proxy/pkg/loadbalancer/ipam"
)

// nodePicker chooses the node that announces a VIP-mode address.
type nodePicker struct {
	nodes  corelisters.NodeLister
	slices discoverylisters.EndpointSliceLister
}

// eligible returns, sorted, the nodes that may announce an address of
// pool for all of services (the Services sharing it): Ready nodes that
// match the pool's node selector and are not labelled
// node.kubernetes.io/exclude-from-external-load-balancers, and, for every
// Service with externalTrafficPolicy=Local, that run a ready endpoint of it.
func (p nodePicker) eligible(pool *ipam.Pool, services []*v1.Service) ([]string, error) {
	nodes, err := p.nodes.List(pool.NodeSelector)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range nodes {
		if _, excluded := n.Labels[v1.LabelNodeExcludeBalancers]; excluded || !nodeReady(n) {
			continue
		}
		out = append(out, n.Name)
	}
	for _, svc := range services {
		if svc.Spec.ExternalTrafficPolicy != v1.ServiceExternalTrafficPolicyLocal {
			continue
		}
		local, err := p.endpointNodes(svc)
		if err != nil {
			return nil, err
		}
		out = slices.DeleteFunc(out, func(n string) bool { _, ok := local[n]; return !ok })
	}
	slices.Sort(out)
	return out, nil
}

// endpointNodes returns the nodes that run a ready endpoint of svc.
func (p nodePicker) endpointNodes(svc *v1.Service) (map[string]struct{}, error) {
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: svc.Name})
	eps, err := p.slices.EndpointSlices(svc.Namespace).List(sel)
	if err != nil {
		return nil, err
	}
	out := map[string]struct{}{}
	for _, es := range eps {
		for _, ep := range es.Endpoints {
			if ep.NodeName == nil || (ep.Conditions.Ready != nil && !*ep.Conditions.Ready) {
				continue
			}
			out[*ep.NodeName] = struct{}{}
		}
	}
	return out, nil
}

// choose keeps current when it is still eligible (an address moves only
// when it must), else spreads addresses over the eligible nodes by a hash
// of the address. It returns "" when no node is eligible.
func choose(addr netip.Addr, eligible []string, current string) string {
	if len(eligible) == 0 {
		return ""
	}
	if slices.Contains(eligible, current) {
		return current
	}
	h := fnv.New32a()
	_, _ = h.Write(addr.AsSlice())
	return eligible[h.Sum32()%uint32(len(eligible))]
}

func nodeReady(n *v1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}
