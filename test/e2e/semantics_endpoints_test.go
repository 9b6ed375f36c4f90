//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver/apiv1"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// affinityTimeout is the sessionAffinity timeout of the affinity test.
const affinityTimeout = 5

// endpointsEnv is the workload of TestSemanticsEndpoints: a client pod on node1 and Services
// whose endpoints the tests change.
type endpointsEnv struct {
	sb       *framework.Sandbox
	ns       string
	n1, n2   *framework.Node
	client   *framework.NetNS
	clientIP string
}

// TestSemanticsEndpoints proves the endpoint semantics on the two-node sandbox with real
// traffic: session affinity and its expiry, a UDP client that keeps its source port across an
// endpoint replacement, reject for a Service without endpoints, and terminating endpoints.
func TestSemanticsEndpoints(t *testing.T) {
	sb := framework.StartSandbox(t, framework.SandboxOptions{Agent: framework.AgentOptions{ProxyLoadBalancerIPs: true}})
	ctx := context.Background()
	e := &endpointsEnv{sb: sb, ns: "endpoints", n1: sb.Nodes[0], n2: sb.Nodes[1]}
	require.NoError(t, sb.CreateNamespace(ctx, e.ns))
	pods, err := sb.RunPods(ctx, framework.EchoPod(e.ns, "client", e.n1, map[string]string{"app": "client"}))
	require.NoError(t, err)
	e.clientIP = pods[0].Status.PodIP
	e.client, err = sb.PodNetNS(pods[0])
	require.NoError(t, err)
	t.Run("SessionAffinity", e.sessionAffinity)
	t.Run("UDPEndpointReplaced", e.udpEndpointReplaced)
	t.Run("Reject", e.reject)
	t.Run("TerminatingEndpoints", e.terminating)
}

// runPods runs echo pods named prefix-1.. alternately on node1 and node2, labelled app=prefix.
func (e *endpointsEnv) runPods(t *testing.T, prefix string, n int) []*corev1.Pod {
	t.Helper()
	var pods []*corev1.Pod
	for i := 0; i < n; i++ {
		pods = append(pods, framework.EchoPod(e.ns, fmt.Sprintf("%s-%d", prefix, i+1), e.sb.Nodes[i%2], map[string]string{"app": prefix}))
	}
	got, err := e.sb.RunPods(context.Background(), pods...)
	require.NoError(t, err)
	return got
}

func podIPs(pods []*corev1.Pod) []string {
	var ips []string
	for _, p := range pods {
		ips = append(ips, p.Status.PodIP)
	}
	return ips
}

// learnedFlows lists the client's learned affinity flows for clusterIP in node's table 13.
func learnedFlows(t *testing.T, node *framework.Node, clientIP, clusterIP string) []string {
	t.Helper()
	flows, err := node.TableFlows(int(pipeline.TableSessionAffinity))
	require.NoError(t, err)
	var out []string
	for _, f := range flows {
		if strings.Contains(f, "nw_src="+clientIP+",") && strings.Contains(f, "nw_dst="+clusterIP+",") {
			out = append(out, f)
		}
	}
	return out
}

