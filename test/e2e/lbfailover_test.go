//go:build e2e

package e2e

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// failoverBound is the longest a VIP-mode address may stay unanswered after its announcing
// node's agent and ovs-vswitchd die (docs/design/failure-handling.md).
const failoverBound = 3 * time.Second

// TestLoadBalancerFailover measures, with the real antrea-controller and agents, how long a
// VIP-mode LoadBalancer IP stays dark after the node announcing it loses its agent and
// ovs-vswitchd (SIGKILL): the controller moves the address when the node's announcer Lease
// expires, and the new node's gratuitous ARP moves the client. Then a planned drain (the
// announcer is cordoned) hands the address over under 20 new connections per second without
// failing one.
func TestLoadBalancerFailover(t *testing.T) {
	ctx := context.Background()
	sb := framework.StartSandbox(t, framework.SandboxOptions{Agent: framework.AgentOptions{ProxyLoadBalancerIPs: true}})
	require.NoError(t, sb.Net.RouteOnLink(providerVIPPool))
	lb, err := sb.StartLBController(ctx, framework.LBPool{Name: "vip", CIDRs: []netip.Prefix{providerVIPPool}})
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("---- last 40 lines of antrea-controller.log ----\n%s", lb.LogTail(40))
		}
	})
	p := &provider{sb: sb, lb: lb, ns: "failover"}
	require.NoError(t, sb.CreateNamespace(ctx, p.ns))
	p.create(t, p.service("web", "web", nil))
	svc := p.serving(t, "web")
	ip := ingressIP(t, svc, corev1.LoadBalancerIPModeVIP)
	first := sb.NodeByName(announcer(t, svc, ip))
	require.NotNil(t, first)
	other := sb.Nodes[0]
	if other == first {
		other = sb.Nodes[1]
	}
	// The endpoints run on the node that survives: only the address's failover is measured.
	pods, err := sb.RunPods(ctx, framework.EchoPod(p.ns, "web-1", other, map[string]string{"app": "web"}),
		framework.EchoPod(p.ns, "web-2", other, map[string]string{"app": "web"}))
	require.NoError(t, err)
	require.NoError(t, sb.WaitEndpoints(ctx, p.ns, "web", pods[0].Status.PodIP, pods[1].Status.PodIP))
	addr := hostPort(ip.String(), 80)
	echoUntil(t, sb.Net.Client, "tcp", addr, "the client to reach web through "+first.Name, func(framework.EchoReply) (bool, string) { return true, "" })
	p.waitClientARP(t, ip, first)

	t.Run("UnplannedFailure", func(t *testing.T) {
		pr := framework.StartProber(sb.Net.Client, addr, framework.ProberOptions{Interval: 50 * time.Millisecond, Timeout: time.Second})
		require.NoError(t, pr.WaitHealthy(ctx, time.Now(), time.Second, 10*time.Second))
		first.KillAgent(t)
		first.OVS.KillVSwitchd()
		killed := time.Now()
		t.Logf("%s: killed antrea-agent and ovs-vswitchd", first.Name)
		p.waitAnnouncer(t, "web", ip, other.Name)
		moved := time.Since(killed)
		require.NoError(t, pr.WaitHealthy(ctx, killed, 2*time.Second, 30*time.Second))
		s := framework.Summarize(pr.Stop(), killed)
		t.Logf("address moved to %s %v after the kill; traffic back %v after it (%d of %d connections failed, longest outage %v)",
			other.Name, moved.Round(time.Millisecond), s.Recovery.Round(time.Millisecond), s.Failed, s.Attempts, s.LongestOutage.Round(time.Millisecond))
		require.True(t, s.Recovered)
		require.LessOrEqual(t, s.Recovery, failoverBound, "answers again within %v of the announcing node's failure", failoverBound)
	})

	t.Run("PlannedDrain", func(t *testing.T) {
		require.NoError(t, first.StartVSwitchdAgain(t))
		require.NoError(t, first.StartAgentAgain(t, time.Minute))
		pr := framework.StartProber(sb.Net.Client, addr, framework.ProberOptions{Interval: 50 * time.Millisecond, Timeout: 2 * time.Second})
		require.NoError(t, pr.WaitHealthy(ctx, time.Now(), time.Second, 10*time.Second))
		cur, err := sb.CP.Client.CoreV1().Services(p.ns).Get(ctx, "web", metav1.GetOptions{})
		require.NoError(t, err)
		from := sb.NodeByName(announcer(t, cur, ip))
		require.NotNil(t, from)
		to := first
		if from == first {
			to = other
		}
		n, err := sb.CP.Client.CoreV1().Nodes().Get(ctx, from.Name, metav1.GetOptions{})
		require.NoError(t, err)
		n.Spec.Unschedulable = true
		_, err = sb.CP.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		require.NoError(t, err)
		cordoned := time.Now()
		p.waitAnnouncer(t, "web", ip, to.Name)
		p.waitClientARP(t, ip, to)
		switched := time.Since(cordoned)
		require.NoError(t, pr.WaitHealthy(ctx, time.Now(), 2*time.Second, 10*time.Second))
		s := framework.Summarize(pr.Stop(), cordoned)
		t.Logf("cordoning %s moved the address to %s; the client switched %v after the cordon; %d of %d connections failed",
			from.Name, to.Name, switched.Round(time.Millisecond), s.Failed, s.Attempts)
		require.Zero(t, s.Failed, "a planned drain fails no connection: %s", s.LastError)
	})
}
