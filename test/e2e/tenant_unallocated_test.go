//go:build e2e

package e2e

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// unallocatedIP is an address of the sandbox's ServiceCIDR (10.96.0.0/16) that no Service
// holds in TestTenantUnallocatedClusterIP (the test checks).
var unallocatedIP = netip.MustParseAddr("10.96.250.250")

// TestTenantUnallocatedClusterIP: a new TCP connection from a pod and from a node's host to an
// address of the ServiceCIDR that no Service holds gets no answer and does not leave the node,
// as kube-proxy (nftables) drops it. The router, the nodes' default gateway, owns the address
// and answers on it, so a connection that left the node would be answered (and counted).
func TestTenantUnallocatedClusterIP(t *testing.T) {
	sb := framework.StartSandbox(t, framework.SandboxOptions{Agent: framework.AgentOptions{ProxyLoadBalancerIPs: true}})
	ctx := context.Background()
	const ns = "tenant-unalloc"
	require.NoError(t, sb.CreateNamespace(ctx, ns))
	n1 := sb.Nodes[0]
	pods, err := sb.RunPods(ctx,
		framework.EchoPod(ns, "web-1", n1, map[string]string{"app": "web"}),
		framework.EchoPod(ns, "client-1", n1, map[string]string{"app": "client"}),
	)
	require.NoError(t, err)
	clientNS, err := sb.PodNetNS(pods[1])
	require.NoError(t, err)
	// One allocated ClusterIP, served, so that the agents hold a ServiceCIDR's worth of state.
	web := createService(t, sb, tcpService(ns, "web", "web", corev1.ServiceTypeClusterIP, 80))
	require.NoError(t, sb.WaitEndpoints(ctx, ns, "web", pods[0].Status.PodIP))

	holder, err := sb.ServiceHolding(ctx, unallocatedIP)
	require.NoError(t, err)
	require.Empty(t, holder, "%s must be unallocated", unallocatedIP)
	require.NoError(t, sb.Net.AddRouterAddress(unallocatedIP))
	trap, err := framework.ServeEcho(sb.Net.Router, "router", hostPort(unallocatedIP.String(), 80))
	require.NoError(t, err)
	t.Cleanup(func() { _ = trap.Close() })
	addr := hostPort(unallocatedIP.String(), 80)
	require.Equal(t, answeredOutcome("router"), outcome(sb.Net.Router, addr), "the router answers on the unallocated address itself")

	clients := hostAndPod(n1, clientNS)
	for _, c := range clients {
		waitOutcome(t, c.ns, hostPort(web.Spec.ClusterIP, 80), answeredOutcome("web-1"), "the allocated ClusterIP is served to the "+c.what, time.Minute)
	}
	for _, c := range clients {
		t.Run(c.what, func(t *testing.T) {
			before := trap.Accepted()
			var got []string
			for i := 0; i < 3; i++ {
				got = append(got, outcome(c.ns, addr))
			}
			require.Equal(t, before, trap.Accepted(), "new TCP connections from the %s to %s, an unallocated address of the ServiceCIDR, must not leave the node, but the router accepted them; outcomes %q", c.what, addr, got)
			require.Equal(t, []string{"dropped", "dropped", "dropped"}, got, "new TCP connections from the %s to %s, an unallocated address of the ServiceCIDR, must get no answer", c.what, addr)
		})
	}
}