// sessionAffinity: with ClientIP affinity, 50 connections of one client land on one endpoint
// and the node has learned the flow; it disappears timeoutSeconds after the last connection,
// and connections after that are balanced again (then stick to their new endpoint).
func (e *endpointsEnv) sessionAffinity(t *testing.T) {
	pods := e.runPods(t, "aff", 4)
	svc := echoService(e.ns, "aff", "aff", corev1.ServiceTypeClusterIP)
	svc.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
	timeout := int32(affinityTimeout)
	svc.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: &timeout}}
	svc = createService(t, e.sb, svc)
	require.NoError(t, e.sb.WaitEndpoints(context.Background(), e.ns, "aff", podIPs(pods)...))
	waitEachNode(t, e.sb, e.ns, "aff", "with 4 endpoints and ClientIP affinity", everyRow(func(_ *framework.Node, r apiv1.ServicePort) (bool, string) {
		return r.Buckets == 4 && r.SessionAffinity.Type == "ClientIP" && r.SessionAffinity.TimeoutSeconds == affinityTimeout,
			fmt.Sprintf("%d buckets, affinity %+v", r.Buckets, r.SessionAffinity)
	}))
	addr := hostPort(svc.Spec.ClusterIP, 80)
	got, _ := countEchoes(t, e.client, "tcp", addr, 50)
	last := time.Now()
	require.Len(t, got, 1, "50 connections of one client with ClientIP affinity land on one endpoint; got %v", got)
	first := serverNames(got)[0]
	learned := learnedFlows(t, e.n1, e.clientIP, svc.Spec.ClusterIP)
	require.NotEmpty(t, learned, "node1 learned the client's affinity flow in table %d", pipeline.TableSessionAffinity)
	t.Logf("50/50 connections to %s; learned: %s", first, learned[0])

	// Each round waits for the learned flow to expire, then connects once: the connection is
	// balanced afresh. With 4 endpoints, 8 rounds all landing on the first one has a
	// probability of 4^-8.
	seen := map[string]int{first: 1}
	for round := 1; round <= 8 && len(seen) < 2; round++ {
		framework.WaitFor(t, 3*affinityTimeout*time.Second, "node1's learned affinity flow to expire", func(context.Context) (bool, string, error) {
			f := learnedFlows(t, e.n1, e.clientIP, svc.Spec.ClusterIP)
			return len(f) == 0, strings.Join(f, "; "), nil
		})
		idle := time.Since(last)
		require.GreaterOrEqual(t, idle, (affinityTimeout-1)*time.Second, "the learned flow must last about timeoutSeconds (%ds) after the last connection, not %v", affinityTimeout, idle)
		r, err := e.client.Echo(context.Background(), "tcp", addr, dialTimeout)
		require.NoError(t, err)
		last = time.Now()
		seen[r.Server]++
		t.Logf("round %d: the learned flow expired %v after the last connection; the next connection went to %s", round, idle.Round(100*time.Millisecond), r.Server)
		require.NotEmpty(t, learnedFlows(t, e.n1, e.clientIP, svc.Spec.ClusterIP), "the new connection learned a flow again")
	}
	require.GreaterOrEqual(t, len(seen), 2, "after the affinity expired, connections are balanced over the endpoints again; went to %v", seen)
}

// udpReply is one answer (or error) the DNS-like client got.
type udpReply struct {
	at     time.Time
	server string
	err    error
}

// udpClient sends a datagram every 100ms from one socket (one source port) and records the
// answers, as a DNS resolver with a long-lived socket does.
type udpClient struct {
	conn net.Conn
	mu   sync.Mutex
	got  []udpReply
	stop chan struct{}
	done chan struct{}
}

func startUDPClient(t *testing.T, ns *framework.NetNS, addr string) *udpClient {
	t.Helper()
	conn, err := ns.Dial(context.Background(), "udp", addr)
	require.NoError(t, err)
	c := &udpClient{conn: conn, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		buf := make([]byte, 512)
		for {
			select {
			case <-c.stop:
				return
			default:
			}
			_, err := conn.Write([]byte("query\n"))
			var rep udpReply
			if err == nil {
				_ = conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
				var n int
				n, err = conn.Read(buf)
				if err == nil {
					r, perr := framework.ParseEchoReply(strings.TrimSpace(string(buf[:n])))
					rep.server, err = r.Server, perr
				}
			}
			rep.at, rep.err = time.Now(), err
			c.mu.Lock()
			c.got = append(c.got, rep)
			c.mu.Unlock()
			if err != nil && !isTimeout(err) {
				time.Sleep(100 * time.Millisecond) // ECONNREFUSED comes back at once
			}
		}
	}()
	t.Cleanup(c.halt)
	return c
}

func (c *udpClient) halt() {
	select {
	case <-c.stop:
	default:
		close(c.stop)
		<-c.done
		_ = c.conn.Close()
	}
}

// firstFrom returns the time of the first answer from server at or after since.
func (c *udpClient) firstFrom(server string, since time.Time) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.got {
		if r.err == nil && r.server == server && !r.at.Before(since) {
			return r.at, true
		}
	}
	return time.Time{}, false
}

