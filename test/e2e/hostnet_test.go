//go:build e2e

package e2e

import (
	"context"
	"errors"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// refuseWithin is how fast a connection to a Service without endpoints must be refused: the
// reject responder answers at once, so anything near dialTimeout means it was not.
const refuseWithin = 500 * time.Millisecond

// hostEnv is the workload of TestHostNetwork: web-1 on node1 (labels app=web, solo=yes) and
// web-2 on node2 (app=web), probed from each node's own network namespace.
type hostEnv struct {
	sb     *framework.Sandbox
	n1, n2 *framework.Node
	web1   *corev1.Pod
	web2   *corev1.Pod
	both   *corev1.Service // ClusterIP, dual-stack, endpoints web-1 and web-2
	none   *corev1.Service // ClusterIP, dual-stack, no endpoints
	itp    *corev1.Service // ClusterIP, dual-stack, iTP=Local, endpoint web-1
	etp    *corev1.Service // NodePort, dual-stack, eTP=Local, endpoint web-1
	proxy  *corev1.Service // LoadBalancer, IPv4, an ipMode=Proxy ingress, eTP=Local, endpoint web-1
}

// hostProxyLBIP is the Proxy-mode ingress of hostEnv.proxy: not programmed, only its NodePort is.
var hostProxyLBIP = netip.MustParseAddr("172.18.0.71")

// TestHostNetwork checks Services from the nodes' own network namespaces (node processes and
// hostNetwork pods) on a dual-stack sandbox, as kube-proxy serves them: a
// ClusterIP is load-balanced to endpoints on both nodes, a ClusterIP without endpoints is
// refused at once, an iTP=Local ClusterIP without a local endpoint drops, and the node's own
// eTP=Local NodePort is served from any endpoint, as traffic from the node is internal.
func TestHostNetwork(t *testing.T) {
	sb := framework.StartSandbox(t, framework.SandboxOptions{DualStack: true})
	e := setupHostEnv(t, sb)
	t.Run("ClusterIPBothNodes", e.clusterIPBothNodes)
	t.Run("ClusterIPNoEndpointsRefused", e.noEndpointsRefused)
	t.Run("InternalTrafficPolicyLocalDropped", e.itpLocalDropped)
	t.Run("OwnExternalTrafficPolicyLocalNodePort", e.ownETPLocalNodePort)
	t.Run("NodePortNotOnLoopback", e.nodePortNotOnLoopback)
}

func dualStack(svc *corev1.Service) *corev1.Service {
	policy := corev1.IPFamilyPolicyRequireDualStack
	svc.Spec.IPFamilyPolicy = &policy
	return svc
}

func setupHostEnv(t *testing.T, sb *framework.Sandbox) *hostEnv {
	ctx := context.Background()
	const ns = "hostnet"
	e := &hostEnv{sb: sb, n1: sb.Nodes[0], n2: sb.Nodes[1]}
	require.NoError(t, sb.CreateNamespace(ctx, ns))
	pods, err := sb.RunPods(ctx,
		framework.EchoPod(ns, "web-1", e.n1, map[string]string{"app": "web", "solo": "yes"}),
		framework.EchoPod(ns, "web-2", e.n2, map[string]string{"app": "web"}),
	)
	require.NoError(t, err)
	e.web1, e.web2 = pods[0], pods[1]

	e.both = createService(t, sb, dualStack(echoService(ns, "both", "web", corev1.ServiceTypeClusterIP)))
	e.none = createService(t, sb, dualStack(echoService(ns, "none", "nothing", corev1.ServiceTypeClusterIP)))
	itp := dualStack(echoService(ns, "itp-local", "web", corev1.ServiceTypeClusterIP))
	itp.Spec.Selector = map[string]string{"solo": "yes"}
	local := corev1.ServiceInternalTrafficPolicyLocal
	itp.Spec.InternalTrafficPolicy = &local
	e.itp = createService(t, sb, itp)
	etp := dualStack(echoService(ns, "etp-local", "", corev1.ServiceTypeNodePort))
	etp.Spec.Selector = map[string]string{"solo": "yes"}
	etp.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	e.etp = createService(t, sb, etp)
	proxyLB := echoService(ns, "proxy-lb", "", corev1.ServiceTypeLoadBalancer)
	proxyLB.Spec.Selector = map[string]string{"solo": "yes"}
	proxyLB.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	e.proxy = createService(t, sb, proxyLB)
	require.NoError(t, sb.SetLBIngress(ctx, ns, "proxy-lb", hostProxyLBIP, corev1.LoadBalancerIPModeProxy))

	web1v4, web1v6 := podIPOf(t, e.web1, false), podIPOf(t, e.web1, true)
	web2v4, web2v6 := podIPOf(t, e.web2, false), podIPOf(t, e.web2, true)
	require.NoError(t, sb.WaitEndpoints(ctx, ns, "both", web1v4, web1v6, web2v4, web2v6))
	require.NoError(t, sb.WaitEndpoints(ctx, ns, "itp-local", web1v4, web1v6))
	require.NoError(t, sb.WaitEndpoints(ctx, ns, "etp-local", web1v4, web1v6))
	require.NoError(t, sb.WaitEndpoints(ctx, ns, "proxy-lb", web1v4))
	for _, svc := range []*corev1.Service{e.etp, e.proxy} {
		require.NoError(t, sb.WaitNodePort(ctx, "tcp", nodePortOf(t, svc, "tcp")))
	}
	require.NoError(t, sb.WaitLBApplied(ctx, ns, "proxy-lb", hostProxyLBIP, false))
	return e
}

// families are the ClusterIP families probed: IPv4 and IPv6.
var families = []struct {
	name string
	v6   bool
}{{"IPv4", false}, {"IPv6", true}}

// clusterIPBothNodes: from each node's host network, the ClusterIP of each family is answered
// by both endpoints over 16 connections (TCP and UDP). The endpoint on the same node sees the
// node's gateway address (like kube-proxy, which masquerades to the address of the interface
// towards the pod); the one on the other node sees the node's own address.
func (e *hostEnv) clusterIPBothNodes(t *testing.T) {
	for _, n := range []*framework.Node{e.n1, e.n2} {
		for _, fam := range families {
			for _, proto := range []string{"tcp", "udp"} {
				addr := hostPort(clusterIPOf(t, e.both, fam.v6), 80)
				what := n.Name + " host network to the " + fam.name + " ClusterIP over " + proto
				// The first answer may take until the agent has synced the routes.
				echoUntil(t, n.NS, proto, addr, what, fromBackend(map[string]bool{"web-1": true, "web-2": true}, ""))
				saw := map[string]map[string]bool{}
				for i := 0; i < 16; i++ {
					r, err := n.NS.Echo(context.Background(), proto, addr, dialTimeout)
					require.NoError(t, err, "%s: echo %d of 16", what, i+1)
					if saw[r.Server] == nil {
						saw[r.Server] = map[string]bool{}
					}
					saw[r.Server][r.ClientIP()] = true
				}
				require.Len(t, saw, 2, "%s: both endpoints answer 16 connections, got %v", what, saw)
				local, remote := "web-1", "web-2"
				if n == e.n2 {
					local, remote = remote, local
				}
				gwIP, nodeIP := e.hostSources(t, n, fam.v6)
				require.Equal(t, map[string]bool{gwIP: true}, saw[local], "%s: the endpoint on the same node sees the node's gateway address", what)
				require.Equal(t, map[string]bool{nodeIP: true}, saw[remote], "%s: the endpoint on the other node sees the node's address", what)
			}
		}
	}
}

// hostSources returns the addresses the node's own connections reach endpoints from, in one
// family: its gateway address (the first of its podCIDR) for a pod on the same node, its
// underlay address for one on another node.
func (e *hostEnv) hostSources(t *testing.T, n *framework.Node, v6 bool) (gwIP, nodeIP string) {
	t.Helper()
	for _, c := range n.PodCIDRs {
		if pfx, err := netip.ParsePrefix(c); err == nil && pfx.Addr().Is6() == v6 {
			gwIP = pfx.Masked().Addr().Next().String()
		}
	}
	require.NotEmpty(t, gwIP, "node %s has a podCIDR of the family (IPv6 %v): %v", n.Name, v6, n.PodCIDRs)
	if v6 {
		return gwIP, n.IP6.String()
	}
	return gwIP, n.IP.String()
}

// noEndpointsRefused: a ClusterIP without endpoints is refused at once from the host, like
// from a pod (TCP reset; ICMP port unreachable for UDP).
func (e *hostEnv) noEndpointsRefused(t *testing.T) {
	for _, n := range []*framework.Node{e.n1, e.n2} {
		for _, fam := range families {
			addr := hostPort(clusterIPOf(t, e.none, fam.v6), 80)
			for _, proto := range []string{"tcp", "udp"} {
				what := n.Name + " host network to the " + fam.name + " ClusterIP without endpoints over " + proto
				framework.WaitFor(t, time.Minute, what+" to be refused", func(ctx context.Context) (bool, string, error) {
					start := time.Now()
					r, err := n.NS.Echo(ctx, proto, addr, dialTimeout)
					took := time.Since(start)
					if err == nil {
						return false, "answered by " + r.String(), nil
					}
					if !errors.Is(err, syscall.ECONNREFUSED) {
						return false, "not refused: " + err.Error(), nil
					}
					if took > refuseWithin {
						return false, "refused only after " + took.String(), nil
					}
					return true, "", nil
				})
			}
		}
	}
}

// itpLocalDropped: the iTP=Local ClusterIP is answered by web-1 from node1's host network
// and dropped (no answer, no reset) from node2's, which has no local endpoint.
func (e *hostEnv) itpLocalDropped(t *testing.T) {
	for _, fam := range families {
		addr := hostPort(clusterIPOf(t, e.itp, fam.v6), 80)
		for _, proto := range []string{"tcp", "udp"} {
			echoUntil(t, e.n1.NS, proto, addr, "node1 host network to the "+fam.name+" iTP=Local ClusterIP over "+proto,
				fromBackend(map[string]bool{"web-1": true}, ""))
			requireDropped(t, e.n2.NS, proto, addr, "node2 host network to the "+fam.name+" iTP=Local ClusterIP (no local endpoint)")
		}
	}
}

// ownETPLocalNodePort: traffic from a node to its own eTP=Local NodePort (and to a Proxy-mode
// LoadBalancer's eTP=Local NodePort) is internal: node2, without a local endpoint, is answered
// by web-1 on node1, through each of its own addresses of the Service's families. web-1 sees
// node2's address, or, from node1 itself, node1's gateway address.
func (e *hostEnv) ownETPLocalNodePort(t *testing.T) {
	for _, svc := range []*corev1.Service{e.etp, e.proxy} {
		np := nodePortOf(t, svc, "tcp")
		for _, n := range []*framework.Node{e.n1, e.n2} {
			for _, ip := range n.HostIPs() {
				if !hasFamily(svc, ip) {
					continue
				}
				what := n.Name + " host network to its own eTP=Local NodePort " + hostPort(ip.String(), np) + " of " + svc.Name
				echoUntil(t, n.NS, "tcp", hostPort(ip.String(), np), what, fromBackend(map[string]bool{"web-1": true}, ""))
				byServer, seen := countEchoes(t, n.NS, "tcp", hostPort(ip.String(), np), 4)
				require.Equal(t, map[string]int{"web-1": 4}, byServer, what)
				gwIP, nodeIP := e.hostSources(t, n, ip.Is6())
				want := nodeIP // web-1 is on another node
				if n == e.n1 {
					want = gwIP
				}
				require.Equal(t, map[string]bool{want: true}, seen, "%s: the source web-1 sees", what)
			}
		}
	}
}

// nodePortNotOnLoopback: like kube-proxy in nftables mode (and its default iptables
// route_localnet=false), NodePorts are not served on the loopback addresses: nothing listens
// there, so the connection is refused.
func (e *hostEnv) nodePortNotOnLoopback(t *testing.T) {
	np := nodePortOf(t, e.etp, "tcp")
	for _, lo := range []string{"127.0.0.1", "::1"} {
		_, err := e.n2.NS.Echo(context.Background(), "tcp", hostPort(lo, np), dialTimeout)
		require.ErrorIs(t, err, syscall.ECONNREFUSED, "NodePort %d on %s is not served", np, lo)
	}
}

// hasFamily reports whether svc has a ClusterIP of ip's family (and so serves its NodePorts on
// the node addresses of that family).
func hasFamily(svc *corev1.Service, ip netip.Addr) bool {
	for _, c := range svc.Spec.ClusterIPs {
		if a, err := netip.ParseAddr(c); err == nil && a.Is6() == ip.Is6() {
			return true
		}
	}
	return false
}
