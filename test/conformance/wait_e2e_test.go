//go:build e2e

package conformance

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// waitProgrammed waits until every node of the world shows every shape as programmed.
func (w *world) waitProgrammed(ctx context.Context, shapes []Shape) error {
	what := fmt.Sprintf("every %s node to program the %d shapes", w.kind, len(shapes))
	return framework.Poll(ctx, 3*time.Minute, what, func(ctx context.Context) (bool, string, error) {
		for _, n := range w.sb.Nodes {
			var ok bool
			var why string
			if n.Proxy == framework.ProxyKubeProxy {
				ok, why = kubeProxyProgrammed(ctx, n, shapes)
			} else {
				ok, why = antreaProgrammed(ctx, n, shapes)
			}
			if !ok {
				return false, n.Name + ": " + why, nil
			}
		}
		return true, "", nil
	})
}

// antreaProgrammed: the agent's servicemap has every port of every shape with all its
// endpoints and its ingress.
func antreaProgrammed(ctx context.Context, n *framework.Node, shapes []Shape) (bool, string) {
	m, err := n.API.ServiceMap(ctx, testNamespace, "")
	if err != nil {
		return false, err.Error()
	}
	type key struct{ svc, port string }
	rows := map[key]int{}
	ingress := map[key]bool{}
	for _, it := range m.Items {
		k := key{it.Name, it.PortName}
		rows[k] = it.Endpoints.Total
		ingress[k] = len(it.LoadBalancerIngress) > 0
	}
	for _, s := range shapes {
		for _, p := range s.Ports {
			k := key{s.Name, p.Name}
			total, ok := rows[k]
			switch {
			case !ok:
				return false, fmt.Sprintf("%s/%s is not in the servicemap", s.Name, p.Name)
			case total != len(s.Endpoints):
				return false, fmt.Sprintf("%s/%s has %d endpoints, want %d", s.Name, p.Name, total, len(s.Endpoints))
			case s.Type == "LoadBalancer" && !ingress[k]:
				return false, fmt.Sprintf("%s/%s has no ingress yet", s.Name, p.Name)
			}
		}
	}
	return true, ""
}

// kubeProxyProgrammed: kube-proxy's ruleset has every shape's addresses and NodePorts, and its
// last sync is not older than the last change it queued.
func kubeProxyProgrammed(ctx context.Context, n *framework.Node, shapes []Shape) (bool, string) {
	rules, err := n.KubeProxyRuleset()
	if err != nil {
		return false, err.Error()
	}
	for _, s := range shapes {
		want := []string{s.ClusterIP.String()}
		if s.ExternalIP.IsValid() {
			want = append(want, s.ExternalIP.String())
		}
		if s.Type == "LoadBalancer" && s.LBMode == LBVIP {
			want = append(want, s.LBIP.String())
		}
		for _, p := range s.Ports {
			if p.NodePort != 0 {
				want = append(want, strconv.Itoa(int(p.NodePort)))
			}
		}
		for _, w := range want {
			if !containsToken(rules, w) {
				return false, fmt.Sprintf("%s: %s is not in the ruleset", s.Name, w)
			}
		}
	}
	synced, queued, err := n.KubeProxySyncs(ctx)
	if err != nil {
		return false, err.Error()
	}
	if synced < queued {
		return false, fmt.Sprintf("last sync %.3f is before the last queued change %.3f", synced, queued)
	}
	return true, ""
}
