//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver/apiv1"
	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// LoadBalancer ingress IPs (ipMode VIP, routed by the underlay to node1) and the second external
// client of the policy tests.
var (
	etpLocalVIP = netip.MustParseAddr("172.18.0.61")
	rangesVIP   = netip.MustParseAddr("172.18.0.62")
	// outsideRangeClient is an external client outside rangesVIP's loadBalancerSourceRanges.
	outsideRangeClient = netip.MustParseAddr("192.168.77.101")
)

// policyEnv is the workload of TestSemanticsPolicies. web-1 (node1) is the only pod labelled
// solo=yes: the only endpoint of the eTP Services, local to node1 and remote to node2.
type policyEnv struct {
	sb             *framework.Sandbox
	ns             string
	n1, n2         *framework.Node
	c1, c2         *framework.NetNS // client pods on node1 and node2
	c1IP, c2IP     string
	web1IP, web2IP string
	hairpin        *framework.NetNS
	etpLocal       *corev1.Service // LoadBalancer, eTP=Local, endpoint web-1
	etpCluster     *corev1.Service // NodePort, eTP=Cluster, endpoint web-1
	itpLocal       *corev1.Service // ClusterIP, iTP=Local, endpoints web-1 and web-2
	ranges         *corev1.Service // LoadBalancer with loadBalancerSourceRanges = the client
	hairpinSvc     *corev1.Service // ClusterIP whose only endpoint is the pod "hairpin"
}

// TestSemanticsPolicies proves the traffic policies, source ranges, hairpin, health check
// NodePorts, metrics and health endpoints on the two-node sandbox with real traffic.
func TestSemanticsPolicies(t *testing.T) {
	sb := framework.StartSandbox(t, framework.SandboxOptions{Agent: framework.AgentOptions{ProxyLoadBalancerIPs: true}})
	e := setupPolicyEnv(t, sb)
	t.Run("NodePortFromPodOnItsNode", e.nodePortFromOwnNode)
	t.Run("ExternalTrafficPolicyLocal", e.externalLocal)
	t.Run("ExternalTrafficPolicyCluster", e.externalCluster)
	t.Run("InternalTrafficPolicyLocal", e.internalLocal)
	t.Run("LoadBalancerSourceRanges", e.sourceRanges)
	t.Run("Hairpin", e.hairpinToSelf)
	t.Run("HealthCheckNodePort", e.healthCheckNodePort)
	t.Run("MetricsAndHealthz", e.metricsAndHealthz)
}

