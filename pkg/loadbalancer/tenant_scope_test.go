package loadbalancer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/antrea-proxy/antrea-proxy/pkg/config"
	"github.com/antrea-proxy/antrea-proxy/pkg/lbapi"
	c "github.com/antrea-proxy/antrea-proxy/pkg/loadbalancer/conditions"
)

func namespace(name string, lbls map[string]string) *v1.Namespace {
	return &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}}
}

func withLabels(lbls map[string]string) func(*v1.Service) {
	return func(s *v1.Service) { s.Labels = lbls }
}

// scopedPools: "team" (10.0.5.1-2) for namespace team-a or namespaces
// labelled tier=gold; "gold" (10.0.6.1) for Services labelled
// expose=gold; "manual" (10.0.7.1-2, autoAssign false); "open" (10.0.8.1,
// the fallback, cross-namespace sharing allowed).
func scopedPools() []config.IPPool {
	no := false
	return []config.IPPool{
		{Name: "team", Ranges: []string{"10.0.5.1-10.0.5.2"}, Namespaces: []string{"team-a"},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}},
		{Name: "gold", Ranges: []string{"10.0.6.1-10.0.6.1"},
			ServiceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"expose": "gold"}}},
		{Name: "manual", Ranges: []string{"10.0.7.1-10.0.7.2"}, AutoAssign: &no},
		{Name: "open", Ranges: []string{"10.0.8.1-10.0.8.1"}, AllowCrossNamespaceSharing: true},
	}
}

// TestPoolScope: which pool each Service gets, or why it gets none, as
// data. A Service a pool is not for never gets its addresses, not even by
// naming the pool or one of its addresses; a pool with autoAssign false
// serves only Services that name it or one of its addresses.
func TestPoolScope(t *testing.T) {
	for _, tc := range []struct {
		name string
		svc  *v1.Service
		ips  []string
		cond condSummary
		msg  string // substring of the Serving message
	}{{
		name: "listed namespace gets the team pool",
		svc:  lbService("s", inNamespace("team-a")), ips: []string{"10.0.5.1"}, cond: serving,
	}, {
		name: "namespace selected by label gets the team pool",
		svc:  lbService("s", inNamespace("gold-ns")), ips: []string{"10.0.5.1"}, cond: serving,
	}, {
		name: "other namespace skips team, labelled Service gets gold",
		svc:  lbService("s", inNamespace("other"), withLabels(map[string]string{"expose": "gold"})),
		ips:  []string{"10.0.6.1"}, cond: serving,
	}, {
		name: "unselected Service skips team, gold and manual",
		svc:  lbService("s", inNamespace("other")), ips: []string{"10.0.8.1"}, cond: serving,
	}, {
		name: "naming a pool that is not for the namespace is refused",
		svc:  lbService("s", inNamespace("other"), withPool("team")), ips: []string{},
		cond: notServing(c.ReasonUnsupported), msg: `pool "team" is not for namespace "other"`,
	}, {
		name: "requesting an address of a pool that is not for the Service is refused",
		svc:  lbService("s", inNamespace("team-a"), withAnn(lbapi.AnnotationLoadBalancerIPs, "10.0.6.1")), ips: []string{},
		cond: notServing(c.ReasonUnsupported), msg: `requested address 10.0.6.1: pool "gold" is not for this Service`,
	}, {
		name: "spec.loadBalancerIP in a pool that is not for the namespace is refused",
		svc:  lbService("s", inNamespace("other"), func(s *v1.Service) { s.Spec.LoadBalancerIP = "10.0.5.2" }),
		ips:  []string{}, cond: notServing(c.ReasonUnsupported), msg: `pool "team" is not for namespace "other"`,
	}, {
		name: "a manual pool serves a Service naming it",
		svc:  lbService("s", inNamespace("other"), withPool("manual")), ips: []string{"10.0.7.1"}, cond: serving,
	}, {
		name: "a manual pool serves a Service requesting one of its addresses",
		svc:  lbService("s", inNamespace("other"), withAnn(lbapi.AnnotationLoadBalancerIPs, "10.0.7.2")),
		ips:  []string{"10.0.7.2"}, cond: serving,
	}, {
		name: "IPv6 only: no pool is for it, and the message says why",
		svc:  lbService("s", inNamespace("other"), func(s *v1.Service) { s.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol} }),
		ips:  []string{}, cond: notServing(c.ReasonUnsupported), msg: "no pool has IPv6 addresses",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, scopedPools(), readyNode("node-a", nil),
				namespace("gold-ns", map[string]string{"tier": "gold"}), namespace("other", nil), namespace("team-a", nil))
			h.create(tc.svc)
			got := h.syncIn(tc.svc.Namespace, tc.svc.Name)
			require.Equal(t, tc.ips, ingressIPs(got))
			cond := servingCond(t, got)
			require.Equal(t, tc.cond, condSummary{cond.Status, cond.Reason}, cond.Message)
			require.Contains(t, cond.Message, tc.msg)
			if tc.cond.Status == metav1.ConditionFalse {
				require.Contains(t, h.events(), "Warning AllocationFailed "+tc.cond.Reason+": "+cond.Message)
			}
		})
	}
}

