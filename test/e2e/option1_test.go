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

// LoadBalancer ingress IPs of the Option 1 tests.
var (
	// vipIP is ipMode VIP: the underlay routes it to node1; the router ("outside") owns it too,
	// so traffic that leaves a node for it is answered by OutsideName.
	vipIP = netip.MustParseAddr("172.18.0.10")
	// proxyIP is ipMode Proxy: an l4proxy on the router owns it and relays to node1's NodePort.
	proxyIP = netip.MustParseAddr("172.18.1.10")
	// flipIP starts as VIP and flips to Proxy and back; an l4proxy owns it all along.
	flipIP = netip.MustParseAddr("172.18.1.20")
)

// syncBound is how long an agent may take to apply a changed ingress: one sync after the
// change (minSyncInterval is 200ms in the sandbox) plus the informer's and the poll's latency.
const syncBound = 2 * time.Second

// option1 is the workload of the Option 1 tests: two backends, a client pod on node2 (so that
// node1, where the underlay routes VIPs, is another node), and three LoadBalancer Services.
type option1 struct {
	sb        *framework.Sandbox
	ns        string
	clientNS  *framework.NetNS
	clientIP  string
	clientNod *framework.Node
	backends  map[string]bool
	proxyLB   *framework.ProxyLB
	flipLB    *framework.ProxyLB
}

func setupOption1(t *testing.T, sb *framework.Sandbox) *option1 {
	ctx := context.Background()
	e := &option1{sb: sb, ns: "option1", backends: map[string]bool{"web-1": true, "web-2": true}}
	require.NoError(t, sb.CreateNamespace(ctx, e.ns))
	n1, n2 := sb.Nodes[0], sb.Nodes[1]
	labels := map[string]string{"app": "web"}
	pods, err := sb.RunPods(ctx,
		framework.EchoPod(e.ns, "web-1", n1, labels),
		framework.EchoPod(e.ns, "web-2", n2, labels),
		framework.EchoPod(e.ns, "client", n2, map[string]string{"app": "client"}),
	)
	require.NoError(t, err)
	e.clientNS, err = sb.PodNetNS(pods[2])
	require.NoError(t, err)
	e.clientIP, e.clientNod = pods[2].Status.PodIP, n2

	svcs := map[string]*corev1.Service{}
	for _, name := range []string{"web-vip", "web-proxy", "web-flip"} {
		svc, err := sb.CP.Client.CoreV1().Services(e.ns).Create(ctx, echoService(e.ns, name, "web", corev1.ServiceTypeLoadBalancer), metav1.CreateOptions{})
		require.NoError(t, err)
		svcs[name] = svc
		require.NoError(t, sb.WaitEndpoints(ctx, e.ns, name, pods[0].Status.PodIP, pods[1].Status.PodIP))
	}
	require.NoError(t, sb.SetLBIngress(ctx, e.ns, "web-vip", vipIP, corev1.LoadBalancerIPModeVIP))
	require.NoError(t, sb.SetLBIngress(ctx, e.ns, "web-proxy", proxyIP, corev1.LoadBalancerIPModeProxy))
	require.NoError(t, sb.SetLBIngress(ctx, e.ns, "web-flip", flipIP, corev1.LoadBalancerIPModeVIP))
	e.proxyLB, err = sb.StartProxyLB(proxyIP, 80, hostPort(n1.IP.String(), nodePortOf(t, svcs["web-proxy"], "tcp")))
	require.NoError(t, err)
	e.flipLB, err = sb.StartProxyLB(flipIP, 80, hostPort(n1.IP.String(), nodePortOf(t, svcs["web-flip"], "tcp")))
	require.NoError(t, err)
	_, err = sb.StartOutside(vipIP, 80)
	require.NoError(t, err)
	return e
}

