package pipeline

import (
	"slices"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
)

// endpointSets are the endpoints of one Service port in one family that receive new connections.
type endpointSets struct {
	// cluster serves externalTrafficPolicy=Cluster and internalTrafficPolicy=Cluster traffic,
	// after topology-aware filtering.
	cluster []model.Endpoint
	// local serves the Local traffic policies: endpoints on this node only.
	local []model.Endpoint
}

// categorize picks, for one family, the cluster and local endpoint sets.
func categorize(all []model.Endpoint, ipv6 bool, nodeName, zone string) endpointSets {
	fam := keepEndpoints(all, func(ep *model.Endpoint) bool { return ep.IP.IsValid() && ep.IP.Is6() == ipv6 && ep.Port != 0 })
	var local []model.Endpoint
	for _, ep := range fam {
		if ep.Local {
			local = append(local, ep)
		}
	}
	var cluster []model.Endpoint
	if ready, eps := usable(fam); ready {
		cluster = topologyFilter(eps, nodeName, zone)
	} else {
		// The fallback to terminating endpoints is a best effort not to drop connections:
		// like kube-proxy, it ignores topology hints.
		cluster = eps
	}
	_, localEps := usable(local)
	return endpointSets{cluster: cluster, local: localEps}
}

// keepEndpoints returns the endpoints of eps that keep accepts: eps itself when it accepts them
// all (the usual case, no copy; callers never modify the result), else a new slice.
func keepEndpoints(eps []model.Endpoint, keep func(*model.Endpoint) bool) []model.Endpoint {
	for i := range eps {
		if keep(&eps[i]) {
			continue
		}
		out := make([]model.Endpoint, 0, len(eps)-1)
		out = append(out, eps[:i]...)
		for j := i + 1; j < len(eps); j++ {
			if keep(&eps[j]) {
				out = append(out, eps[j])
			}
		}
		return out
	}
	return eps
}

// usable returns the ready endpoints (ready true) or, when none is ready, those that are
// serving and terminating (KEP-1669), so that connections are not refused while a rollout
// drains.
func usable(eps []model.Endpoint) (ready bool, out []model.Endpoint) {
	if !slices.ContainsFunc(eps, func(ep model.Endpoint) bool { return !ep.Ready }) {
		return len(eps) > 0, eps // all ready (the usual case): no copy
	}
	var readyEps, terminating []model.Endpoint
	for _, ep := range eps {
		switch {
		case ep.Ready:
			readyEps = append(readyEps, ep)
		case ep.Serving && ep.Terminating:
			terminating = append(terminating, ep)
		}
	}
	if len(readyEps) > 0 {
		return true, readyEps
	}
	return false, terminating
}

// topologyFilter applies EndpointSlice hints with kube-proxy's all-or-nothing rule: hints are
// used only when every endpoint carries them and at least one is meant for this node (node
// hints, from trafficDistribution PreferSameNode) or this node's zone (zone hints, from
// PreferSameZone or topology-aware routing). Otherwise every endpoint is used.
func topologyFilter(eps []model.Endpoint, nodeName, zone string) []model.Endpoint {
	if out := filterByHint(eps, nodeName, func(ep model.Endpoint) []string { return ep.NodeHints }); out != nil {
		return out
	}
	if out := filterByHint(eps, zone, func(ep model.Endpoint) []string { return ep.ZoneHints }); out != nil {
		return out
	}
	return eps
}

func filterByHint(eps []model.Endpoint, want string, hints func(model.Endpoint) []string) []model.Endpoint {
	if want == "" || len(eps) == 0 {
		return nil
	}
	var out []model.Endpoint
	for _, ep := range eps {
		h := hints(ep)
		if len(h) == 0 {
			return nil // one endpoint without hints disables them all
		}
		if slices.Contains(h, want) {
			out = append(out, ep)
		}
	}
	return out
}
