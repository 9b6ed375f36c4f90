//go:build e2e

package e2e

import (
	"context"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// podIPOf returns the Pod's address of the given family (IPv6 when v6), failing t if it has none.
func podIPOf(t *testing.T, pod *corev1.Pod, v6 bool) string {
	t.Helper()
	for _, ip := range pod.Status.PodIPs {
		if a, err := netip.ParseAddr(ip.IP); err == nil && a.Is6() == v6 {
			return a.String()
		}
	}
	t.Fatalf("pod %s/%s has no IPv6=%v address among %v", pod.Namespace, pod.Name, v6, pod.Status.PodIPs)
	return ""
}

// clusterIPOf returns the Service's ClusterIP of the given family, failing t if it has none.
func clusterIPOf(t *testing.T, svc *corev1.Service, v6 bool) string {
	t.Helper()
	for _, ip := range svc.Spec.ClusterIPs {
		if a, err := netip.ParseAddr(ip); err == nil && a.Is6() == v6 {
			return a.String()
		}
	}
	t.Fatalf("Service %s/%s has no IPv6=%v ClusterIP among %v", svc.Namespace, svc.Name, v6, svc.Spec.ClusterIPs)
	return ""
}

// TestSemanticsIPv6 checks dual-stack Services over a dual-stack sandbox: a
// RequireDualStack NodePort Service whose primary family is IPv6. A pod reaches both backends
// through the IPv6 ClusterIP (and the IPv4 one), the backends seeing the pod's own IPv6
// address; a pod and the external client on the IPv6 underlay reach the NodePort on each
// node's IPv6 address.
func TestSemanticsIPv6(t *testing.T) {
	sb := framework.StartSandbox(t, framework.SandboxOptions{DualStack: true})
	ctx := context.Background()
	const ns = "ipv6"
	require.NoError(t, sb.CreateNamespace(ctx, ns))
	n1, n2 := sb.Nodes[0], sb.Nodes[1]
	require.True(t, n1.IP6.IsValid() && n2.IP6.IsValid(), "dual-stack nodes have IPv6 underlay addresses")
	labels := map[string]string{"app": "web6"}
	pods, err := sb.RunPods(ctx,
		framework.EchoPod(ns, "web6-1", n1, labels),
		framework.EchoPod(ns, "web6-2", n2, labels),
		framework.EchoPod(ns, "client6", n1, map[string]string{"app": "client6"}),
	)
	require.NoError(t, err)
	web1, web2, client := pods[0], pods[1], pods[2]
	for _, p := range pods {
		require.Len(t, p.Status.PodIPs, 2, "pod %s has an address of each family: %v", p.Name, p.Status.PodIPs)
	}
	clientNS, err := sb.PodNetNS(client)
	require.NoError(t, err)
	client6, client4 := podIPOf(t, client, true), podIPOf(t, client, false)
	backends := map[string]bool{"web6-1": true, "web6-2": true}

	t.Run("PodToPodIPv6AcrossNodes", func(t *testing.T) {
		echoUntil(t, clientNS, "tcp", hostPort(podIPOf(t, web2, true), framework.EchoPort),
			"client6 on node1 to reach web6-2 on node2 over IPv6", fromBackend(map[string]bool{"web6-2": true}, client6))
	})

	spec := echoService(ns, "web6", "web6", corev1.ServiceTypeNodePort)
	policy := corev1.IPFamilyPolicyRequireDualStack
	spec.Spec.IPFamilyPolicy = &policy
	spec.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}
	svc := createService(t, sb, spec)
	require.Len(t, svc.Spec.ClusterIPs, 2, "a RequireDualStack Service has a ClusterIP of each family")
	require.True(t, netip.MustParseAddr(svc.Spec.ClusterIP).Is6(), "the primary ClusterIP %s is IPv6", svc.Spec.ClusterIP)
	require.NoError(t, sb.WaitEndpoints(ctx, ns, "web6",
		podIPOf(t, web1, false), podIPOf(t, web2, false), podIPOf(t, web1, true), podIPOf(t, web2, true)))
	require.NoError(t, sb.WaitProgrammed(ctx, ns, "web6", "with both endpoints in each family", framework.HasEndpoints(2)))
	port := nodePortOf(t, svc, "tcp")

	t.Run("IPv6ClusterIPFromPod", func(t *testing.T) {
		vip := clusterIPOf(t, svc, true)
		for _, proto := range []string{"tcp", "udp"} {
			seen := map[string]bool{}
			for i := 0; i < 20 && len(seen) < 2; i++ {
				r := echoUntil(t, clientNS, proto, hostPort(vip, 80),
					proto+" IPv6 ClusterIP from client6 to be answered by a backend that saw the pod's IPv6 address",
					fromBackend(backends, client6))
				seen[r.Server] = true
			}
			require.Len(t, seen, 2, "%s connections to IPv6 ClusterIP %s are balanced over both backends; answered by %v", proto, vip, seen)
		}
	})

	t.Run("IPv4ClusterIPFromPod", func(t *testing.T) {
		echoUntil(t, clientNS, "tcp", hostPort(clusterIPOf(t, svc, false), 80),
			"IPv4 ClusterIP of the dual-stack Service from client6", fromBackend(backends, client4))
	})

	t.Run("IPv6NodePortFromPod", func(t *testing.T) {
		for _, n := range sb.Nodes {
			echoUntil(t, clientNS, "tcp", hostPort(n.IP6.String(), port),
				"IPv6 NodePort of "+n.Name+" from client6 to be answered by a backend", fromBackend(backends, ""))
		}
	})

	t.Run("IPv6NodePortFromExternalClient", func(t *testing.T) {
		for _, n := range sb.Nodes {
			seen := map[string]bool{}
			for i := 0; i < 20 && len(seen) < 2; i++ {
				r := echoUntil(t, sb.Net.Client, "tcp", hostPort(n.IP6.String(), port),
					"IPv6 NodePort of "+n.Name+" from the external client to be answered by a backend", fromBackend(backends, ""))
				require.True(t, netip.MustParseAddr(r.ClientIP()).Is6(), "an IPv6 connection reaches the backend over IPv6, saw %s", r.Client)
				require.NotEqual(t, framework.ClientIP6.String(), r.ClientIP(), "eTP=Cluster NodePort: the backend must not see the client's address")
				seen[r.Server] = true
			}
			require.Len(t, seen, 2, "the IPv6 NodePort of %s is balanced over both backends; answered by %v", n.Name, seen)
		}
	})
}
