//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver/apiv1"
	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// Addresses of the trace test: a VIP-mode LB IP with loadBalancerSourceRanges (routed to
// node1), a Proxy-mode LB IP (owned by an l4proxy on the router) and an external client outside
// the ranges.
var (
	traceRangedVIP   = netip.MustParseAddr("172.18.0.71")
	traceProxyIP     = netip.MustParseAddr("172.18.1.71")
	traceOutsideHost = netip.MustParseAddr("192.168.77.102")
)

// traceEnv is the workload of TestTrace: web-1 (node1) and web-2 (node2) behind several
// Services, a client pod on node1, and an external client outside the source ranges.
type traceEnv struct {
	sb             *framework.Sandbox
	ns             string
	n1, n2         *framework.Node
	client         *framework.NetNS
	outside        *framework.NetNS
	web1IP, web2IP string
	svcs           map[string]*corev1.Service
	proxyLB        *framework.ProxyLB
}

// TestTrace proves antctl trace on real OVS: for each Service, the agent's trace (over the
// flows and groups the agent remembers installing) agrees with ovs-appctl ofproto/trace on the
// same bridge (the verdict, and OVS's DNAT is one of the listed candidates) and with real
// traffic (a connection lands on a listed candidate, or is refused or dropped as the trace says).
func TestTrace(t *testing.T) {
	sb := framework.StartSandbox(t, framework.SandboxOptions{Agent: framework.AgentOptions{ProxyLoadBalancerIPs: true}})
	e := setupTraceEnv(t, sb)
	t.Run("ClusterIP", e.clusterIP)
	t.Run("NoEndpoints", e.noEndpoints)
	t.Run("IPModeProxy", e.ipModeProxy)
	t.Run("ExternalTrafficPolicyLocal", e.externalLocal)
	t.Run("SourceRanges", e.sourceRanges)
}

func setupTraceEnv(t *testing.T, sb *framework.Sandbox) *traceEnv {
	ctx := context.Background()
	e := &traceEnv{sb: sb, ns: "trace", n1: sb.Nodes[0], n2: sb.Nodes[1], svcs: map[string]*corev1.Service{}}
	require.NoError(t, sb.CreateNamespace(ctx, e.ns))
	pods, err := sb.RunPods(ctx,
		framework.EchoPod(e.ns, "web-1", e.n1, map[string]string{"app": "web", "solo": "yes"}),
		framework.EchoPod(e.ns, "web-2", e.n2, map[string]string{"app": "web"}),
		framework.EchoPod(e.ns, "client", e.n1, map[string]string{"app": "client"}),
	)
	require.NoError(t, err)
	e.web1IP, e.web2IP = pods[0].Status.PodIP, pods[1].Status.PodIP
	e.client, err = sb.PodNetNS(pods[2])
	require.NoError(t, err)
	e.outside, err = sb.AddExternalClient("tracex", traceOutsideHost)
	require.NoError(t, err)

	local := echoService(e.ns, "local", "", corev1.ServiceTypeNodePort)
	local.Spec.Selector = map[string]string{"solo": "yes"}
	local.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	ranged := echoService(e.ns, "ranged", "web", corev1.ServiceTypeLoadBalancer)
	ranged.Spec.LoadBalancerSourceRanges = []string{framework.ClientIP.String() + "/32"}
	for _, svc := range []*corev1.Service{
		echoService(e.ns, "web", "web", corev1.ServiceTypeClusterIP),
		echoService(e.ns, "empty", "nothing", corev1.ServiceTypeClusterIP),
		echoService(e.ns, "proxied", "web", corev1.ServiceTypeLoadBalancer),
		local, ranged,
	} {
		e.svcs[svc.Name] = createService(t, sb, svc)
	}
	require.NoError(t, sb.SetLBIngress(ctx, e.ns, "ranged", traceRangedVIP, corev1.LoadBalancerIPModeVIP))
	require.NoError(t, sb.SetLBIngress(ctx, e.ns, "proxied", traceProxyIP, corev1.LoadBalancerIPModeProxy))
	for _, name := range []string{"web", "proxied", "ranged"} {
		require.NoError(t, sb.WaitEndpoints(ctx, e.ns, name, e.web1IP, e.web2IP))
	}
	require.NoError(t, sb.WaitEndpoints(ctx, e.ns, "local", e.web1IP))
	require.NoError(t, sb.WaitNodePort(ctx, "tcp", nodePortOf(t, e.svcs["local"], "tcp")))
	require.NoError(t, sb.WaitLBApplied(ctx, e.ns, "ranged", traceRangedVIP, true))
	waitEachNode(t, sb, e.ns, "local", "with web-1 local to node1 only", everyRow(func(n *framework.Node, r apiv1.ServicePort) (bool, string) {
		want := 0
		if n == e.n1 {
			want = 1
		}
		return r.Endpoints.Ready == 1 && r.Endpoints.Local == want, fmt.Sprintf("endpoints %+v, want %d local", r.Endpoints, want)
	}))
	waitEachNode(t, sb, e.ns, "web", "with 2 endpoints", everyRow(func(_ *framework.Node, r apiv1.ServicePort) (bool, string) {
		return r.Protocol != "TCP" || r.Buckets == 2, fmt.Sprintf("%d buckets", r.Buckets)
	}))
	e.proxyLB, err = sb.StartProxyLB(traceProxyIP, 80, hostPort(e.n1.IP.String(), nodePortOf(t, e.svcs["proxied"], "tcp")))
	require.NoError(t, err)
	t.Cleanup(e.proxyLB.Stop)
	return e
}

