package loadbalancer

import (
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/antrea-proxy/antrea-proxy/pkg/lbapi"
)

// TestFinalizerIsTheWellKnownCleanupFinalizer: the controller protects its Services with the
// LoadBalancer cleanup finalizer that cloud providers' service controllers write and the
// upstream e2e suite waits for ("should handle load balancer cleanup finalizer for service").
func TestFinalizerIsTheWellKnownCleanupFinalizer(t *testing.T) {
	require.Equal(t, "service.kubernetes.io/load-balancer-cleanup", lbapi.Finalizer)
	h := newHarness(t, testPools(), readyNode("node-a", nil))
	h.create(lbService("web"))
	require.Equal(t, []string{lbapi.Finalizer}, h.sync("web").Finalizers)
}

// TestLegacyFinalizerMigrates: a Service that an earlier release protected with
// antrea-proxy.io/load-balancer moves to the well-known finalizer on its next sync (other
// finalizers kept), and one deleted while it still carries only the legacy finalizer is
// cleaned up and let go.
func TestLegacyFinalizerMigrates(t *testing.T) {
	legacy := func(ip string) func(*v1.Service) {
		return func(s *v1.Service) {
			s.Finalizers = []string{"example.com/keep", lbapi.LegacyFinalizer}
			s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: ip}}
		}
	}
	h := newHarness(t, testPools(), readyNode("node-a", nil), lbService("old", legacy("10.0.0.2")), lbService("gone", legacy("10.0.0.3")))
	require.NoError(t, h.ctrl.restore())

	old := h.sync("old")
	require.Equal(t, []string{"example.com/keep", lbapi.Finalizer}, old.Finalizers)
	require.Equal(t, []string{"10.0.0.2"}, ingressIPs(old), "the address is kept across the migration")

	now := metav1.Now()
	h.update("gone", func(s *v1.Service) { s.DeletionTimestamp = &now })
	gone := h.sync("gone")
	require.Equal(t, []string{"example.com/keep"}, gone.Finalizers, "the legacy finalizer is ours to remove")
	require.Empty(t, gone.Status.LoadBalancer.Ingress)
}

// TestOtherProvidersFinalizerUntouched: a cloud's service controller writes the same
// well-known finalizer on Services of its own class; the controller never removes it or
// clears their status, even when they are deleted.
func TestOtherProvidersFinalizerUntouched(t *testing.T) {
	cloud := lbService("cloud", func(s *v1.Service) {
		s.Spec.LoadBalancerClass = ptrTo("example.com/cloud")
		s.Finalizers = []string{lbapi.Finalizer}
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "192.0.2.10"}}
	})
	h := newHarness(t, testPools(), readyNode("node-a", nil), cloud)
	require.NoError(t, h.ctrl.restore())
	now := metav1.Now()
	h.update("cloud", func(s *v1.Service) { s.DeletionTimestamp = &now })
	got := h.sync("cloud")
	require.Equal(t, []string{lbapi.Finalizer}, got.Finalizers)
	require.Equal(t, []string{"192.0.2.10"}, ingressIPs(got))
}
