//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// dialTimeout bounds one connection attempt through the data path.
const dialTimeout = 5 * time.Second

// echoService is a Service of type typ selecting app=<app> on port 80 (TCP and UDP) to the
// echo port and on port 8081 to the echo server's HTTP port.
func echoService(namespace, name, app string, typ corev1.ServiceType) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.ServiceSpec{
			Type:     typ,
			Selector: map[string]string{"app": app},
			Ports: []corev1.ServicePort{
				{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(framework.EchoPort)},
				{Name: "udp", Protocol: corev1.ProtocolUDP, Port: 80, TargetPort: intstr.FromInt32(framework.EchoPort)},
				{Name: "http", Protocol: corev1.ProtocolTCP, Port: 8081, TargetPort: intstr.FromInt32(framework.EchoHTTPPort)},
			},
		},
	}
}

// nodePortOf returns the NodePort of the Service's port called name.
func nodePortOf(t *testing.T, svc *corev1.Service, name string) int {
	t.Helper()
	for _, p := range svc.Spec.Ports {
		if p.Name == name {
			require.NotZero(t, p.NodePort, "Service %s port %s has no NodePort", svc.Name, name)
			return int(p.NodePort)
		}
	}
	t.Fatalf("Service %s has no port %s", svc.Name, name)
	return 0
}

func hostPort(ip string, port int) string { return net.JoinHostPort(ip, strconv.Itoa(port)) }

// echoUntil polls proto echoes from ns to addr until check accepts a reply; it fails naming
// what never happened and the last reply or error.
func echoUntil(t *testing.T, ns *framework.NetNS, proto, addr, what string, check func(framework.EchoReply) (bool, string)) framework.EchoReply {
	t.Helper()
	var got framework.EchoReply
	framework.WaitFor(t, time.Minute, what, func(ctx context.Context) (bool, string, error) {
		r, err := ns.Echo(ctx, proto, addr, dialTimeout)
		if err != nil {
			t.Logf("%s: attempt failed: %v", what, err)
			return false, err.Error(), nil
		}
		got = r
		ok, why := check(r)
		return ok, fmt.Sprintf("reply %s: %s", r, why), nil
	})
	return got
}

// fromBackend accepts a reply from one of backends that saw a client of wantClient ("" for any).
func fromBackend(backends map[string]bool, wantClient string) func(framework.EchoReply) (bool, string) {
	return func(r framework.EchoReply) (bool, string) {
		if !backends[r.Server] {
			return false, "not answered by a backend"
		}
		if wantClient != "" && r.ClientIP() != wantClient {
			return false, "the backend saw another client than " + wantClient
		}
		return true, ""
	}
}

// TestServices runs the two-node sandbox and checks the node data path and the basic Service
// types end to end: pod to pod across nodes, ClusterIP (TCP, UDP, HTTP) and NodePort from a
// pod, and NodePort from the external client on the underlay.
func TestServices(t *testing.T) {
	sb := framework.StartSandbox(t, framework.SandboxOptions{Agent: framework.AgentOptions{ProxyLoadBalancerIPs: true}})
	ctx := context.Background()
	const ns = "services"
	require.NoError(t, sb.CreateNamespace(ctx, ns))
	n1, n2 := sb.Nodes[0], sb.Nodes[1]
	labels := map[string]string{"app": "web"}
	pods, err := sb.RunPods(ctx,
		framework.EchoPod(ns, "web-1", n1, labels),
		framework.EchoPod(ns, "web-2", n2, labels),
		framework.EchoPod(ns, "client", n1, map[string]string{"app": "client"}),
	)
	require.NoError(t, err)
	web1, web2, client := pods[0], pods[1], pods[2]
	clientNS, err := sb.PodNetNS(client)
	require.NoError(t, err)
	backends := map[string]bool{"web-1": true, "web-2": true}

	t.Run("PodToPodAcrossNodes", func(t *testing.T) {
		r := echoUntil(t, clientNS, "tcp", hostPort(web2.Status.PodIP, framework.EchoPort),
			"client on node1 to reach web-2 on node2 directly", fromBackend(map[string]bool{"web-2": true}, client.Status.PodIP))
		require.Equal(t, "web-2", r.Server)
		r = echoUntil(t, clientNS, "tcp", hostPort(web1.Status.PodIP, framework.EchoPort),
			"client to reach web-1 on its own node", fromBackend(map[string]bool{"web-1": true}, client.Status.PodIP))
		require.Equal(t, "web-1", r.Server)
	})

	svc, err := sb.CP.Client.CoreV1().Services(ns).Create(ctx, echoService(ns, "web", "web", corev1.ServiceTypeNodePort), metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, sb.WaitEndpoints(ctx, ns, "web", web1.Status.PodIP, web2.Status.PodIP))
	require.NoError(t, sb.WaitProgrammed(ctx, ns, "web", "with both endpoints", framework.HasEndpoints(2)))

	t.Run("ClusterIPFromPod", func(t *testing.T) {
		for _, proto := range []string{"tcp", "udp"} {
			seen := map[string]bool{}
			for i := 0; i < 20 && len(seen) < 2; i++ {
				r := echoUntil(t, clientNS, proto, hostPort(svc.Spec.ClusterIP, 80), proto+" ClusterIP from the client pod to be answered by a backend that saw the pod's IP",
					fromBackend(backends, client.Status.PodIP))
				seen[r.Server] = true
			}
			require.Len(t, seen, 2, "%s connections to the ClusterIP are balanced over both backends; answered by %v", proto, seen)
		}
		echoUntil(t, clientNS, "http", hostPort(svc.Spec.ClusterIP, 8081), "HTTP ClusterIP from the client pod",
			fromBackend(backends, client.Status.PodIP))
	})

	t.Run("NodePortFromPod", func(t *testing.T) {
		port := nodePortOf(t, svc, "tcp")
		for _, n := range sb.Nodes {
			echoUntil(t, clientNS, "tcp", hostPort(n.IP.String(), port), "NodePort "+n.Name+" from the client pod to be answered by a backend",
				fromBackend(backends, ""))
		}
	})

	t.Run("NodePortFromExternalClient", func(t *testing.T) {
		for _, name := range []string{"tcp", "udp"} {
			port := nodePortOf(t, svc, name)
			for _, n := range sb.Nodes {
				r := echoUntil(t, sb.Net.Client, name, hostPort(n.IP.String(), port),
					name+" NodePort of "+n.Name+" from the external client to be answered by a backend", fromBackend(backends, ""))
				// eTP=Cluster: the node SNATs, so the backend never sees the external client.
				require.NotEqual(t, framework.ClientIP.String(), r.ClientIP(), "eTP=Cluster NodePort: the backend must see a node address, not the client")
			}
		}
	})
}