// TestPoolScopeFollowsNamespaceLabels: a namespace that loses the label
// its pool selects on has its Services queued; they move to a pool that
// is for them.
func TestPoolScopeFollowsNamespaceLabels(t *testing.T) {
	h := newHarness(t, scopedPools(), readyNode("node-a", nil), namespace("gold-ns", map[string]string{"tier": "gold"}))
	h.create(lbService("s", inNamespace("gold-ns")))
	require.Equal(t, []string{"10.0.5.1"}, ingressIPs(h.syncIn("gold-ns", "s")))
	// Let the informer catch up with the sync's own writes, then empty the queue.
	h.syncIn("gold-ns", "s")
	for h.ctrl.queue.Len() > 0 {
		k, _ := h.ctrl.queue.Get()
		h.ctrl.queue.Done(k)
	}
	_, err := h.client.CoreV1().Namespaces().Update(h.ctx, namespace("gold-ns", map[string]string{"tier": "bronze"}), metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return h.ctrl.queue.Len() == 1 }, 5*time.Second, time.Millisecond)
	k, _ := h.ctrl.queue.Get()
	h.ctrl.queue.Done(k)
	require.Equal(t, types.NamespacedName{Namespace: "gold-ns", Name: "s"}, k)
	require.Eventually(t, func() bool {
		ns, err := h.ctrl.namespaces.Get("gold-ns")
		return err == nil && ns.Labels["tier"] == "bronze"
	}, 5*time.Second, time.Millisecond)
	require.Equal(t, []string{"10.0.8.1"}, ingressIPs(h.syncIn("gold-ns", "s")))
}

// TestCrossNamespaceSharingOptIn: a pool with allowCrossNamespaceSharing
// lets Services of two namespaces with the same key share an address.
func TestCrossNamespaceSharingOptIn(t *testing.T) {
	h := newHarness(t, scopedPools(), readyNode("node-a", nil))
	share := withAnn(lbapi.AnnotationAllowSharedIP, "k")
	h.create(lbService("web", inNamespace("a"), share, withPool("open")))
	require.Equal(t, []string{"10.0.8.1"}, ingressIPs(h.syncIn("a", "web")))
	h.create(lbService("web", inNamespace("b"), share, withPool("open"), withPorts(8080)))
	require.Equal(t, []string{"10.0.8.1"}, ingressIPs(h.syncIn("b", "web")))
}

// TestNoPools: a controller without pools runs; every Service reports
// that no pool is configured.
func TestNoPools(t *testing.T) {
	h := newHarness(t, nil, readyNode("node-a", nil))
	h.create(lbService("s"))
	got := h.sync("s")
	require.Empty(t, ingressIPs(got))
	cond := servingCond(t, got)
	require.Equal(t, notServing(c.ReasonInfrastructure), condSummary{cond.Status, cond.Reason})
	require.Equal(t, "no address pool is configured (antrea-controller ipPools is empty)", cond.Message)
}

// TestReservationEnds: once the grace period of a deleted Service's
// address ends, the Service that waited for it gets it; the controller
// queues it for that moment.
func TestReservationEnds(t *testing.T) {
	h := newHarness(t, testPools(), readyNode("node-a", nil))
	want := withAnn(lbapi.AnnotationLoadBalancerIPs, "10.0.0.1")
	h.create(lbService("web", inNamespace("victim"), want))
	require.Equal(t, []string{"10.0.0.1"}, ingressIPs(h.syncIn("victim", "web")))
	h.create(lbService("grab", inNamespace("tenant"), want))
	h.syncIn("tenant", "grab")
	h.deleteIn("victim", "web")
	h.syncIn("victim", "web")
	h.clock.Step(config.DefaultReleaseGracePeriod - time.Second)
	got := h.syncIn("tenant", "grab")
	require.Empty(t, ingressIPs(got))
	require.Contains(t, servingCond(t, got).Message,
		"requested address 10.0.0.1 is reserved for victim/web, deleted, until 2026-03-01T12:05:00Z in case it is re-created")
	h.clock.Step(time.Second)
	require.Equal(t, []string{"10.0.0.1"}, ingressIPs(h.syncIn("tenant", "grab")))
}

// TestReservationOff: with ReleaseGrace 0 a deleted Service's address is
// free at once.
func TestReservationOff(t *testing.T) {
	h := newHarness(t, testPools(), readyNode("node-a", nil))
	ps, err := NewPools(testPools())
	require.NoError(t, err)
	h.ctrl, err = New(h.client, h.factory, Options{Class: testClass, Pools: ps, Recorder: h.recorder, Clock: h.clock})
	require.NoError(t, err)
	h.factory.Start(h.ctx.Done())
	h.factory.WaitForCacheSync(h.ctx.Done())
	h.create(lbService("first"))
	require.Equal(t, []string{"10.0.0.1"}, ingressIPs(h.sync("first")))
	h.deleteIn("ns", "first")
	require.Nil(t, h.syncIn("ns", "first"))
	h.create(lbService("other"))
	require.Equal(t, []string{"10.0.0.1"}, ingressIPs(h.sync("other")))
}
