package chart

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/antrea-proxy/antrea-proxy/pkg/config"
	"github.com/antrea-proxy/antrea-proxy/pkg/lbapi"
	"github.com/antrea-proxy/antrea-proxy/pkg/loadbalancer"
)

const cleanupHook = "antrea-controller-cleanup"

// TestUninstallHook: the chart renders a post-delete hook Job running `antrea-controller
// cleanup-finalizers` with the controller image, on the host network (the CNI is gone by then),
// under its own ServiceAccount whose ClusterRole and binding are hooks created before it; the
// Job talks to kubeAPIServerOverride when set; controller.cleanupOnUninstall=false drops it; the
// plain manifest (no uninstall) has no hook.
func TestUninstallHook(t *testing.T) {
	h := NewHelm(t)
	r := render(t, h, "--set", "kubeAPIServerOverride=https://192.0.2.10:6443")
	job := only[*batchv1.Job](t, r, "Job")
	require.Equal(t, cleanupHook, job.Name)
	require.Equal(t, "post-delete", job.Annotations["helm.sh/hook"])
	require.Equal(t, "before-hook-creation,hook-succeeded", job.Annotations["helm.sh/hook-delete-policy"])
	spec := job.Spec.Template.Spec
	require.Equal(t, cleanupHook, spec.ServiceAccountName)
	require.True(t, spec.HostNetwork)
	require.Equal(t, corev1.RestartPolicyNever, spec.RestartPolicy)
	c := container(t, spec, "cleanup-finalizers")
	require.Equal(t, []string{"antrea-controller", "cleanup-finalizers"}, c.Command)
	require.Contains(t, c.Args, "--kube-apiserver-override=https://192.0.2.10:6443")
	require.Equal(t, container(t, r.deployment(t).Spec.Template.Spec, "antrea-controller").Image, c.Image)

	hooks := 0
	for _, o := range r.objs {
		m, err := metaOf(o)
		require.NoError(t, err)
		if m.GetAnnotations()["helm.sh/hook"] == "" {
			continue
		}
		hooks++
		require.Equal(t, "post-delete", m.GetAnnotations()["helm.sh/hook"], m.GetName())
		if _, isJob := o.(*batchv1.Job); !isJob {
			require.Equal(t, "-10", m.GetAnnotations()["helm.sh/hook-weight"], "%s must exist before the Job", m.GetName())
		}
	}
	require.Equal(t, 4, hooks, "ServiceAccount, ClusterRole, ClusterRoleBinding and Job")
	require.Len(t, all[*rbacv1.ClusterRoleBinding](render(t, h, "--set", "controller.cleanupOnUninstall=false")), 2)
	require.Empty(t, all[*batchv1.Job](render(t, h, "--set", "controller.cleanupOnUninstall=false")))

	manifest, err := os.ReadFile(filepath.Join(h.Root, "build", "yamls", "antrea-proxy.yml"))
	require.NoError(t, err)
	require.False(t, strings.Contains(string(manifest), "helm.sh/hook"), "the plain manifest must not carry the uninstall hook")
}

func metaOf(o runtime.Object) (metav1.Object, error) {
	m, ok := o.(metav1.Object)
	if !ok {
		return nil, errors.New("object without metadata")
	}
	return m, nil
}

// TestCleanupRBAC runs what the uninstall hook runs (loadbalancer.RemoveFinalizers) against a
// fake clientset holding a Service with the controller's finalizer, with one write conflict (the
// re-read), and compares its calls with the hook ServiceAccount's permissions.
func TestCleanupRBAC(t *testing.T) {
	h := NewHelm(t)
	r := render(t, h)
	svc := webService(corev1.ServiceTypeLoadBalancer)
	svc.Finalizers = []string{lbapi.Finalizer}
	svc.Annotations = map[string]string{lbapi.AnnotationAnnouncingNode: "192.168.240.1=node-a"}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.168.240.1"}}
	cs := fakeWithConflict(svc)
	n, err := loadbalancer.RemoveFinalizers(context.Background(), cs, config.DefaultLoadBalancerClass)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	got, err := cs.CoreV1().Services("default").Get(context.Background(), "web", metav1.GetOptions{})
	require.NoError(t, err)
	require.Empty(t, got.Finalizers)
	require.Empty(t, got.Annotations)
	require.Empty(t, got.Status.LoadBalancer.Ingress)

	compareRBAC(t, cleanupHook, grantsFor(t, r, cleanupHook), callsOf(cs.Actions()))
}

// fakeWithConflict returns a clientset holding svc whose first status write conflicts.
func fakeWithConflict(svc *corev1.Service) *fake.Clientset {
	cs := fake.NewClientset(svc.DeepCopy())
	var conflictOnce sync.Once
	cs.PrependReactor("update", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
		handled := false
		if a.GetSubresource() == "status" {
			conflictOnce.Do(func() { handled = true })
		}
		if handled {
			return true, nil, apierrors.NewConflict(corev1.Resource("services"), svc.Name, errors.New("the object has been modified"))
		}
		return false, nil, nil
	})
	return cs
}
