//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/config"
	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// flowRestoreSlack is how long after antreaProxy.flowRestoreTimeout flow-restore-wait may
// still be set (the agent polls every 100 ms; OVSDB and the test's own polling take the rest).
const flowRestoreSlack = 15 * time.Second

// TestFlowRestoreWaitNeverStrandsNode: an agent whose proxier cannot sync (its EndpointSlice
// informer is forbidden, so its caches never fill) starts after ovs-vswitchd restarted with
// flow-restore-wait=true. The node forwards nothing until the agent clears it; it does so once
// the gateway and pod flows are in and antreaProxy.flowRestoreTimeout (30 s) has passed,
// without a sync of the Services, and pod-to-pod traffic through the node flows again. With the
// proxier healthy again, a restart clears flow-restore-wait only after the Services are in.
func TestFlowRestoreWaitNeverStrandsNode(t *testing.T) {
	sb := framework.StartSandbox(t, framework.SandboxOptions{})
	ctx := context.Background()
	const ns = "flowrestore"
	require.NoError(t, sb.CreateNamespace(ctx, ns))
	n1, n2 := sb.Nodes[0], sb.Nodes[1]
	pods, err := sb.RunPods(ctx,
		framework.EchoPod(ns, "server-1", n1, map[string]string{"app": "server"}),
		framework.EchoPod(ns, "client-2", n2, map[string]string{"app": "client"}),
	)
	require.NoError(t, err)
	clientNS, err := sb.PodNetNS(pods[1])
	require.NoError(t, err)
	server := hostPort(podIPOf(t, pods[0], false), framework.EchoPort)
	waitOutcome(t, clientNS, server, answeredOutcome("server-1"), "pod-to-pod traffic before the restart", time.Minute)
	t.Cleanup(func() {
		if err := sb.SetAgentEndpointSliceAccess(context.Background(), true); err != nil {
			t.Errorf("restoring the agent's access to EndpointSlices: %v", err)
		}
	})

	t.Run("ProxierCannotSync", func(t *testing.T) {
		require.NoError(t, sb.SetAgentEndpointSliceAccess(ctx, false))
		n1.KillAgent(t)
		_, err := n1.RestartVSwitchd(t)
		require.NoError(t, err)
		on, err := n1.FlowRestoreWait()
		require.NoError(t, err)
		require.True(t, on, "ovs-vswitchd restarts with flow-restore-wait=true")
		require.NotEqual(t, answeredOutcome("server-1"), outcome(clientNS, server), "node1 forwards nothing before the agent restores its flows")

		start := time.Now()
		require.NoError(t, n1.StartAgentUnsynced(time.Minute))
		cleared := waitFlowRestoreCleared(t, n1, config.DefaultFlowRestoreTimeout+flowRestoreSlack)
		t.Logf("flow-restore-wait cleared %v after the agent started, its proxier never having synced", cleared.Sub(start).Round(time.Millisecond))
		info, err := n1.API.AgentInfo(ctx)
		require.NoError(t, err)
		require.Zero(t, info.Sync.Syncs, "the proxier must not have synced (the test keeps it from it)")
		tries := waitOutcome(t, clientNS, server, answeredOutcome("server-1"), "pod-to-pod traffic through node1 with its proxier stuck", 10*time.Second)
		t.Logf("pod-to-pod traffic through node1 answered after %d connections, %v after the agent started", tries, time.Since(start).Round(time.Millisecond))
	})

	t.Run("HealthyStartWaitsForServices", func(t *testing.T) {
		require.NoError(t, sb.SetAgentEndpointSliceAccess(ctx, true))
		n1.KillAgent(t)
		_, err := n1.RestartVSwitchd(t)
		require.NoError(t, err)
		start := time.Now()
		require.NoError(t, n1.StartAgentUnsynced(time.Minute))
		cleared := waitFlowRestoreCleared(t, n1, config.DefaultFlowRestoreTimeout)
		// The gate clears flow-restore-wait only after the first sync, and syncs only grow.
		info, err := n1.API.AgentInfo(ctx)
		require.NoError(t, err)
		require.Positive(t, info.Sync.Syncs, "flow-restore-wait was cleared before the Services were in")
		t.Logf("flow-restore-wait cleared %v after the agent started, after its first sync", cleared.Sub(start).Round(time.Millisecond))
		waitOutcome(t, clientNS, server, answeredOutcome("server-1"), "pod-to-pod traffic after a healthy restart", 10*time.Second)
	})
}

// waitFlowRestoreCleared polls n's flow-restore-wait until it is clear, at most timeout, and
// returns when it saw it clear.
func waitFlowRestoreCleared(t *testing.T, n *framework.Node, timeout time.Duration) time.Time {
	t.Helper()
	var at time.Time
	framework.WaitFor(t, timeout, n.Name+"'s agent to clear flow-restore-wait", func(context.Context) (bool, string, error) {
		on, err := n.FlowRestoreWait()
		if err != nil {
			return false, err.Error(), nil
		}
		if !on {
			at = time.Now()
		}
		return !on, fmt.Sprintf("flow-restore-wait=%v", on), nil
	})
	return at
}
