package loadbalancer

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/antrea-proxy/antrea-proxy/pkg/config"
	"github.com/antrea-proxy/antrea-proxy/pkg/lbapi"
	c "github.com/antrea-proxy/antrea-proxy/pkg/loadbalancer/conditions"
)

// syncCount returns how many syncs the workers of r have finished.
func syncCount(t *testing.T, r *running) uint64 {
	t.Helper()
	mfs, err := r.ctrl.metrics.Registry().Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "antrea_controller_lb_sync_duration_seconds" {
			return mf.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	return 0
}

// serviceWrites counts the update requests for Services recorded by client.
func serviceWrites(client *fake.Clientset) int {
	n := 0
	for _, a := range client.Actions() {
		if a.GetResource() == servicesGVR && (a.GetVerb() == "update" || a.GetVerb() == "patch") {
			n++
		}
	}
	return n
}

// TestRestartThroughRunWritesNothing: a controller started through Run
// allocates; it stops and a new controller starts on the same API state.
// Every Service keeps its addresses, announcing node and conditions, and
// the new controller syncs every Service without writing anything.
func TestRestartThroughRunWritesNothing(t *testing.T) {
	client := fake.NewClientset(readyNode("node-a", nil), readyNode("node-b", nil))
	_, _ = apiServerLike(client, false)
	watching := watchesStarted(client)
	pools := []config.IPPool{
		{Name: "vip", CIDRs: []string{"10.2.0.0/29", "fd00:2::/125"}},
		{Name: "proxy", IPMode: config.IPModeProxy, Ranges: []string{"192.0.2.10-192.0.2.11"}},
	}
	first := startController(t, client, watching, pools)
	create := func(svc *v1.Service) {
		_, err := client.CoreV1().Services("ns").Create(context.Background(), svc, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	for i := range 4 {
		create(lbService(fmt.Sprint("vip", i)))
	}
	create(lbService("dual", dualStack(v1.IPFamilyPolicyRequireDualStack)))
	create(lbService("edge", withPool("proxy")))
	create(lbService("local", withPool("proxy"), func(s *v1.Service) {
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal // Serving + Degraded
	}))
	share := withAnn(lbapi.AnnotationAllowSharedIP, "k")
	create(lbService("share-tcp", share))
	create(lbService("share-udp", share, func(s *v1.Service) {
		s.Spec.Ports = []v1.ServicePort{{Name: "dns", Protocol: v1.ProtocolUDP, Port: 53}}
	}))
	const n = 9
	before := waitAllServing(t, client, n)
	first.stop()
	require.Equal(t, ingressIPs(before["share-tcp"]), ingressIPs(before["share-udp"]))
	require.Equal(t, c.ReasonExternalTrafficPolicyNotSupported, condsOf(before["local"])[c.TypeDegraded].Reason)

	writes := serviceWrites(client)
	second := startController(t, client, watching, pools)
	// restore queues every Service once; with nothing to write, no
	// event queues any of them again.
	require.Eventually(t, func() bool { return syncCount(t, second) >= n }, 20*time.Second, 5*time.Millisecond)
	require.Equal(t, writes, serviceWrites(client), "a restart rewrites no Service")
	after, err := client.CoreV1().Services("ns").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	for i := range after.Items {
		svc := &after.Items[i]
		b := before[svc.Name]
		require.Equal(t, b.ResourceVersion, svc.ResourceVersion, svc.Name)
		require.Equal(t, ingressIPs(b), ingressIPs(svc), svc.Name)
		require.Equal(t, b.Annotations[lbapi.AnnotationAnnouncingNode], svc.Annotations[lbapi.AnnotationAnnouncingNode], svc.Name)
	}
	require.Equal(t, first.ctrl.alloc.InUse(), second.ctrl.alloc.InUse())
	require.True(t, second.ctrl.Ready())
}

// TestWaitersServedInOrderWithManyWorkers: with 8 workers, Services
// waiting for a one-address pool get it in the order they started
// waiting, although each release queues every waiter and the workers
// sync them in parallel; a Service created at the moment of a release
// never overtakes them.
func TestWaitersServedInOrderWithManyWorkers(t *testing.T) {
	client := fake.NewClientset(readyNode("node-a", nil))
	_, _ = apiServerLike(client, false)
	r := startController(t, client, watchesStarted(client), []config.IPPool{{Name: "one", Ranges: []string{"10.3.0.1-10.3.0.1"}}})
	ctx := context.Background()
	state := func(name string) condSummary {
		svc, err := client.CoreV1().Services("ns").Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		return condsOf(svc)[c.TypeServing]
	}
	create := func(name string) {
		_, err := client.CoreV1().Services("ns").Create(ctx, lbService(name), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	create("holder")
	require.Eventually(t, func() bool { return state("holder") == serving }, 10*time.Second, time.Millisecond)
	const n = 7
	for i := range n {
		name := fmt.Sprint("w", i)
		create(name)
		require.Eventually(t, func() bool { return state(name) == notServing(c.ReasonInfrastructure) }, 10*time.Second, time.Millisecond)
	}
	require.Len(t, r.ctrl.waiters(), n)
	prev := "holder"
	for i := range n {
		next := fmt.Sprint("w", i)
		require.NoError(t, client.CoreV1().Services("ns").Delete(ctx, prev, metav1.DeleteOptions{}))
		create(fmt.Sprint("late", i)) // races the waiters for the freed address
		require.Eventually(t, func() bool { return state(next) == serving }, 10*time.Second, time.Millisecond,
			"%s waited longest and must get the address", next)
		for j := i + 1; j < n; j++ {
			require.NotEqual(t, serving, state(fmt.Sprint("w", j)))
		}
		for j := 0; j <= i; j++ {
			require.NotEqual(t, serving, state(fmt.Sprint("late", j)))
		}
		prev = next
	}
}

// TestRestartKeepsWaitingOrder: Services that were waiting for an
// exhausted pool before a restart keep their order (by the transition
// time of their Serving=False/Infrastructure condition), whatever order
// the new controller syncs them in.
func TestRestartKeepsWaitingOrder(t *testing.T) {
	proxy := v1.LoadBalancerIPModeProxy
	holder := lbService("a", withPool("proxy"), func(s *v1.Service) {
		s.Finalizers = []string{lbapi.Finalizer}
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "192.0.2.1", IPMode: &proxy}}
	})
	waitingSince := func(d time.Duration) func(*v1.Service) {
		return func(s *v1.Service) {
			s.Finalizers = []string{lbapi.Finalizer}
			s.Status.Conditions = []metav1.Condition{{Type: c.TypeServing, Status: metav1.ConditionFalse,
				Reason: c.ReasonInfrastructure, Message: `no free IPv4 address in pool "proxy"`,
				LastTransitionTime: metav1.NewTime(t0.Add(d))}}
		}
	}
	// "b-young" sorts first by name and is listed first; "z-old" waited longer.
	h := newHarness(t, testPools(), readyNode("node-a", nil), holder,
		lbService("b-young", withPool("proxy"), waitingSince(2*time.Minute)),
		lbService("z-old", withPool("proxy"), waitingSince(time.Minute)))
	require.NoError(t, h.ctrl.restore())
	require.Equal(t, []types.NamespacedName{{Namespace: "ns", Name: "z-old"}, {Namespace: "ns", Name: "b-young"}}, h.ctrl.waiters())

	require.NoError(t, h.client.CoreV1().Services("ns").Delete(h.ctx, "a", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := h.ctrl.services.Services("ns").Get("a")
		return err != nil
	}, 5*time.Second, time.Millisecond)
	h.sync("a")
	h.clock.Step(config.DefaultReleaseGracePeriod) // the reservation for the deleted ns/a ends
	require.Empty(t, ingressIPs(h.sync("b-young")), "the younger waiter synced first does not overtake")
	require.Equal(t, []string{"192.0.2.1"}, ingressIPs(h.sync("z-old")))
}
