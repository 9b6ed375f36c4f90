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
	// live reports whether a node renews its announcer Lease; nil means every node does.
	live func(node string) bool
}

// eligible returns, sorted, the nodes that may announce an address of
// pool for services, the Services sharing it, all together: among the
// Ready nodes that renew their announcer Lease (when the controller uses
// them), match the pool's node selector and are not labelled
// node.kubernetes.io/exclude-from-external-load-balancers, those that run
// a ready endpoint of the most sharers with externalTrafficPolicy=Local.
// A node must run one of at least one of them unless a sharer has
// externalTrafficPolicy=Cluster (any node serves it). So one sharer
// without local endpoints never withdraws the address of the others.
// Among those, nodes that are not draining (cordoned, or tainted for
// deletion by the cluster autoscaler) come first: a draining node keeps
// an address only when no other node can take it.
func (p nodePicker) eligible(pool *ipam.Pool, services []*v1.Service) ([]string, error) {
	nodes, err := p.nodes.List(pool.NodeSelector)
	if err != nil {
		return nil, err
	}
	score := map[string]int{}
	drain := map[string]bool{}
	for _, n := range nodes {
		if _, excluded := n.Labels[v1.LabelNodeExcludeBalancers]; excluded || !nodeReady(n) {
			continue
		}
		if p.live != nil && !p.live(n.Name) {
			continue
		}
		score[n.Name] = 0
		drain[n.Name] = draining(n)
	}
	anyCluster := false
	for _, svc := range services {
		if svc.Spec.ExternalTrafficPolicy != v1.ServiceExternalTrafficPolicyLocal {
			anyCluster = true
			continue
		}
		local, err := p.endpointNodes(svc)
		if err != nil {
			return nil, err
		}
		for n := range local {
			if _, ok := score[n]; ok {
				score[n]++
			}
		}
	}
	best := 0
	for _, s := range score {
		best = max(best, s)
	}
	if best == 0 && !anyCluster {
		return nil, nil
	}
	var out, staying []string
	for n, s := range score {
		if s == best {
			out = append(out, n)
			if !drain[n] {
				staying = append(staying, n)
			}
		}
	}
	if len(staying) > 0 {
		out = staying
	}
	slices.Sort(out)
	return out, nil
}

// TaintToBeDeleted is the taint the cluster autoscaler puts on a node it is about to delete
// (kube-proxy's KEP-3836 health check fails on it too).
const TaintToBeDeleted = "ToBeDeletedByClusterAutoscaler"

// draining reports whether a node is on its way out: cordoned (kubectl drain starts with
// it) or tainted for deletion by the cluster autoscaler.
func draining(n *v1.Node) bool {
	if n.Spec.Unschedulable {
		return true
	}
	for _, t := range n.Spec.Taints {
		if t.Key == TaintToBeDeleted {
			return true
		}
	}
	return false
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