// TestLoadBalancerIPMode proves KEP-1860 Option 1 with real traffic, in the four cases of
// proxyLoadBalancerIPs × ipMode, telling them apart by who answered, which client address the
// backend saw, and how many connections the external load balancer relayed.
func TestLoadBalancerIPMode(t *testing.T) {
	sb := framework.StartSandbox(t, framework.SandboxOptions{Agent: framework.AgentOptions{ProxyLoadBalancerIPs: true}})
	e := setupOption1(t, sb)

	t.Run("ProxyLoadBalancerIPs=true", func(t *testing.T) {
		t.Run("VIP", e.vipIntercepted)
		t.Run("Proxy", e.proxyRelayed)
		t.Run("FlipVIPToProxyAndBack", e.flip)
	})
	require.NoError(t, sb.RestartAgents(framework.AgentOptions{ProxyLoadBalancerIPs: false}), "restarting the agents with proxyLoadBalancerIPs=false")
	t.Run("ProxyLoadBalancerIPs=false", func(t *testing.T) {
		t.Run("VIP", e.vipNotIntercepted)
		t.Run("Proxy", e.proxyRelayed)
	})
}

// waitIngressSeen waits until every agent lists the ingress (whatever it decided), so that the
// traffic that follows is decided by the current configuration.
func (e *option1) waitIngressSeen(t *testing.T, svc string, ip netip.Addr, mode corev1.LoadBalancerIPMode) {
	t.Helper()
	require.NoError(t, e.sb.WaitProgrammed(context.Background(), e.ns, svc, "with ingress "+ip.String()+" ("+string(mode)+")",
		framework.LBIngressSeen(ip, mode)))
}