func setupPolicyEnv(t *testing.T, sb *framework.Sandbox) *policyEnv {
	ctx := context.Background()
	e := &policyEnv{sb: sb, ns: "policy", n1: sb.Nodes[0], n2: sb.Nodes[1]}
	require.NoError(t, sb.CreateNamespace(ctx, e.ns))
	pods, err := sb.RunPods(ctx,
		framework.EchoPod(e.ns, "web-1", e.n1, map[string]string{"app": "web", "solo": "yes"}),
		framework.EchoPod(e.ns, "web-2", e.n2, map[string]string{"app": "web"}),
		framework.EchoPod(e.ns, "client-1", e.n1, map[string]string{"app": "client"}),
		framework.EchoPod(e.ns, "client-2", e.n2, map[string]string{"app": "client"}),
		framework.EchoPod(e.ns, "hairpin", e.n2, map[string]string{"app": "hairpin"}),
	)
	require.NoError(t, err)
	e.web1IP, e.web2IP = pods[0].Status.PodIP, pods[1].Status.PodIP
	e.c1IP, e.c2IP = pods[2].Status.PodIP, pods[3].Status.PodIP
	for i, dst := range []**framework.NetNS{&e.c1, &e.c2, &e.hairpin} {
		*dst, err = sb.PodNetNS(pods[2+i])
		require.NoError(t, err)
	}

	local := echoService(e.ns, "etp-local", "", corev1.ServiceTypeLoadBalancer)
	local.Spec.Selector = map[string]string{"solo": "yes"}
	local.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	e.etpLocal = createService(t, sb, local)
	cluster := echoService(e.ns, "etp-cluster", "", corev1.ServiceTypeNodePort)
	cluster.Spec.Selector = map[string]string{"solo": "yes"}
	e.etpCluster = createService(t, sb, cluster)
	itp := echoService(e.ns, "itp-local", "web", corev1.ServiceTypeClusterIP)
	itpLocal := corev1.ServiceInternalTrafficPolicyLocal
	itp.Spec.InternalTrafficPolicy = &itpLocal
	e.itpLocal = createService(t, sb, itp)
	ranges := echoService(e.ns, "ranges", "web", corev1.ServiceTypeLoadBalancer)
	ranges.Spec.LoadBalancerSourceRanges = []string{framework.ClientIP.String() + "/32"}
	e.ranges = createService(t, sb, ranges)
	e.hairpinSvc = createService(t, sb, echoService(e.ns, "hairpin", "hairpin", corev1.ServiceTypeClusterIP))

	require.NoError(t, sb.SetLBIngress(ctx, e.ns, "etp-local", etpLocalVIP, corev1.LoadBalancerIPModeVIP))
	require.NoError(t, sb.SetLBIngress(ctx, e.ns, "ranges", rangesVIP, corev1.LoadBalancerIPModeVIP))
	for _, name := range []string{"etp-local", "etp-cluster"} {
		require.NoError(t, sb.WaitEndpoints(ctx, e.ns, name, e.web1IP))
	}
	require.NoError(t, sb.WaitEndpoints(ctx, e.ns, "itp-local", e.web1IP, e.web2IP))
	require.NoError(t, sb.WaitEndpoints(ctx, e.ns, "ranges", e.web1IP, e.web2IP))
	require.NoError(t, sb.WaitEndpoints(ctx, e.ns, "hairpin", pods[4].Status.PodIP))
	for _, svc := range []*corev1.Service{e.etpLocal, e.etpCluster} {
		for _, p := range []string{"tcp", "udp"} {
			require.NoError(t, sb.WaitNodePort(ctx, p, nodePortOf(t, svc, p)))
		}
	}
	// The local endpoint counts are what each node's flows use.
	waitEachNode(t, sb, e.ns, "etp-local", "with web-1 local to node1 only", everyRow(func(n *framework.Node, r apiv1.ServicePort) (bool, string) {
		want := 0
		if n == e.n1 {
			want = 1
		}
		return r.Endpoints.Ready == 1 && r.Endpoints.Local == want && r.ExternalTrafficPolicy == "Local",
			fmt.Sprintf("endpoints %+v, eTP %s; want 1 ready, %d local, eTP Local", r.Endpoints, r.ExternalTrafficPolicy, want)
	}))
	require.NoError(t, sb.WaitLBApplied(ctx, e.ns, "etp-local", etpLocalVIP, true))
	require.NoError(t, sb.WaitLBApplied(ctx, e.ns, "ranges", rangesVIP, true))
	return e
}

// externalLocal: from the external client, a node with a local endpoint preserves the client's
// address and a node without one drops the connection; pods short-circuit to the cluster
// endpoints on any node.
func (e *policyEnv) externalLocal(t *testing.T) {
	client := e.sb.Net.Client
	web1 := map[string]bool{"web-1": true}
	for _, proto := range []string{"tcp", "udp"} {
		np := nodePortOf(t, e.etpLocal, proto)
		r := echoUntil(t, client, proto, hostPort(e.n1.IP.String(), np), proto+" NodePort of node1 (local endpoint) from the external client",
			fromBackend(web1, ""))
		require.Equal(t, framework.ClientIP.String(), r.ClientIP(), "eTP=Local: web-1 must see the external client's own address via node1's %s NodePort", proto)
		requireDropped(t, client, proto, hostPort(e.n2.IP.String(), np), "eTP=Local NodePort of node2, which has no local endpoint")
	}
	r := echoUntil(t, client, "tcp", hostPort(etpLocalVIP.String(), 80), "the eTP=Local LB IP (routed to node1) from the external client",
		fromBackend(web1, ""))
	require.Equal(t, framework.ClientIP.String(), r.ClientIP(), "eTP=Local: web-1 must see the external client's own address via the LB IP")

	// client-2 runs on node2, which has no local endpoint: its connections go to the cluster
	// endpoints anyway, with its own address.
	r = echoUntil(t, e.c2, "tcp", hostPort(etpLocalVIP.String(), 80), "client-2 on node2 to reach the eTP=Local LB IP", fromBackend(web1, ""))
	require.Equal(t, e.c2IP, r.ClientIP(), "a pod's connection to an eTP=Local LB IP short-circuits to the cluster endpoints without SNAT")
	np := nodePortOf(t, e.etpLocal, "tcp")
	r = echoUntil(t, e.c2, "tcp", hostPort(e.n2.IP.String(), np), "client-2 on node2 to reach its own node's eTP=Local NodePort (no local endpoint there)",
		fromBackend(web1, ""))
	t.Logf("client-2 -> node2 NodePort %d (eTP=Local, no local endpoint): answered by %s", np, r)
	r = echoUntil(t, e.c1, "tcp", hostPort(e.n1.IP.String(), np), "client-1 on node1 to reach its own node's eTP=Local NodePort",
		fromBackend(web1, ""))
	t.Logf("client-1 -> node1 NodePort %d (eTP=Local, local endpoint): answered by %s", np, r)
	for _, c := range []*framework.NetNS{e.c1, e.c2} {
		node := e.n1
		if c == e.c2 {
			node = e.n2
		}
		got, _ := countEchoes(t, c, "tcp", hostPort(node.IP.String(), np), 20)
		require.Equal(t, map[string]int{"web-1": 20}, got, "pods reaching their own node's eTP=Local NodePort")
	}
}

