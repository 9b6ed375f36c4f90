//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver/apiv1"
	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// pinnedUDP is one client socket (one source port) of a UDP Service and the endpoint that
// answered it first.
type pinnedUDP struct {
	conn   net.Conn
	dst    string
	pinned string
}

// askUDP sends one datagram and returns the answering server ("" when none answered within
// 500 ms).
func askUDP(c net.Conn) string {
	if _, err := c.Write([]byte("query\n")); err != nil {
		return ""
	}
	_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	buf := make([]byte, 512)
	n, err := c.Read(buf)
	if err != nil {
		return ""
	}
	r, err := framework.ParseEchoReply(strings.TrimSpace(string(buf[:n])))
	if err != nil {
		return ""
	}
	return r.Server
}

// TestUDPConntrackAgentRestart: a dual-stack UDP Service's clients (its ClusterIPs and node1's
// NodePort from a pod and from node1's host network, both families) keep their endpoints when node1's agent restarts, even though the
// Service was scaled up while the agent was down: the restart deletes no conntrack entry that
// is still valid. When an endpoint goes away while the agent is down, its clients move within
// a second of the agent's first sync.
func TestUDPConntrackAgentRestart(t *testing.T) {
	sb := framework.StartSandbox(t, framework.SandboxOptions{DualStack: true})
	ctx := context.Background()
	const ns = "ctrestart"
	n1, n2 := sb.Nodes[0], sb.Nodes[1]
	clientNS, svc := startUDPDNS(t, sb, ns, corev1.ServiceTypeNodePort)
	require.NoError(t, sb.WaitProgrammed(ctx, ns, "dns", "with 2 endpoints", framework.HasEndpoints(2)))
	np := nodePortOf(t, svc, "udp")
	// From node1's host network the NodePort reaches OVS DNATed to the NodePort virtual IP.
	frontends := []struct {
		from *framework.NetNS
		dst  string
	}{
		{clientNS, hostPort(clusterIPOf(t, svc, false), 80)}, {clientNS, hostPort(clusterIPOf(t, svc, true), 80)},
		{clientNS, hostPort(n1.IP.String(), np)}, {clientNS, hostPort(n1.IP6.String(), np)},
		{n1.NS, hostPort(n1.IP.String(), np)}, {n1.NS, hostPort(n1.IP6.String(), np)},
	}

	var clients []*pinnedUDP
	for _, fe := range frontends {
		dst := fe.dst
		for i := 0; i < 5; i++ {
			conn, err := fe.from.Dial(ctx, "udp", dst)
			require.NoError(t, err)
			t.Cleanup(func() { conn.Close() })
			c := &pinnedUDP{conn: conn, dst: dst}
			framework.WaitFor(t, 10*time.Second, "an answer through "+dst, func(context.Context) (bool, string, error) {
				c.pinned = askUDP(conn)
				return c.pinned != "", "", nil
			})
			clients = append(clients, c)
		}
	}

	// Scaled up while node1's agent is down.
	n1.KillAgent(t)
	_, err := sb.RunPods(ctx, framework.EchoPod(ns, "dns-3", n2, udpDNSLabels), framework.EchoPod(ns, "dns-4", n2, udpDNSLabels))
	require.NoError(t, err)
	require.NoError(t, n1.StartAgentAgain(t, time.Minute))
	waitEachNode(t, sb, ns, "dns", "with 4 endpoints", everyRow(func(_ *framework.Node, r apiv1.ServicePort) (bool, string) {
		return r.Endpoints.Total == 4, fmt.Sprintf("%d endpoints", r.Endpoints.Total)
	}))
	var moved []string
	for _, c := range clients {
		if got := askUDP(c.conn); got != c.pinned {
			moved = append(moved, fmt.Sprintf("%s via %s: %s -> %q", c.conn.LocalAddr(), c.dst, c.pinned, got))
		}
	}
	require.Empty(t, moved, "after node1's agent restarted (2 endpoints added meanwhile), %d of %d UDP clients lost their endpoint", len(moved), len(clients))

	// dns-1 goes away while node1's agent is down.
	n1.KillAgent(t)
	require.NoError(t, sb.DeletePod(ctx, ns, "dns-1"))
	require.NoError(t, n1.StartAgentAgain(t, time.Minute))
	waitEachNode(t, sb, ns, "dns", "with 3 endpoints", everyRow(func(_ *framework.Node, r apiv1.ServicePort) (bool, string) {
		return r.Endpoints.Total == 3, fmt.Sprintf("%d endpoints", r.Endpoints.Total)
	}))
	synced := time.Now()
	onGone := 0
	for _, c := range clients {
		if c.pinned != "dns-1" {
			require.Equal(t, c.pinned, askUDP(c.conn), "%s via %s keeps its endpoint when another one goes away", c.conn.LocalAddr(), c.dst)
			continue
		}
		onGone++
		framework.WaitFor(t, time.Second+time.Until(synced), c.dst+" client of dns-1 to move to another endpoint", func(context.Context) (bool, string, error) {
			got := askUDP(c.conn)
			return got != "" && got != "dns-1", "answered by " + got, nil
		})
	}
	require.NotZero(t, onGone, "no client was on dns-1: the test proves nothing")
	t.Logf("%d UDP clients over 6 frontends (2 families; ClusterIP, NodePort from a pod and from the host) kept their endpoints across two agent restarts; the %d on the endpoint removed while the agent was down moved within a second of every node reporting the change", len(clients), onGone)
}

// udpDNSLabels select the UDP tests' "dns" echo pods.
var udpDNSLabels = map[string]string{"app": "dns"}

// startUDPDNS creates namespace ns with a client pod on node1 and two "dns" echo pods on node2,
// and a RequireDualStack Service "dns" of typ selecting them; it returns the client's network
// namespace and the Service as the API server filled it in.
func startUDPDNS(t *testing.T, sb *framework.Sandbox, ns string, typ corev1.ServiceType) (*framework.NetNS, *corev1.Service) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, sb.CreateNamespace(ctx, ns))
	n1, n2 := sb.Nodes[0], sb.Nodes[1]
	pods, err := sb.RunPods(ctx, framework.EchoPod(ns, "client", n1, map[string]string{"app": "client"}),
		framework.EchoPod(ns, "dns-1", n2, udpDNSLabels), framework.EchoPod(ns, "dns-2", n2, udpDNSLabels))
	require.NoError(t, err)
	clientNS, err := sb.PodNetNS(pods[0])
	require.NoError(t, err)
	spec := echoService(ns, "dns", "dns", typ)
	policy := corev1.IPFamilyPolicyRequireDualStack
	spec.Spec.IPFamilyPolicy = &policy
	svc := createService(t, sb, spec)
	require.Len(t, svc.Spec.ClusterIPs, 2)
	return clientNS, svc
}