// trace asks node's agent for the trace, runs ofproto/trace on the same packet and checks that
// they agree: the same verdict, and OVS's DNAT (its own hash's bucket) among the candidates.
func (e *traceEnv) trace(t *testing.T, node *framework.Node, from, to string) *apiv1.Trace {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tr, err := node.API.Trace(ctx, from, to)
	require.NoError(t, err)
	ovs, err := node.TraceOVS(tr.Packet)
	require.NoError(t, err)
	t.Logf("%s: trace from %s to %s: %s to %q in %s, candidates %v, NAT %v, why %q; ofproto/trace: %s, datapath actions %q",
		node.Name, from, to, tr.Verdict, tr.Output, tr.Table, candidateAddrs(tr), tr.NAT, tr.Reasons, ovs.Verdict(), ovs.DatapathActions)
	require.Equal(t, tr.Verdict, ovs.Verdict(), "the agent's verdict and ofproto/trace's on %s differ; ofproto/trace:\n%s", node.Name, ovs.Output)
	dnats := ovs.DNATs()
	if tr.Chosen == "" {
		require.Empty(t, dnats, "the agent's trace DNATs nothing, ofproto/trace does:\n%s", ovs.Output)
	} else {
		require.Len(t, dnats, 1, "ofproto/trace:\n%s", ovs.Output)
		require.Contains(t, candidateAddrs(tr), dnats[0], "OVS's DNAT is not one of the agent's candidates; ofproto/trace:\n%s", ovs.Output)
	}
	return tr
}

// antctl runs antctl trace (args) on node, logs its text output and checks that its JSON output
// has the API trace's verdict and candidates.
func (e *traceEnv) antctl(t *testing.T, node *framework.Node, want *apiv1.Trace, args ...string) {
	t.Helper()
	text, err := node.Antctl(args...)
	require.NoError(t, err)
	t.Logf("$ antctl %s\n%s", strings.Join(args, " "), text)
	require.Contains(t, text, "Verdict:    "+want.Verdict)
	js, err := node.Antctl(append(args, "-o", "json")...)
	require.NoError(t, err)
	var got apiv1.Trace
	require.NoError(t, json.Unmarshal([]byte(js), &got))
	require.Equal(t, want.Verdict, got.Verdict)
	require.Equal(t, candidateAddrs(want), candidateAddrs(&got))
}

func candidateAddrs(tr *apiv1.Trace) []string {
	out := make([]string, len(tr.Candidates))
	for i, c := range tr.Candidates {
		out[i] = c.Endpoint
	}
	return out
}

func requireReason(t *testing.T, tr *apiv1.Trace, want string) {
	t.Helper()
	require.True(t, slices.ContainsFunc(tr.Reasons, func(r string) bool { return strings.Contains(r, want) }),
		"want a reason with %q, got %q", want, tr.Reasons)
}

// clusterIP: both endpoints are candidates; OVS's pick is one of them; 20 real connections land
// only on candidates.
func (e *traceEnv) clusterIP(t *testing.T) {
	addr := hostPort(e.svcs["web"].Spec.ClusterIP, 80)
	tr := e.trace(t, e.n1, "pod:"+e.ns+"/client", addr)
	want := []string{hostPort(e.web1IP, framework.EchoPort), hostPort(e.web2IP, framework.EchoPort)}
	require.ElementsMatch(t, want, candidateAddrs(tr))
	require.Equal(t, "output", tr.Verdict)
	require.Empty(t, tr.Reasons)
	e.antctl(t, e.n1, tr, "trace", "--from", "pod", e.ns+"/client", "--to", addr)
	byServer, _ := countEchoes(t, e.client, "tcp", addr, 20)
	names := map[string]string{"web-1": e.web1IP, "web-2": e.web2IP}
	for server := range byServer {
		require.Contains(t, candidateAddrs(tr), hostPort(names[server], framework.EchoPort), "a connection landed on %s, not a candidate", server)
	}
	t.Logf("20 connections: %v", byServer)
}

