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

// Addresses of TestTenantExternalIPOtherPorts: a peer host on the underlay, and a VIP-mode
// LoadBalancer IP that the peer owns too (the nodes route peerLBRange through the peer; the
// route the agent may add for the claimed IP itself is more specific).
var (
	peerIP      = netip.MustParseAddr("192.168.77.50")
	peerLBIP    = netip.MustParseAddr("172.18.0.60")
	peerLBRange = netip.MustParsePrefix("172.18.0.48/28")
)

// Ports of the peer: the claimed one, which the Service defines, and another one.
const (
	claimedPort = 9999
	otherPort   = 7777
)

// peerName is what the peer's listeners answer with.
const peerName = "peer"

// TestTenantExternalIPOtherPorts: a Service that lists another host's address as an externalIP
// (or gets it as a VIP-mode LoadBalancer ingress) takes only its own (address, protocol, port)
// tuples: node1's host and a pod on node1 still reach the peer on a port the Service does not
// define, the Service's backend answers its port, and once the Service is deleted the peer
// answers that port again (the test logs how long that took).
func TestTenantExternalIPOtherPorts(t *testing.T) {
	sb := framework.StartSandbox(t, framework.SandboxOptions{Agent: framework.AgentOptions{ProxyLoadBalancerIPs: true}})
	ctx := context.Background()
	const ns = "tenant-peer"
	require.NoError(t, sb.CreateNamespace(ctx, ns))
	n1, n2 := sb.Nodes[0], sb.Nodes[1]
	pods, err := sb.RunPods(ctx,
		framework.EchoPod(ns, "claimer-1", n2, map[string]string{"app": "claimer"}),
		framework.EchoPod(ns, "client-1", n1, map[string]string{"app": "client"}),
	)
	require.NoError(t, err)
	backendIP := pods[0].Status.PodIP
	clientNS, err := sb.PodNetNS(pods[1])
	require.NoError(t, err)

	peer, err := sb.AddPeer("peer", peerIP, peerLBIP)
	require.NoError(t, err)
	for _, n := range sb.Nodes {
		require.NoError(t, n.RouteVia(peerLBRange, peerIP))
	}
	for _, ip := range []netip.Addr{peerIP, peerLBIP} {
		for _, port := range []int{claimedPort, otherPort} {
			l, err := framework.ServeEcho(peer, peerName, hostPort(ip.String(), port))
			require.NoError(t, err)
			t.Cleanup(func() { _ = l.Close() })
		}
	}
	clients := hostAndPod(n1, clientNS)

	cases := []struct {
		name string
		ip   netip.Addr
		svc  *corev1.Service
	}{
		{"ExternalIP", peerIP, externalIPClaim(ns)},
		{"LoadBalancerIP", peerLBIP, manualLB(tcpService(ns, "claim-lb", "claimer", corev1.ServiceTypeClusterIP, claimedPort))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			claimed, other := hostPort(c.ip.String(), claimedPort), hostPort(c.ip.String(), otherPort)
			for _, cl := range clients {
				for _, addr := range []string{claimed, other} {
					waitOutcome(t, cl.ns, addr, answeredOutcome(peerName), "before any Service claims it, the "+cl.what+" reaches the peer", time.Minute)
				}
			}
			createService(t, sb, c.svc)
			require.NoError(t, sb.WaitEndpoints(ctx, ns, c.svc.Name, backendIP))
			if c.name == "LoadBalancerIP" {
				require.NoError(t, sb.SetLBIngress(ctx, ns, c.svc.Name, c.ip, corev1.LoadBalancerIPModeVIP))
				require.NoError(t, sb.WaitProgrammed(ctx, ns, c.svc.Name, "with its ingress", framework.LBProgrammed(c.ip, true)))
			}
			require.NoError(t, sb.WaitProgrammed(ctx, ns, c.svc.Name, "with its endpoint", framework.HasEndpoints(1)))
			for _, cl := range clients {
				t.Run("Claimed/"+cl.what, func(t *testing.T) {
					waitOutcome(t, cl.ns, claimed, answeredOutcome("claimer-1"), "the Service's own tuple is answered by its backend from the "+cl.what, time.Minute)
					requireAnsweredBy(t, cl.ns, other, 6, map[string]bool{peerName: true},
						"a port the Service does not define ("+other+") still reaches the peer from the "+cl.what)
				})
			}
			require.NoError(t, sb.CP.Client.CoreV1().Services(ns).Delete(ctx, c.svc.Name, metav1.DeleteOptions{}))
			deleted := time.Now()
			for _, cl := range clients {
				t.Run("Deleted/"+cl.what, func(t *testing.T) {
					tries := waitOutcome(t, cl.ns, claimed, answeredOutcome(peerName), "after the Service is deleted, the "+cl.what+" reaches the peer's "+claimed+" again", time.Minute)
					t.Logf("%s: the %s reached the peer on %s again %v after the Service was deleted (connection %d)",
						c.name, cl.what, claimed, time.Since(deleted).Round(time.Millisecond), tries)
					requireAnsweredBy(t, cl.ns, other, 3, map[string]bool{peerName: true}, "the peer's other port after the Service is deleted, from the "+cl.what)
				})
			}
		})
	}
}

// externalIPClaim is a ClusterIP Service in namespace with externalIPs [peerIP] on claimedPort.
func externalIPClaim(namespace string) *corev1.Service {
	svc := tcpService(namespace, "claim-eip", "claimer", corev1.ServiceTypeClusterIP, claimedPort)
	svc.Spec.ExternalIPs = []string{peerIP.String()}
	return svc
}
