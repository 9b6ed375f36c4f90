package loadbalancer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/antrea-proxy/antrea-proxy/pkg/config"
	"github.com/antrea-proxy/antrea-proxy/pkg/lbapi"
	c "github.com/antrea-proxy/antrea-proxy/pkg/loadbalancer/conditions"
)

func requireCondAt(t *testing.T, svc *v1.Service, typ string, want condSummary, gen int64, at time.Time) {
	t.Helper()
	cond := meta.FindStatusCondition(svc.Status.Conditions, typ)
	require.NotNil(t, cond, "%s missing", typ)
	require.Equal(t, want, condSummary{cond.Status, cond.Reason}, typ)
	require.Equal(t, gen, cond.ObservedGeneration, typ)
	require.True(t, cond.LastTransitionTime.Time.Equal(at), "%s: lastTransitionTime %v, want %v", typ, cond.LastTransitionTime, at)
}

// TestConditionTransitions walks one Service through Provisioning, Serving,
// Degraded, Infrastructure (pool exhausted), Serving again and release.
func TestConditionTransitions(t *testing.T) {
	h := newHarness(t, testPools(), readyNode("node-a", nil))
	t1, t2, t3, t4 := t0.Add(time.Minute), t0.Add(2*time.Minute), t0.Add(3*time.Minute), t0.Add(4*time.Minute)

	// No node matches pool "sel": Provisioning.
	h.create(lbService("a", withPool("sel")))
	svc := h.sync("a")
	requireCondAt(t, svc, c.TypeServing, notServing(c.ReasonProvisioning), 1, t0)
	requireCondAt(t, svc, c.TypeProvisioning, provisioning, 1, t0)
	require.Equal(t, []string{"10.0.1.1"}, ingressIPs(svc))
	require.NotContains(t, svc.Annotations, lbapi.AnnotationAnnouncingNode)
	require.Equal(t, []string{`Normal IPAllocated Allocated 10.0.1.1 from pool "sel" (ipMode VIP)`}, h.events())

	// A matching node appears: Serving; both conditions move.
	h.clock.SetTime(t1)
	_, err := h.client.CoreV1().Nodes().Update(h.ctx, readyNode("node-a", map[string]string{"lb": "yes"}), metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		n, err := h.ctrl.picker.nodes.Get("node-a")
		return err == nil && n.Labels["lb"] == "yes"
	}, 5*time.Second, time.Millisecond)
	svc = h.sync("a")
	requireCondAt(t, svc, c.TypeServing, serving, 1, t1)
	requireCondAt(t, svc, c.TypeProvisioning, complete, 1, t1)
	require.Equal(t, "10.0.1.1=node-a", svc.Annotations[lbapi.AnnotationAnnouncingNode])
	require.Equal(t, []string{"Normal AnnouncingNodeAssigned 10.0.1.1 is announced by node node-a"}, h.events())

	// eTP=Local without endpoints: back to Provisioning (generation 2).
	h.clock.SetTime(t2)
	h.update("a", etpLocal)
	svc = h.sync("a")
	requireCondAt(t, svc, c.TypeServing, notServing(c.ReasonProvisioning), 2, t2)
	requireCondAt(t, svc, c.TypeProvisioning, provisioning, 2, t2)

	// Back to Cluster: Serving; a no-op resync later moves nothing.
	h.clock.SetTime(t3)
	h.update("a", func(s *v1.Service) { s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyCluster })
	svc = h.sync("a")
	requireCondAt(t, svc, c.TypeServing, serving, 3, t3)
	h.clock.SetTime(t4)
	svc = h.sync("a")
	requireCondAt(t, svc, c.TypeServing, serving, 3, t3)

	// A second Service wants the same single-address pool: Infrastructure.
	h.create(lbService("b", withPool("sel")))
	b := h.sync("b")
	requireCondAt(t, b, c.TypeServing, notServing(c.ReasonInfrastructure), 1, t4)
	require.Contains(t, servingCond(t, b).Message, `no free IPv4 address in pool "sel"`)
	require.Empty(t, ingressIPs(b))
	require.Contains(t, h.events(), `Warning AllocationFailed Infrastructure: no free IPv4 address in pool "sel"`)

	// The first Service is deleted: its address is released, the finalizer
	// removed; the address stays reserved for ns/a for the grace period,
	// then the second one gets it.
	now := metav1.NewTime(t4)
	h.update("a", func(s *v1.Service) { s.DeletionTimestamp = &now })
	svc = h.sync("a")
	require.NotContains(t, svc.Finalizers, lbapi.Finalizer)
	require.NotContains(t, svc.Annotations, lbapi.AnnotationAnnouncingNode)
	require.Empty(t, svc.Status.LoadBalancer.Ingress)
	require.Empty(t, svc.Status.Conditions)
	require.Contains(t, h.events(), "Normal IPReleased Released 10.0.1.1")
	b = h.sync("b")
	require.Empty(t, ingressIPs(b))
	require.Contains(t, servingCond(t, b).Message, "reserved for deleted Services until")
	t5 := t4.Add(config.DefaultReleaseGracePeriod)
	h.clock.SetTime(t5)
	b = h.sync("b")
	requireCondAt(t, b, c.TypeServing, serving, 1, t5)
	require.Equal(t, []string{"10.0.1.1"}, ingressIPs(b))

	// Changing the type releases and clears everything we wrote, keeping
	// foreign conditions.
	other := metav1.Condition{Type: "example.com/Other", Status: metav1.ConditionTrue, Reason: "Fine", LastTransitionTime: now}
	stored, err := h.client.CoreV1().Services("ns").Get(h.ctx, "b", metav1.GetOptions{})
	require.NoError(t, err)
	stored.Status.Conditions = append(stored.Status.Conditions, other)
	_, err = h.client.CoreV1().Services("ns").UpdateStatus(h.ctx, stored, metav1.UpdateOptions{})
	require.NoError(t, err)
	h.update("b", func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeClusterIP })
	b = h.sync("b")
	require.NotContains(t, b.Finalizers, lbapi.Finalizer)
	require.Empty(t, b.Status.LoadBalancer.Ingress)
	require.Equal(t, []metav1.Condition{other}, b.Status.Conditions)
	require.Equal(t, 0, h.ctrl.alloc.InUse())
	// Once released, further syncs do not write.
	before := h.writes()
	h.sync("b")
	require.Equal(t, before, h.writes())
}