// udpEndpointReplaced: a client that keeps one UDP socket is answered by the new endpoint within
// one sync after its only endpoint pod is replaced by one on another node (a new address), so
// stale conntrack entries were flushed.
func (e *endpointsEnv) udpEndpointReplaced(t *testing.T) {
	ctx := context.Background()
	old, err := e.sb.RunPods(ctx, framework.EchoPod(e.ns, "dns-1", e.n2, map[string]string{"app": "dns"}))
	require.NoError(t, err)
	svc := createService(t, e.sb, echoService(e.ns, "dns", "dns", corev1.ServiceTypeClusterIP))
	require.NoError(t, e.sb.WaitEndpoints(ctx, e.ns, "dns", old[0].Status.PodIP))
	require.NoError(t, e.sb.WaitProgrammed(ctx, e.ns, "dns", "with dns-1", framework.HasEndpoints(1)))
	c := startUDPClient(t, e.client, hostPort(svc.Spec.ClusterIP, 80))
	framework.WaitFor(t, 10*time.Second, "the UDP client to be answered by dns-1", func(context.Context) (bool, string, error) {
		_, ok := c.firstFrom("dns-1", time.Time{})
		return ok, "", nil
	})

	require.NoError(t, e.sb.DeletePod(ctx, e.ns, "dns-1"))
	deleted := time.Now()
	created, err := e.sb.RunPods(ctx, framework.EchoPod(e.ns, "dns-2", e.n1, map[string]string{"app": "dns"}))
	require.NoError(t, err)
	ready := time.Now()
	require.NotEqual(t, old[0].Status.PodIP, created[0].Status.PodIP)
	require.NoError(t, e.sb.WaitEndpoints(ctx, e.ns, "dns", created[0].Status.PodIP))
	waitEachNode(t, e.sb, e.ns, "dns", "with dns-2 as the only endpoint", everyRow(func(_ *framework.Node, r apiv1.ServicePort) (bool, string) {
		return r.Buckets == 1 && r.Endpoints.Total == 1, fmt.Sprintf("%d buckets, endpoints %+v", r.Buckets, r.Endpoints)
	}))
	programmed := time.Now()
	var answered time.Time
	framework.WaitFor(t, syncBound, "the same UDP socket to be answered by dns-2 within one sync after the agents programmed it", func(context.Context) (bool, string, error) {
		var ok bool
		answered, ok = c.firstFrom("dns-2", deleted)
		return ok, "", nil
	})
	c.halt()
	var refused, timeouts int
	for _, r := range c.got {
		if r.at.After(deleted) && r.err != nil {
			if errors.Is(r.err, syscall.ECONNREFUSED) {
				refused++
			} else {
				timeouts++
			}
		}
	}
	t.Logf("dns-2 Ready %v after dns-1 was gone; programmed on every node %v later; the client's socket (%s) was answered by dns-2 %v after dns-2 was Ready (%v after every node reported it programmed); meanwhile %d refused and %d unanswered queries",
		ready.Sub(deleted).Round(time.Millisecond), programmed.Sub(ready).Round(time.Millisecond), c.conn.LocalAddr(),
		answered.Sub(ready).Round(time.Millisecond), answered.Sub(programmed).Round(time.Millisecond), refused, timeouts)
}

// reject: connections to a Service without endpoints are refused at once: a TCP reset, and an
// ICMP port unreachable that a connected UDP socket reads as ECONNREFUSED.
func (e *endpointsEnv) reject(t *testing.T) {
	svc := createService(t, e.sb, echoService(e.ns, "empty", "nothing", corev1.ServiceTypeClusterIP))
	waitEachNode(t, e.sb, e.ns, "empty", "without endpoints", everyRow(func(_ *framework.Node, r apiv1.ServicePort) (bool, string) {
		return r.Buckets == 0 && r.Flows > 0, fmt.Sprintf("%d buckets, %d flows", r.Buckets, r.Flows)
	}))
	addr := hostPort(svc.Spec.ClusterIP, 80)
	for i := 0; i < 3; i++ {
		requireRefused(t, e.client, "tcp", addr)
		requireRefused(t, e.client, "udp", addr)
	}
}

