package loadbalancer

import (
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// syncIn is harness.sync for a Service of any namespace.
func (h *harness) syncIn(ns, name string) *v1.Service {
	h.t.Helper()
	stored, err := h.client.CoreV1().Services(ns).Get(h.ctx, name, metav1.GetOptions{})
	if err == nil {
		require.Eventually(h.t, func() bool {
			cached, err := h.ctrl.services.Services(ns).Get(name)
			return err == nil && cached.ResourceVersion == stored.ResourceVersion
		}, 5*time.Second, time.Millisecond)
	} else {
		require.Eventually(h.t, func() bool {
			_, err := h.ctrl.services.Services(ns).Get(name)
			return apierrors.IsNotFound(err)
		}, 5*time.Second, time.Millisecond)
	}
	require.NoError(h.t, h.ctrl.sync(h.ctx, types.NamespacedName{Namespace: ns, Name: name}))
	out, err := h.client.CoreV1().Services(ns).Get(h.ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(h.t, err)
	return out
}

// deleteIn deletes a Service as an API server would once its finalizers
// are gone: the fake clientset removes it at once.
func (h *harness) deleteIn(ns, name string) {
	h.t.Helper()
	require.NoError(h.t, h.client.CoreV1().Services(ns).Delete(h.ctx, name, metav1.DeleteOptions{}))
}

func inNamespace(ns string) func(*v1.Service) { return func(s *v1.Service) { s.Namespace = ns } }

func withPorts(ports ...int32) func(*v1.Service) {
	return func(s *v1.Service) {
		s.Spec.Ports = nil
		for _, p := range ports {
			s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Protocol: v1.ProtocolTCP, Port: p})
		}
	}
}