// nodePortFromOwnNode: a pod's connections to its own node's address and NodePort (eTP=Cluster)
// are answered from the first one on, whether the endpoint is on the pod's node or not. It runs
// before any other pod connects to a NodePort, so that nothing has warmed up a path.
func (e *policyEnv) nodePortFromOwnNode(t *testing.T) {
	np := nodePortOf(t, e.etpCluster, "tcp")
	for _, c := range []struct {
		ns   *framework.NetNS
		node *framework.Node
	}{{e.c1, e.n1}, {e.c2, e.n2}} {
		addr := hostPort(c.node.IP.String(), np)
		failed := 0
		var first error
		for i := 0; i < 10; i++ {
			r, err := c.ns.Echo(context.Background(), "tcp", addr, dialTimeout)
			if err == nil && r.Server != "web-1" {
				err = fmt.Errorf("answered by %s", r)
			}
			if err != nil {
				failed++
				if first == nil {
					first = err
				}
			}
		}
		require.Zero(t, failed, "a pod on %s connecting 10 times to its own node's NodePort %s: %d failed; the first: %v", c.node.Name, addr, failed, first)
	}
}

// externalCluster: with eTP=Cluster both nodes answer, and the backend sees a node address (the
// node's Service virtual IP when the endpoint is local, the node's address when it is remote),
// never the external client.
func (e *policyEnv) externalCluster(t *testing.T) {
	nodeAddrs := map[string]bool{serviceVirtualIP: true, e.n1.IP.String(): true, e.n2.IP.String(): true}
	for _, proto := range []string{"tcp", "udp"} {
		np := nodePortOf(t, e.etpCluster, proto)
		for _, n := range e.sb.Nodes {
			r := echoUntil(t, e.sb.Net.Client, proto, hostPort(n.IP.String(), np), proto+" eTP=Cluster NodePort of "+n.Name+" from the external client",
				fromBackend(map[string]bool{"web-1": true}, ""))
			require.True(t, nodeAddrs[r.ClientIP()], "eTP=Cluster via %s: web-1 saw %s, want a node address (%v)", n.Name, r.ClientIP(), nodeAddrs)
			t.Logf("eTP=Cluster %s NodePort of %s: web-1 saw %s", proto, n.Name, r.ClientIP())
		}
	}
}

// internalLocal: every ClusterIP connection of a pod lands on the endpoint of its own node.
func (e *policyEnv) internalLocal(t *testing.T) {
	waitEachNode(t, e.sb, e.ns, "itp-local", "with one local endpoint per node", everyRow(func(_ *framework.Node, r apiv1.ServicePort) (bool, string) {
		return r.InternalTrafficPolicy == "Local" && r.Endpoints.Local == 1, fmt.Sprintf("iTP %s, endpoints %+v", r.InternalTrafficPolicy, r.Endpoints)
	}))
	addr := hostPort(e.itpLocal.Spec.ClusterIP, 80)
	for _, c := range []struct {
		ns   *framework.NetNS
		want string
	}{{e.c1, "web-1"}, {e.c2, "web-2"}} {
		for _, proto := range []string{"tcp", "udp"} {
			got, _ := countEchoes(t, c.ns, proto, addr, 20)
			require.Equal(t, map[string]int{c.want: 20}, got, "iTP=Local: %s connections from %s must all reach the endpoint on its node", proto, c.ns.Name)
		}
	}
}

// sourceRanges: the external client inside loadBalancerSourceRanges reaches the LB IP; one
// outside the ranges is dropped, though it reaches an LB IP without ranges.
func (e *policyEnv) sourceRanges(t *testing.T) {
	outside, err := e.sb.AddExternalClient("cl2", outsideRangeClient)
	require.NoError(t, err)
	backends := map[string]bool{"web-1": true, "web-2": true}
	echoUntil(t, e.sb.Net.Client, "tcp", hostPort(rangesVIP.String(), 80), "the client inside the source ranges to reach the LB IP", fromBackend(backends, ""))
	echoUntil(t, outside, "tcp", hostPort(etpLocalVIP.String(), 80), "the second client to reach an LB IP without source ranges (its routes work)",
		fromBackend(map[string]bool{"web-1": true}, outsideRangeClient.String()))
	requireDropped(t, outside, "tcp", hostPort(rangesVIP.String(), 80), "a client outside loadBalancerSourceRanges")
	requireDropped(t, outside, "udp", hostPort(rangesVIP.String(), 80), "a client outside loadBalancerSourceRanges")
	got, _ := countEchoes(t, e.sb.Net.Client, "udp", hostPort(rangesVIP.String(), 80), 5)
	require.NotEmpty(t, got, "the client inside the ranges still gets through over UDP")
}