func TestOtherClassUntouched(t *testing.T) {
	otherClass := "example.com/other"
	svc := lbService("foreign", func(s *v1.Service) {
		s.Spec.LoadBalancerClass = &otherClass
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "10.0.0.1"}}
	})
	h := newHarness(t, testPools(), readyNode("node-a", nil), svc, lbService("np", func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeNodePort
	}))
	for _, name := range []string{"foreign", "np"} {
		got := h.sync(name)
		require.Empty(t, got.Finalizers)
		require.Empty(t, got.Status.Conditions)
	}
	require.Equal(t, 0, h.writes())
	require.Empty(t, h.events())
	// Its ingress IP is not ours: another Service may get it.
	h.create(lbService("mine", func(s *v1.Service) { s.Spec.LoadBalancerClass = ptrTo(testClass) }))
	require.Equal(t, []string{"10.0.0.1"}, ingressIPs(h.sync("mine")))
	require.Equal(t, []string{"10.0.0.1"}, ingressIPs(h.sync("foreign")), "foreign status left alone")
}

func ptrTo[T any](v T) *T { return &v }

func TestSharingThroughController(t *testing.T) {
	h := newHarness(t, testPools(), readyNode("node-a", nil), readyNode("node-b", nil))
	share := withAnn(lbapi.AnnotationAllowSharedIP, "team-a")
	h.create(lbService("web", share, withAnn(lbapi.AnnotationLoadBalancerIPs, "10.0.0.2")))
	h.create(lbService("dns", share, withAnn(lbapi.AnnotationLoadBalancerIPs, "10.0.0.2"), func(s *v1.Service) {
		s.Spec.Ports = []v1.ServicePort{{Name: "dns", Protocol: v1.ProtocolUDP, Port: 53}}
	}))
	h.create(lbService("clash", share, withAnn(lbapi.AnnotationLoadBalancerIPs, "10.0.0.2")))
	h.create(lbService("private", withAnn(lbapi.AnnotationLoadBalancerIPs, "10.0.0.2")))

	web, dns := h.sync("web"), h.sync("dns")
	require.Equal(t, []string{"10.0.0.2"}, ingressIPs(web))
	require.Equal(t, []string{"10.0.0.2"}, ingressIPs(dns))
	require.Equal(t, []v1.PortStatus{{Port: 53, Protocol: v1.ProtocolUDP}}, dns.Status.LoadBalancer.Ingress[0].Ports)
	require.Equal(t, web.Annotations[lbapi.AnnotationAnnouncingNode], dns.Annotations[lbapi.AnnotationAnnouncingNode],
		"a shared address has one announcing node")

	clash := h.sync("clash")
	require.Equal(t, notServing(c.ReasonInfrastructure), condsOf(clash)[c.TypeServing])
	require.Contains(t, servingCond(t, clash).Message, "requested address 10.0.0.2 is in use by ns/web with clashing ports 80/TCP")
	private := h.sync("private")
	require.Contains(t, servingCond(t, private).Message, "this Service does not allow sharing")

	// Deleting one sharer keeps the address for the other.
	require.NoError(t, h.client.CoreV1().Services("ns").Delete(h.ctx, "web", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := h.ctrl.services.Services("ns").Get("web")
		return err != nil
	}, 5*time.Second, time.Millisecond)
	require.Nil(t, h.sync("web"))
	dns = h.sync("dns")
	require.Equal(t, []string{"10.0.0.2"}, ingressIPs(dns))
	clash = h.sync("clash")
	require.Equal(t, []string{"10.0.0.2"}, ingressIPs(clash), "no clash left once web is gone")
}

