//go:build e2e

package e2e

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/antrea-proxy/antrea-proxy/pkg/config"
	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// refusedValidIP is the claimer's valid externalIP in TestTenantRefusedAddress: an unused
// address of the IPv6 underlay, which only the agents' capture of the Service makes answer.
var refusedValidIP = netip.MustParseAddr("fd00:77::240")

// TestTenantRefusedAddress: a Service cannot claim one of the agent's own virtual addresses.
// The claimer lists the IPv6 NodePort virtual IP (the address the host DNATs NodePort traffic
// to on its way into OVS; the IPv4 one is link-local, which the API server rejects) as an
// externalIP, on the port number of another Service's NodePort, next to a valid externalIP.
// The virtual address is not programmed: the claimer's servicemap rows show AddressRefused, the
// nodes' NodePort traffic is still the NodePort Service's, and the node's own connections to
// the virtual address end as they did before the claim; the valid externalIP is served.
func TestTenantRefusedAddress(t *testing.T) {
	sb := framework.StartSandbox(t, framework.SandboxOptions{DualStack: true, Agent: framework.AgentOptions{ProxyLoadBalancerIPs: true}})
	ctx := context.Background()
	const ns = "tenant-refused"
	require.NoError(t, sb.CreateNamespace(ctx, ns))
	n1, n2 := sb.Nodes[0], sb.Nodes[1]
	pods, err := sb.RunPods(ctx,
		framework.EchoPod(ns, "np-1", n1, map[string]string{"app": "np"}),
		framework.EchoPod(ns, "claimer-1", n2, map[string]string{"app": "claimer"}),
		framework.EchoPod(ns, "client-1", n1, map[string]string{"app": "client"}),
	)
	require.NoError(t, err)
	clientNS, err := sb.PodNetNS(pods[2])
	require.NoError(t, err)

	np := createService(t, sb, dualStack(tcpService(ns, "nodeport", "np", corev1.ServiceTypeNodePort, 80)))
	require.NoError(t, sb.WaitEndpoints(ctx, ns, "nodeport", podIPOf(t, pods[0], false), podIPOf(t, pods[0], true)))
	port := nodePortOf(t, np, "tcp")
	for _, n := range sb.Nodes {
		waitOutcome(t, n.NS, hostPort(n.IP6.String(), port), answeredOutcome("np-1"), n.Name+"'s own IPv6 NodePort is served", time.Minute)
	}

	virtual := netip.MustParseAddr(config.DefaultNodePortVirtualIPv6)
	virtualAddr := hostPort(virtual.String(), port)
	probes := hostAndPod(n1, clientNS)
	before := map[string]string{}
	for _, p := range probes {
		before[p.what] = outcome(p.ns, virtualAddr)
		t.Logf("before the claim, the %s connecting to %s: %s", p.what, virtualAddr, before[p.what])
	}

	claim := dualStack(tcpService(ns, "claimer", "claimer", corev1.ServiceTypeClusterIP, int32(port)))
	claim.Spec.ExternalIPs = []string{virtual.String(), refusedValidIP.String()}
	createService(t, sb, claim)
	require.NoError(t, sb.WaitEndpoints(ctx, ns, "claimer", podIPOf(t, pods[1], false), podIPOf(t, pods[1], true)))
	require.NoError(t, sb.WaitProgrammed(ctx, ns, "claimer", "with its endpoint", framework.HasEndpoints(1)))

	t.Run("ValidExternalIPServed", func(t *testing.T) {
		for _, p := range probes {
			waitOutcome(t, p.ns, hostPort(refusedValidIP.String(), port), answeredOutcome("claimer-1"),
				"the claimer's valid externalIP is served to the "+p.what, time.Minute)
		}
	})
	t.Run("NodePortUnchanged", func(t *testing.T) {
		for _, n := range []*framework.Node{n1, n2} {
			requireAnsweredBy(t, n.NS, hostPort(n.IP6.String(), port), 6, map[string]bool{"np-1": true},
				"a Service claiming the NodePort virtual IP does not take "+n.Name+"'s IPv6 NodePort")
		}
		requireAnsweredBy(t, clientNS, hostPort(n2.IP6.String(), port), 6, map[string]bool{"np-1": true},
			"a Service claiming the NodePort virtual IP does not take node2's IPv6 NodePort from a pod")
	})
	t.Run("VirtualAddressUnchanged", func(t *testing.T) {
		for _, p := range probes {
			for i := 0; i < 3; i++ {
				require.Equal(t, before[p.what], outcome(p.ns, virtualAddr),
					"the %s's connections to the agent's virtual address %s end as before the claim", p.what, virtualAddr)
			}
		}
	})
	t.Run("ProblemShown", func(t *testing.T) {
		require.NoError(t, sb.WaitProgrammedWithin(ctx, 10*time.Second, ns, "claimer", "with the refused address", framework.HasProblem(reasonAddressRefused)),
			"the refused address must show in the claimer's servicemap rows")
	})
}