// hairpinToSelf: a pod reaching a Service whose only endpoint is itself gets the answer.
func (e *policyEnv) hairpinToSelf(t *testing.T) {
	for _, proto := range []string{"tcp", "udp", "http"} {
		port := 80
		if proto == "http" {
			port = framework.EchoHTTPPort
		}
		r := echoUntil(t, e.hairpin, proto, hostPort(e.hairpinSvc.Spec.ClusterIP, port), proto+" from the pod hairpin to its own Service",
			fromBackend(map[string]bool{"hairpin": true}, ""))
		t.Logf("hairpin %s: %s", proto, r)
	}
}

// healthResponse is the body of a healthCheckNodePort answer.
type healthResponse struct {
	Service struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"service"`
	LocalEndpoints int `json:"localEndpoints"`
}

// healthCheckNodePort: the eTP=Local Service's health check answers 200 with the local endpoint
// count on node1 and 503 on node2, to the external client (an external load balancer's probe).
func (e *policyEnv) healthCheckNodePort(t *testing.T) {
	hc := int(e.etpLocal.Spec.HealthCheckNodePort)
	require.NotZero(t, hc, "an eTP=Local LoadBalancer Service gets a healthCheckNodePort")
	for _, c := range []struct {
		node   *framework.Node
		status int
		local  int
	}{{e.n1, 200, 1}, {e.n2, 503, 0}} {
		url := "http://" + hostPort(c.node.IP.String(), hc) + "/healthz"
		var status int
		var body healthResponse
		framework.WaitFor(t, 30*time.Second, fmt.Sprintf("%s's health check NodePort %d to answer %d", c.node.Name, hc, c.status),
			func(ctx context.Context) (bool, string, error) {
				code, raw, err := e.sb.Net.Client.HTTPStatus(ctx, url)
				if err != nil {
					return false, err.Error(), nil
				}
				status = code
				if err := json.Unmarshal(raw, &body); err != nil {
					return false, fmt.Sprintf("HTTP %d, body %q: %v", code, raw, err), nil
				}
				return code == c.status, fmt.Sprintf("HTTP %d: %s", code, raw), nil
			})
		require.Equal(t, c.status, status)
		require.Equal(t, c.local, body.LocalEndpoints, "%s: localEndpoints", c.node.Name)
		require.Equal(t, "etp-local", body.Service.Name)
		t.Logf("%s health check NodePort %d: HTTP %d, localEndpoints %d", c.node.Name, hc, status, body.LocalEndpoints)
	}
}

// metricsAndHealthz: inside each node, /metrics (127.0.0.1:10249) shows the installed Services
// and the sync duration, and /healthz and /livez (:10256) answer 200.
func (e *policyEnv) metricsAndHealthz(t *testing.T) {
	for _, n := range e.sb.Nodes {
		ctx := context.Background()
		text, err := n.AgentMetrics(ctx)
		require.NoError(t, err)
		for _, m := range []string{"antrea_proxy_services_installed", "antrea_proxy_endpoints_installed", "antrea_proxy_flows_installed",
			"antrea_proxy_groups_installed", "antrea_proxy_sync_proxy_rules_duration_seconds_count"} {
			v, ok := framework.MetricValue(text, m)
			require.True(t, ok, "%s: /metrics has no %s", n.Name, m)
			require.Positive(t, v, "%s: %s", n.Name, m)
			t.Logf("%s: %s %s", n.Name, m, strconv.FormatFloat(v, 'g', -1, 64))
		}
		// 5 Services of this test are installed; the ones of the default namespace too.
		v, _ := framework.MetricValue(text, "antrea_proxy_services_installed")
		require.GreaterOrEqual(t, v, 5.0, "%s: antrea_proxy_services_installed", n.Name)
		_, ok := framework.MetricValue(text, "antrea_proxy_sync_proxy_rules_duration_seconds_bucket")
		require.True(t, ok, "%s: the sync duration histogram has buckets", n.Name)
		for _, path := range []string{"/healthz", "/livez"} {
			code, raw, err := n.NS.HTTPStatus(ctx, "http://127.0.0.1:10256"+path)
			require.NoError(t, err)
			require.Equal(t, 200, code, "%s: %s answered %s", n.Name, path, raw)
		}
	}
}
