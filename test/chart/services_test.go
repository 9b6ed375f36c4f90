package chart

import (
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

var servicesGVR = corev1.SchemeGroupVersion.WithResource("services")

// serviceStore gives the fake clientset's Services the update semantics of a real API server,
// which client-go's object tracker lacks: it never sets metadata.resourceVersion, so a write
// computed from an older copy silently replaces a newer object, and it stores the whole object
// on a status update. With serviceStore:
//   - every stored Service carries a resourceVersion, bumped on each write;
//   - an update whose resourceVersion is not the stored one fails with a Conflict (an empty one
//     is unconditional, as on a real API server);
//   - an update of the status subresource changes only .status, an update of the Service
//     everything but .status.
//
// The test's own writes go through Update (not through the clientset, so that cs.Actions()
// holds only the controller's calls); they bump the resourceVersion like any other write.
type serviceStore struct {
	t  testing.TB
	cs *fake.Clientset

	mu sync.Mutex // serializes the read-check-write of every Service update
	rv int
}

// newServiceStore installs the update reactor on cs and stamps a resourceVersion on the
// Services cs was created with. Reactors prepended later run before it.
func newServiceStore(t testing.TB, cs *fake.Clientset) *serviceStore {
	s := &serviceStore{t: t, cs: cs}
	list, err := cs.Tracker().List(servicesGVR, corev1.SchemeGroupVersion.WithKind("Service"), "")
	require.NoError(t, err)
	for i := range list.(*corev1.ServiceList).Items {
		svc := &list.(*corev1.ServiceList).Items[i]
		s.mu.Lock()
		err := s.store(svc)
		s.mu.Unlock()
		require.NoError(t, err)
	}
	cs.PrependReactor("update", "services", s.react)
	return s
}

// Get returns the stored Service.
func (s *serviceStore) Get(ns, name string) *corev1.Service {
	obj, err := s.cs.Tracker().Get(servicesGVR, ns, name)
	require.NoError(s.t, err)
	return obj.(*corev1.Service)
}

// Update stores svc as the test's own write: like a client's update, it fails with a Conflict
// if svc is not the stored version.
func (s *serviceStore) Update(svc *corev1.Service) error {
	_, err := s.update(svc, "")
	return err
}

func (s *serviceStore) react(a k8stesting.Action) (bool, runtime.Object, error) {
	u, ok := a.(k8stesting.UpdateAction)
	if !ok {
		return false, nil, nil
	}
	svc, ok := u.GetObject().(*corev1.Service)
	if !ok {
		return false, nil, nil
	}
	if svc.Namespace == "" {
		svc = svc.DeepCopy()
		svc.Namespace = a.GetNamespace()
	}
	out, err := s.update(svc, a.GetSubresource())
	if err != nil {
		return true, nil, err
	}
	return true, out, nil
}

func (s *serviceStore) update(svc *corev1.Service, subresource string) (*corev1.Service, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	obj, err := s.cs.Tracker().Get(servicesGVR, svc.Namespace, svc.Name)
	if err != nil {
		return nil, err
	}
	cur := obj.(*corev1.Service)
	if svc.ResourceVersion != "" && svc.ResourceVersion != cur.ResourceVersion {
		return nil, apierrors.NewConflict(corev1.Resource("services"), svc.Name,
			fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again (resourceVersion %s, stored %s)",
				svc.ResourceVersion, cur.ResourceVersion))
	}
	var next *corev1.Service
	switch subresource {
	case "":
		next = svc.DeepCopy()
		next.Status = cur.Status
	case "status":
		next = cur.DeepCopy()
		next.Status = svc.Status
	default:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("unexpected subresource %q of services", subresource))
	}
	if err := s.store(next); err != nil {
		return nil, err
	}
	return next.DeepCopy(), nil
}

// store writes svc with the next resourceVersion; s.mu is held.
func (s *serviceStore) store(svc *corev1.Service) error {
	s.rv++
	svc.ResourceVersion = strconv.Itoa(s.rv)
	return s.cs.Tracker().Update(servicesGVR, svc, svc.Namespace)
}

// TestServiceStore checks the API server semantics serviceStore gives the fake clientset.
func TestServiceStore(t *testing.T) {
	ctx := t.Context()
	cs := fake.NewClientset(webService(corev1.ServiceTypeLoadBalancer))
	s := newServiceStore(t, cs)
	client := cs.CoreV1().Services("default")

	old, err := client.Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, old.ResourceVersion)

	// The test's write bumps the resourceVersion: the client's copy is now stale.
	svc := s.Get("default", "web")
	svc.Spec.Type = corev1.ServiceTypeClusterIP
	require.NoError(t, s.Update(svc))
	require.NotEqual(t, old.ResourceVersion, s.Get("default", "web").ResourceVersion)

	stale := old.DeepCopy()
	stale.Finalizers = []string{"example.com/f"}
	_, err = client.Update(ctx, stale, metav1.UpdateOptions{})
	require.True(t, apierrors.IsConflict(err), "stale update: %v", err)
	stale.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}}
	_, err = client.UpdateStatus(ctx, stale, metav1.UpdateOptions{})
	require.True(t, apierrors.IsConflict(err), "stale status update: %v", err)
	require.Equal(t, corev1.ServiceTypeClusterIP, s.Get("default", "web").Spec.Type)
	require.Error(t, s.Update(old), "the test's own stale write")

	// A status update changes only the status, an update everything but the status.
	cur, err := client.Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	cur.Spec.Type = corev1.ServiceTypeNodePort
	cur.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}}
	out, err := client.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Equal(t, corev1.ServiceTypeClusterIP, out.Spec.Type)
	require.Equal(t, "192.0.2.1", out.Status.LoadBalancer.Ingress[0].IP)
	out.Spec.Type = corev1.ServiceTypeNodePort
	out.Status.LoadBalancer.Ingress = nil
	out, err = client.Update(ctx, out, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Equal(t, corev1.ServiceTypeNodePort, out.Spec.Type)
	require.Len(t, out.Status.LoadBalancer.Ingress, 1)
	require.Equal(t, out, s.Get("default", "web"))
}
