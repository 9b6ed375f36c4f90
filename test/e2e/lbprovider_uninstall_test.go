//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/antrea-proxy/antrea-proxy/pkg/lbapi"
	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// cleanupUser runs `antrea-controller cleanup-finalizers` with the rules of the chart's
// uninstall hook ClusterRole (templates/controller-cleanup-hook.yaml; test/chart checks them
// against the code).
const cleanupUser = "antrea-controller-cleanup"

// uninstallCleanup: with the controller gone, a Service being deleted hangs on the finalizer;
// `antrea-controller cleanup-finalizers`, as the chart's uninstall hook runs it, with only the
// hook's permissions, lets its deletion finish and leaves no Service with the finalizer.
func (p *provider) uninstallCleanup(t *testing.T) {
	ctx := context.Background()
	cs := p.sb.CP.Client
	p.sb.StopLBController(p.lb)
	// Served before the controller stopped: victim (DeletedAddressReserved) holds the finalizer.
	v, err := cs.CoreV1().Services(p.ns).Get(ctx, "victim", metav1.GetOptions{})
	require.NoError(t, err)
	require.Contains(t, v.Finalizers, lbapi.Finalizer)
	require.NoError(t, cs.CoreV1().Services(p.ns).Delete(ctx, "victim", metav1.DeleteOptions{}))
	v, err = cs.CoreV1().Services(p.ns).Get(ctx, "victim", metav1.GetOptions{})
	require.NoError(t, err, "without a controller the deletion hangs on the finalizer")
	require.NotNil(t, v.DeletionTimestamp)

	require.NoError(t, grantCleanupRBAC(ctx, p.sb))
	kubeconfig, err := p.sb.CP.KubeconfigFor(cleanupUser)
	require.NoError(t, err)
	cmd := exec.CommandContext(ctx, filepath.Join(p.sb.Bins.Dir, "antrea-controller"), "cleanup-finalizers",
		"--kubeconfig", kubeconfig, "--timeout", "60s")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "antrea-controller cleanup-finalizers:\n%s", out)
	t.Logf("antrea-controller cleanup-finalizers:\n%s", out)

	framework.WaitFor(t, providerTimeout, "the deleted victim to be gone", func(ctx context.Context) (bool, string, error) {
		_, err := cs.CoreV1().Services(p.ns).Get(ctx, "victim", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err), nil
	})
	list, err := cs.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, s := range list.Items {
		require.NotContains(t, s.Finalizers, lbapi.Finalizer, "%s/%s", s.Namespace, s.Name)
		require.NotContains(t, s.Annotations, lbapi.AnnotationAnnouncingNode, "%s/%s", s.Namespace, s.Name)
		if s.Spec.LoadBalancerClass == nil {
			require.Empty(t, s.Status.LoadBalancer.Ingress, "%s/%s", s.Namespace, s.Name)
		}
	}
}

// grantCleanupRBAC gives cleanupUser the chart's uninstall hook rules.
func grantCleanupRBAC(ctx context.Context, sb *framework.Sandbox) error {
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: cleanupUser},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"get", "list", "update"}},
			{APIGroups: []string{""}, Resources: []string{"services/status"}, Verbs: []string{"update"}},
		},
	}
	if _, err := sb.CP.Client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return err
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: cleanupUser},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cleanupUser},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: cleanupUser}},
	}
	_, err := sb.CP.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})
	return err
}
