package loadbalancer

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/antrea-proxy/antrea-proxy/pkg/lbapi"
	c "github.com/antrea-proxy/antrea-proxy/pkg/loadbalancer/conditions"
)

// TestRemoveFinalizers: what the chart's uninstall hook runs, with no
// controller: every Service with the finalizer loses it, the
// announcing-node annotation, the ingress and the KEP-4631 conditions;
// other finalizers, annotations and conditions stay; Services without the
// finalizer, or with the well-known one and another provider's class, are not
// written; the legacy finalizer is removed too. Write conflicts are retried
// on a fresh copy.
func TestRemoveFinalizers(t *testing.T) {
	vip := v1.LoadBalancerIPModeVIP
	other := metav1.Condition{Type: "example.com/Other", Status: metav1.ConditionTrue, Reason: "Fine", LastTransitionTime: metav1.NewTime(t0)}
	ours := func(s *v1.Service) {
		s.Finalizers = []string{"example.com/keep", lbapi.Finalizer}
		s.Annotations[lbapi.AnnotationAnnouncingNode] = "10.0.0.1=node-a"
		s.Annotations["example.com/note"] = "kept"
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "10.0.0.1", IPMode: &vip}}
		s.Status.Conditions = []metav1.Condition{other,
			{Type: c.TypeServing, Status: metav1.ConditionTrue, Reason: c.ReasonServing, LastTransitionTime: metav1.NewTime(t0)}}
	}
	deleting := func(s *v1.Service) {
		now := metav1.NewTime(t0)
		s.DeletionTimestamp = &now
	}
	foreign := lbService("foreign", inNamespace("b"), func(s *v1.Service) {
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "192.0.2.9"}}
	})
	// Another provider (a cloud's service controller) writes the same well-known finalizer on
	// Services of its own class: never ours to remove.
	otherClass := lbService("cloud", inNamespace("b"), func(s *v1.Service) {
		s.Spec.LoadBalancerClass = ptrTo("example.com/cloud")
		s.Finalizers = []string{lbapi.Finalizer}
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "192.0.2.10"}}
	})
	legacy := func(s *v1.Service) { s.Finalizers = []string{"example.com/keep", lbapi.LegacyFinalizer} }
	client := fake.NewClientset(lbService("web", inNamespace("a"), ours), lbService("stuck", inNamespace("b"), ours, deleting),
		lbService("old", inNamespace("a"), ours, legacy), foreign, otherClass)
	_, statusConflicts := apiServerLike(client, true)

	n, err := RemoveFinalizers(context.Background(), client, testClass)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.Equal(t, int64(3), statusConflicts.Load(), "each first status write met a conflict and was redone")
	for _, key := range [][2]string{{"a", "web"}, {"b", "stuck"}, {"a", "old"}} {
		svc, err := client.CoreV1().Services(key[0]).Get(context.Background(), key[1], metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, []string{"example.com/keep"}, svc.Finalizers, key)
		require.Equal(t, map[string]string{"example.com/note": "kept"}, svc.Annotations, key)
		require.Empty(t, svc.Status.LoadBalancer.Ingress, key)
		require.Equal(t, []metav1.Condition{other}, svc.Status.Conditions, key)
	}
	updates := 0
	for _, a := range client.Actions() {
		if u, ok := a.(k8stesting.UpdateAction); ok {
			updates++
			name := u.GetObject().(*v1.Service).Name
			require.NotEqual(t, "foreign", name, "a Service without the finalizer was written")
			require.NotEqual(t, "cloud", name, "another provider's Service was written")
		}
	}
	require.Equal(t, 9, updates, "per Service: a conflicting status write, the status write, the metadata write")
	got, err := client.CoreV1().Services("b").Get(context.Background(), "foreign", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, foreign.Status, got.Status)
}
