//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver/apiv1"
	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// Helpers of the Service semantics tests (TestSemantics*): waits on each node's servicemap, counting
// who answers, and telling a dropped connection from a refused one.

// serviceVirtualIP is the address the agents SNAT external connections to (eTP=Cluster) before
// they reach a local endpoint: nodeNetwork.serviceVirtualIP's default.
const serviceVirtualIP = "169.254.0.253"

// dropWait is how long a connection that should be dropped is given to get an answer.
const dropWait = 1500 * time.Millisecond

// nodeCond judges one node's servicemap rows of a Service.
type nodeCond func(n *framework.Node, rows []apiv1.ServicePort) (bool, string)

// waitEachNode waits until cond holds on every node for the Service's rows.
func waitEachNode(t *testing.T, sb *framework.Sandbox, namespace, name, what string, cond nodeCond) {
	t.Helper()
	framework.WaitFor(t, time.Minute, fmt.Sprintf("every agent to program Service %s/%s %s", namespace, name, what),
		func(ctx context.Context) (bool, string, error) {
			for _, n := range sb.Nodes {
				m, err := n.API.ServiceMap(ctx, namespace, name)
				if err != nil {
					return false, n.Name + ": " + err.Error(), nil
				}
				var rows []apiv1.ServicePort
				for _, r := range m.Items {
					if r.Name == name {
						rows = append(rows, r)
					}
				}
				if len(rows) == 0 {
					return false, n.Name + ": not in the servicemap", nil
				}
				if ok, why := cond(n, rows); !ok {
					return false, n.Name + ": " + why, nil
				}
			}
			return true, "", nil
		})
}

// everyRow is a nodeCond that holds when check holds for each row.
func everyRow(check func(n *framework.Node, r apiv1.ServicePort) (bool, string)) nodeCond {
	return func(n *framework.Node, rows []apiv1.ServicePort) (bool, string) {
		for _, r := range rows {
			if ok, why := check(n, r); !ok {
				return false, fmt.Sprintf("port %s: %s", r.PortName, why)
			}
		}
		return true, ""
	}
}

// createService creates svc and returns it as the API server filled it in.
func createService(t *testing.T, sb *framework.Sandbox, svc *corev1.Service) *corev1.Service {
	t.Helper()
	got, err := sb.CP.Client.CoreV1().Services(svc.Namespace).Create(context.Background(), svc, metav1.CreateOptions{})
	require.NoError(t, err, "creating Service %s/%s", svc.Namespace, svc.Name)
	return got
}

// countEchoes sends n echoes from ns to addr over proto, each of which must be answered, and counts
// the answers by server; seen gets every client address the servers reported.
func countEchoes(t *testing.T, ns *framework.NetNS, proto, addr string, n int) (byServer map[string]int, seen map[string]bool) {
	t.Helper()
	byServer, seen = map[string]int{}, map[string]bool{}
	for i := 0; i < n; i++ {
		r, err := ns.Echo(context.Background(), proto, addr, dialTimeout)
		require.NoError(t, err, "%s echo %d of %d to %s", proto, i+1, n, addr)
		byServer[r.Server]++
		seen[r.ClientIP()] = true
	}
	return byServer, seen
}

// requireDropped checks that proto echoes from ns to addr get no answer at all: not a reply, nor
// a reset or an ICMP error (which would mean rejected, not dropped).
func requireDropped(t *testing.T, ns *framework.NetNS, proto, addr, what string) {
	t.Helper()
	for i := 0; i < 2; i++ {
		start := time.Now()
		r, err := ns.Echo(context.Background(), proto, addr, dropWait)
		require.Error(t, err, "%s: %s echo to %s must be dropped, but %s answered", what, proto, addr, r)
		require.True(t, isTimeout(err), "%s: %s echo to %s must be dropped silently (a timeout), got after %v: %v",
			what, proto, addr, time.Since(start).Round(time.Millisecond), err)
	}
}

// isTimeout reports whether err is a deadline that passed without an answer.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// serverNames lists a count map's keys, for messages.
func serverNames(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