// requireDecision checks what every agent reports it did with the ingress.
func (e *option1) requireDecision(t *testing.T, svc string, ip netip.Addr, programmed bool) {
	t.Helper()
	require.NoError(t, e.sb.WaitProgrammed(context.Background(), e.ns, svc, "with the decision programmed="+boolString(programmed)+" for "+ip.String(),
		framework.LBProgrammed(ip, programmed)))
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// echoN makes n connections from ns to addr; each must be answered and pass check.
func echoN(t *testing.T, ns *framework.NetNS, proto, addr string, n int, what string, check func(framework.EchoReply) (bool, string)) {
	t.Helper()
	for i := 0; i < n; i++ {
		r, err := ns.Echo(context.Background(), proto, addr, dialTimeout)
		require.NoError(t, err, "%s: connection %d of %d got no answer", what, i+1, n)
		ok, why := check(r)
		require.True(t, ok, "%s: connection %d of %d: reply %s: %s", what, i+1, n, r, why)
	}
}

func answeredBy(name, wantClient string) func(framework.EchoReply) (bool, string) {
	return func(r framework.EchoReply) (bool, string) {
		if r.Server != name {
			return false, "want an answer from " + name
		}
		if wantClient != "" && r.ClientIP() != wantClient {
			return false, name + " must see client " + wantClient
		}
		return true, ""
	}
}

// notClient accepts a backend's answer that did not see the client pod itself.
func (e *option1) viaNode() func(framework.EchoReply) (bool, string) {
	return func(r framework.EchoReply) (bool, string) {
		if !e.backends[r.Server] {
			return false, "not answered by a backend"
		}
		if r.ClientIP() == e.clientIP {
			return false, "the backend saw the client pod's own IP: the connection did not go through the external load balancer"
		}
		if r.ClientIP() == framework.RouterIP.String() {
			return false, "the backend saw the load balancer's address: with eTP=Cluster the node must SNAT it"
		}
		return true, ""
	}
}

// vipIntercepted: proxyLoadBalancerIPs=true, ipMode VIP. OVS answers a pod's connection to the
// LB IP directly (the backend sees the client pod's IP, even though the outside world also has
// the address), and the external client's connection routed to node1 reaches a backend.
func (e *option1) vipIntercepted(t *testing.T) {
	e.waitIngressSeen(t, "web-vip", vipIP, corev1.LoadBalancerIPModeVIP)
	// Programmed means the flows and the host route into OVS (which follows each sync).
	require.NoError(t, e.sb.WaitLBApplied(context.Background(), e.ns, "web-vip", vipIP, true))
	for _, proto := range []string{"tcp", "udp"} {
		echoN(t, e.clientNS, proto, hostPort(vipIP.String(), 80), 5, proto+" from the client pod to the VIP",
			fromBackend(e.backends, e.clientIP))
	}
	echoN(t, e.clientNS, "http", hostPort(vipIP.String(), 8081), 3, "HTTP from the client pod to the VIP", fromBackend(e.backends, e.clientIP))
	echoUntil(t, e.sb.Net.Client, "tcp", hostPort(vipIP.String(), 80), "the external client's connection to the VIP (routed to node1) to reach a backend",
		fromBackend(e.backends, ""))
	e.requireDecision(t, "web-vip", vipIP, true)
}

// vipNotIntercepted: proxyLoadBalancerIPs=false, ipMode VIP. OVS leaves the LB IP alone: the
// pod's connection leaves its node (masqueraded to the node's address) and is answered by the
// outside world; so is the external client's, which node1 just routes on.
func (e *option1) vipNotIntercepted(t *testing.T) {
	e.waitIngressSeen(t, "web-vip", vipIP, corev1.LoadBalancerIPModeVIP)
	// Not programmed means no flow and no host route into OVS (a restarted agent removes the
	// route its predecessor installed right after its first sync).
	require.NoError(t, e.sb.WaitLBApplied(context.Background(), e.ns, "web-vip", vipIP, false))
	for _, proto := range []string{"tcp", "udp"} {
		echoN(t, e.clientNS, proto, hostPort(vipIP.String(), 80), 5, proto+" from the client pod to the VIP",
			answeredBy(framework.OutsideName, e.clientNod.IP.String()))
	}
	echoUntil(t, e.sb.Net.Client, "tcp", hostPort(vipIP.String(), 80), "node1 to route the external client's connection to the VIP on, uninspected",
		answeredBy(framework.OutsideName, framework.ClientIP.String()))
	e.requireDecision(t, "web-vip", vipIP, false)
}

// proxyRelayed: ipMode Proxy, whatever proxyLoadBalancerIPs says. The pod's connection to the
// LB IP leaves the node and goes through the external load balancer, which relays it to
// node1's NodePort: the l4proxy counts exactly these connections and the backend sees a node
// address (eTP=Cluster), never the pod.
func (e *option1) proxyRelayed(t *testing.T) {
	ctx := context.Background()
	e.waitIngressSeen(t, "web-proxy", proxyIP, corev1.LoadBalancerIPModeProxy)
	// The external load balancer's target must serve its NodePort first (after an agent restart
	// the node re-creates its NodePort rules).
	start := time.Now()
	echoUntil(t, e.sb.Net.Router, "tcp", e.proxyLB.Target, "node1 to serve the NodePort "+e.proxyLB.Target+" the external load balancer relays to",
		fromBackend(e.backends, ""))
	t.Logf("NodePort %s answered the router after %v", e.proxyLB.Target, time.Since(start).Round(time.Millisecond))
	before, err := e.proxyLB.Stats(ctx)
	require.NoError(t, err)
	const n = 5
	echoN(t, e.clientNS, "tcp", hostPort(proxyIP.String(), 80), n, "TCP from the client pod to the Proxy-mode LB IP", e.viaNode())
	echoN(t, e.sb.Net.Client, "tcp", hostPort(proxyIP.String(), 80), 1, "TCP from the external client to the Proxy-mode LB IP", e.viaNode())
	after, err := e.proxyLB.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(n+1), after.TCP-before.TCP, "the external load balancer must have relayed every connection to the Proxy-mode LB IP")
	e.requireDecision(t, "web-proxy", proxyIP, false)
}