func TestETPLocalFollowsEndpoints(t *testing.T) {
	objs := []runtime.Object{readyNode("node-a", nil), readyNode("node-b", nil), endpointSlice("s", "s-1", "node-a")}
	h := newHarness(t, testPools(), objs...)
	h.create(lbService("s", etpLocal))
	svc := h.sync("s")
	require.Equal(t, "10.0.0.1=node-a", svc.Annotations[lbapi.AnnotationAnnouncingNode])
	h.events()

	// The only endpoint moves to node-b; the address follows it.
	es := endpointSlice("s", "s-1", "node-b")
	_, err := h.client.DiscoveryV1().EndpointSlices("ns").Update(h.ctx, es, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		got, err := h.ctrl.picker.slices.EndpointSlices("ns").Get("s-1")
		return err == nil && *got.Endpoints[0].NodeName == "node-b"
	}, 5*time.Second, time.Millisecond)
	require.Equal(t, 1, h.ctrl.queue.Len(), "the EndpointSlice change queues the Service")
	svc = h.sync("s")
	require.Equal(t, "10.0.0.1=node-b", svc.Annotations[lbapi.AnnotationAnnouncingNode])
	require.Equal(t, serving, condsOf(svc)[c.TypeServing])
	require.Contains(t, h.events(), "Normal AnnouncingNodeAssigned 10.0.0.1 is announced by node node-b (was node-a)")

	// A not-ready endpoint does not count.
	es.Endpoints[0].Conditions.Ready = ptrTo(false)
	_, err = h.client.DiscoveryV1().EndpointSlices("ns").Update(h.ctx, es, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		got, err := h.ctrl.picker.slices.EndpointSlices("ns").Get("s-1")
		return err == nil && got.Endpoints[0].Conditions.Ready != nil
	}, 5*time.Second, time.Millisecond)
	svc = h.sync("s")
	require.Equal(t, notServing(c.ReasonProvisioning), condsOf(svc)[c.TypeServing])
	require.NotContains(t, svc.Annotations, lbapi.AnnotationAnnouncingNode)
	_ = discoveryv1.LabelServiceName
}