// requireRefused checks that one proto connection from ns to addr is refused in under a second.
func requireRefused(t *testing.T, ns *framework.NetNS, proto, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	c, err := ns.Dial(ctx, proto, addr)
	if err == nil {
		defer c.Close()
		_ = c.SetDeadline(start.Add(time.Second))
		if _, err = c.Write([]byte("ping\n")); err == nil {
			_, err = c.Read(make([]byte, 512))
		}
	}
	took := time.Since(start)
	require.Error(t, err, "%s to %s without endpoints must be refused", proto, addr)
	require.True(t, errors.Is(err, syscall.ECONNREFUSED), "%s to %s without endpoints: want ECONNREFUSED within 1s, got after %v: %v", proto, addr, took.Round(time.Millisecond), err)
	require.Less(t, took, time.Second)
	t.Logf("%s to %s refused after %v", proto, addr, took.Round(time.Microsecond))
}

// endpointSlice is the EndpointSlice of the selectorless Service svc, written by the test as an
// endpoint controller would: each endpoint is (pod, ready, serving, terminating).
func endpointSlice(namespace, svc string, eps ...sliceEndpoint) *discoveryv1.EndpointSlice {
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: svc + "-e2e", Labels: map[string]string{
			discoveryv1.LabelServiceName: svc, discoveryv1.LabelManagedBy: "e2e.antrea-proxy.test",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: new("tcp"), Port: new(int32(framework.EchoPort)), Protocol: new(corev1.ProtocolTCP)}},
	}
	for _, ep := range eps {
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{
			Addresses: []string{ep.pod.Status.PodIP},
			NodeName:  &ep.pod.Spec.NodeName,
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: namespace, Name: ep.pod.Name, UID: ep.pod.UID},
			Conditions: discoveryv1.EndpointConditions{
				Ready: new(ep.ready), Serving: new(ep.serving), Terminating: new(ep.terminating),
			},
		})
	}
	return sl
}

type sliceEndpoint struct {
	pod                         *corev1.Pod
	ready, serving, terminating bool
}

// terminating: with a ready endpoint, a serving-and-terminating one gets no new connection;
// when no endpoint is ready, the serving terminating one gets them all (KEP-1669); when it stops
// serving too, connections are refused.
func (e *endpointsEnv) terminating(t *testing.T) {
	ctx := context.Background()
	pods := e.runPods(t, "term", 2) // term-1 on node1, term-2 on node2; no Service selects them
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "term"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
			{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(framework.EchoPort)},
		}},
	}
	svc = createService(t, e.sb, svc)
	slices := e.sb.CP.Client.DiscoveryV1().EndpointSlices(e.ns)
	sl, err := slices.Create(ctx, endpointSlice(e.ns, "term",
		sliceEndpoint{pods[0], true, true, false}, sliceEndpoint{pods[1], false, true, true}), metav1.CreateOptions{})
	require.NoError(t, err)
	addr := hostPort(svc.Spec.ClusterIP, 80)
	steps := []struct {
		what      string
		eps       []sliceEndpoint
		ready     int
		buckets   int
		wantOnly  string
		wantRefus bool
	}{
		{"term-1 ready, term-2 serving and terminating", nil, 1, 1, "term-1", false},
		{"term-1 terminating and not serving, term-2 serving and terminating",
			[]sliceEndpoint{{pods[0], false, false, true}, {pods[1], false, true, true}}, 0, 1, "term-2", false},
		{"both terminating and not serving", []sliceEndpoint{{pods[0], false, false, true}, {pods[1], false, false, true}}, 0, 0, "", true},
	}
	for _, st := range steps {
		if st.eps != nil {
			sl.Endpoints = endpointSlice(e.ns, "term", st.eps...).Endpoints
			sl, err = slices.Update(ctx, sl, metav1.UpdateOptions{})
			require.NoError(t, err)
		}
		waitEachNode(t, e.sb, e.ns, "term", "with "+st.what, everyRow(func(_ *framework.Node, r apiv1.ServicePort) (bool, string) {
			return r.Endpoints.Total == 2 && r.Endpoints.Ready == st.ready && r.Buckets == st.buckets,
				fmt.Sprintf("endpoints %+v, %d buckets", r.Endpoints, r.Buckets)
		}))
		if st.wantRefus {
			requireRefused(t, e.client, "tcp", addr)
			continue
		}
		got, _ := countEchoes(t, e.client, "tcp", addr, 20)
		require.Equal(t, map[string]int{st.wantOnly: 20}, got, "%s: every connection goes to %s", st.what, st.wantOnly)
	}
}