// noEndpoints: the trace rejects (controller) and says why; a real connection is refused.
func (e *traceEnv) noEndpoints(t *testing.T) {
	addr := hostPort(e.svcs["empty"].Spec.ClusterIP, 80)
	tr := e.trace(t, e.n1, "pod:"+e.ns+"/client", addr)
	require.Equal(t, "reject", tr.Verdict)
	requireReason(t, tr, "has no endpoint")
	e.antctl(t, e.n1, tr, "trace", "--from", "pod", e.ns+"/client", "--to", addr)
	requireRefused(t, e.client, "tcp", addr)
}

// ipModeProxy: the node does not capture a Proxy-mode LB IP: the pod's connection leaves through
// the gateway unDNATed, and the external load balancer (the l4proxy) relays it.
func (e *traceEnv) ipModeProxy(t *testing.T) {
	addr := hostPort(traceProxyIP.String(), 80)
	tr := e.trace(t, e.n1, "pod:"+e.ns+"/client", addr)
	require.Equal(t, "output", tr.Verdict)
	require.Empty(t, tr.Candidates)
	require.True(t, strings.HasPrefix(tr.Output, "gateway "), "output %q", tr.Output)
	requireReason(t, tr, "skipped: ipMode=Proxy")
	ctx := context.Background()
	before, err := e.proxyLB.Stats(ctx)
	require.NoError(t, err)
	r, err := e.client.Echo(ctx, "tcp", addr, dialTimeout)
	require.NoError(t, err)
	after, err := e.proxyLB.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, before.TCP+1, after.TCP, "the external load balancer must have relayed the connection (answered by %s)", r)
}

// externalLocal: from outside, node2 (no local endpoint) drops the eTP=Local NodePort and the
// trace says why; node1 serves it with its local endpoint only.
func (e *traceEnv) externalLocal(t *testing.T) {
	np := nodePortOf(t, e.svcs["local"], "tcp")
	from := "external:" + framework.ClientIP.String()
	tr := e.trace(t, e.n2, from, hostPort(e.n2.IP.String(), np))
	require.Equal(t, "drop", tr.Verdict)
	requireReason(t, tr, "externalTrafficPolicy=Local")
	e.antctl(t, e.n2, tr, "trace", "--from", from, "--to", hostPort(e.n2.IP.String(), np))
	requireDropped(t, e.sb.Net.Client, "tcp", hostPort(e.n2.IP.String(), np), "eTP=Local NodePort of node2 traced as dropped")

	tr = e.trace(t, e.n1, from, hostPort(e.n1.IP.String(), np))
	require.Equal(t, []string{hostPort(e.web1IP, framework.EchoPort)}, candidateAddrs(tr))
	r, err := e.sb.Net.Client.Echo(context.Background(), "tcp", hostPort(e.n1.IP.String(), np), dialTimeout)
	require.NoError(t, err)
	require.Equal(t, "web-1", r.Server)
}

// sourceRanges: a client outside loadBalancerSourceRanges is dropped (trace and traffic); the
// client inside them reaches a candidate.
func (e *traceEnv) sourceRanges(t *testing.T) {
	addr := hostPort(traceRangedVIP.String(), 80)
	tr := e.trace(t, e.n1, "external:"+traceOutsideHost.String(), addr)
	require.Equal(t, "drop", tr.Verdict)
	requireReason(t, tr, "not in loadBalancerSourceRanges")
	requireDropped(t, e.outside, "tcp", addr, "LB IP from outside its source ranges")

	tr = e.trace(t, e.n1, "external:"+framework.ClientIP.String(), addr)
	require.Len(t, tr.Candidates, 2)
	r, err := e.sb.Net.Client.Echo(context.Background(), "tcp", addr, dialTimeout)
	require.NoError(t, err)
	ip := map[string]string{"web-1": e.web1IP, "web-2": e.web2IP}[r.Server]
	require.Contains(t, candidateAddrs(tr), net.JoinHostPort(ip, strconv.Itoa(framework.EchoPort)))
}
