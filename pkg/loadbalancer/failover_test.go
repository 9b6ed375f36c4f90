package loadbalancer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/antrea-proxy/antrea-proxy/pkg/lbapi"
)

const leaseNS = "kube-system"

// announcerLease is node's announcer Lease renewed at renew (the node's clock) for 2 s.
func announcerLease(node string, renew time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: leaseNS, Name: lbapi.AnnouncerLeaseName(node), Labels: map[string]string{lbapi.LabelAnnouncer: node}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(node), LeaseDurationSeconds: ptr.To[int32](2),
			RenewTime: &metav1.MicroTime{Time: renew}},
	}
}

func newLeaseHarness(t *testing.T, objs ...runtime.Object) *harness {
	return newHarnessWith(t, testPools(), func(o *Options) { o.AnnouncerLeaseNamespace = leaseNS }, objs...)
}

// renew writes node's Lease with a new renewTime and waits until the controller saw it.
func (h *harness) renew(node string, at time.Time) {
	h.t.Helper()
	_, err := h.client.CoordinationV1().Leases(leaseNS).Update(h.ctx, announcerLease(node, at), metav1.UpdateOptions{})
	require.NoError(h.t, err)
	want := at.UTC().Format(time.RFC3339Nano)
	require.Eventually(h.t, func() bool {
		h.ctrl.leases.mu.Lock()
		defer h.ctrl.leases.mu.Unlock()
		return h.ctrl.leases.leases[node].renew == want
	}, 5*time.Second, time.Millisecond)
}

func announcerOf(t *testing.T, svc *v1.Service) string {
	t.Helper()
	as, err := lbapi.ParseAnnouncingNodes(svc.Annotations[lbapi.AnnotationAnnouncingNode])
	require.NoError(t, err)
	if len(as) == 0 {
		return ""
	}
	require.Len(t, as, 1)
	return as[0].Node
}

// TestAnnouncerLeaseFailover: an address moves when its node stops renewing its announcer
// Lease, after the Lease's duration on the controller's clock, whatever renewTime the node's
// clock wrote; a node without a Lease, or whose Lease names another node, never gets one;
// a node that comes back does not take the address back (addresses move only when they must).
func TestAnnouncerLeaseFailover(t *testing.T) {
	skewed := t0.Add(-time.Hour) // the nodes' clocks are an hour behind the controller's
	forged := announcerLease("n3", skewed)
	forged.Name = lbapi.AnnouncerLeaseName("n1") + "-x"
	h := newLeaseHarness(t, readyNode("n1", nil), readyNode("n2", nil), readyNode("n3", nil), readyNode("n4", nil),
		announcerLease("n1", skewed), announcerLease("n2", skewed), forged)
	h.ctrl.leases.check()
	for _, n := range []string{"n3", "n4"} {
		require.False(t, h.ctrl.leases.isAlive(n), "%s has no announcer Lease of its own", n)
	}
	h.create(lbService("web"))
	first := announcerOf(t, h.sync("web"))
	require.Contains(t, []string{"n1", "n2"}, first, "only nodes renewing their Lease announce")
	other := map[string]string{"n1": "n2", "n2": "n1"}[first]

	// The announcer stops renewing; the other node renews every second.
	for i, step := range []time.Duration{time.Second, 990 * time.Millisecond} {
		h.clock.Step(step)
		h.renew(other, skewed.Add(time.Duration(i+1)*time.Second))
		h.ctrl.leases.check()
		require.Equal(t, first, announcerOf(t, h.sync("web")), "within the Lease's duration the address stays (step %d)", i+1)
	}
	h.clock.Step(20 * time.Millisecond)
	h.renew(other, skewed.Add(2100*time.Millisecond))
	h.ctrl.leases.check()
	require.False(t, h.ctrl.leases.isAlive(first))
	require.Equal(t, 1, h.ctrl.queue.Len(), "the expiry queues the VIP-mode Service")
	require.Equal(t, other, announcerOf(t, h.sync("web")), "2 s after %s's last renewal the address moved", first)

	// The first node renews again: it may announce, but the address stays where it is.
	h.renew(first, skewed.Add(3*time.Second))
	h.ctrl.leases.check()
	require.True(t, h.ctrl.leases.isAlive(first))
	require.Equal(t, other, announcerOf(t, h.sync("web")))

	// A released Lease (no holder, what an agent writes when it shuts down) ends at once.
	released := announcerLease(other, skewed.Add(4*time.Second))
	released.Spec.HolderIdentity = nil
	_, err := h.client.CoordinationV1().Leases(leaseNS).Update(h.ctx, released, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return !h.ctrl.leases.isAlive(other) }, 5*time.Second, time.Millisecond)
	require.Equal(t, first, announcerOf(t, h.sync("web")), "a released Lease hands the address over at once")
}

// TestDrainingNodeHandsOver: a cordoned node, or one tainted ToBeDeletedByClusterAutoscaler,
// hands its addresses to a node that is not draining, and keeps them when no other node can
// take them.
func TestDrainingNodeHandsOver(t *testing.T) {
	for _, tc := range []struct {
		name  string
		drain func(*v1.Node)
	}{
		{"cordoned", func(n *v1.Node) { n.Spec.Unschedulable = true }},
		{"autoscaler taint", func(n *v1.Node) {
			n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: TaintToBeDeleted, Effect: v1.TaintEffectNoSchedule})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, testPools(), readyNode("n1", nil), readyNode("n2", nil))
			h.create(lbService("web"))
			first := announcerOf(t, h.sync("web"))
			other := map[string]string{"n1": "n2", "n2": "n1"}[first]
			h.updateNode(first, tc.drain)
			require.Equal(t, other, announcerOf(t, h.sync("web")), "the draining node handed its address over")
			h.updateNode(other, tc.drain)
			require.NotEmpty(t, announcerOf(t, h.sync("web")), "with every node draining, one still announces")
		})
	}
}

// updateNode applies mutate to the stored Node and waits until the controller's cache has it.
func (h *harness) updateNode(name string, mutate func(*v1.Node)) {
	h.t.Helper()
	n, err := h.client.CoreV1().Nodes().Get(h.ctx, name, metav1.GetOptions{})
	require.NoError(h.t, err)
	mutate(n)
	n.ResourceVersion = name + "-" + time.Now().Format(time.RFC3339Nano)
	_, err = h.client.CoreV1().Nodes().Update(h.ctx, n, metav1.UpdateOptions{})
	require.NoError(h.t, err)
	require.Eventually(h.t, func() bool {
		cached, err := h.ctrl.picker.nodes.Get(name)
		return err == nil && cached.ResourceVersion == n.ResourceVersion
	}, 5*time.Second, time.Millisecond)
}
