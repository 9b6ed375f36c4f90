//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// waitTimeout bounds each wait on a controller; they react in well under a second when healthy.
const waitTimeout = 30 * time.Second

// TestControlPlane starts the sandbox control plane and checks what later suites rely on: the
// endpointslice, nodeipam, namespace, serviceaccount(-token) and garbage-collector controllers run,
// client certificates authenticate, and RBAC is enforced.
func TestControlPlane(t *testing.T) {
	cp := framework.StartControlPlane(t, framework.ControlPlaneOptions{})
	ctx := context.Background()
	cs := cp.Client
	const ns = "cp-e2e"

	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)

	t.Run("AdminIdentity", func(t *testing.T) {
		review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		require.NoError(t, err)
		require.Equal(t, "kubernetes-admin", review.Status.UserInfo.Username)
		require.Contains(t, review.Status.UserInfo.Groups, "system:masters")
	})

	t.Run("EndpointSliceForService", func(t *testing.T) {
		svc, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: corev1.ServiceSpec{
				Selector: map[string]string{"app": "web"},
				Ports:    []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		requireIPInCIDR(t, svc.Spec.ClusterIP, cp.ServiceCIDR, "ClusterIP of Service web")

		var slice discoveryv1.EndpointSlice
		framework.WaitFor(t, waitTimeout, "the endpointslice controller to create an EndpointSlice for Service cp-e2e/web",
			func(ctx context.Context) (bool, string, error) {
				list, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=web"})
				if err != nil {
					return false, err.Error(), nil
				}
				if len(list.Items) == 0 {
					return false, "no EndpointSlice labelled for the Service", nil
				}
				slice = list.Items[0]
				return true, "", nil
			})
		require.Equal(t, "endpointslice-controller.k8s.io", slice.Labels[discoveryv1.LabelManagedBy])
		require.Equal(t, discoveryv1.AddressTypeIPv4, slice.AddressType)
		require.Empty(t, slice.Endpoints, "a Service selecting no Pods has no endpoints")
		require.Len(t, slice.OwnerReferences, 1)
		require.Equal(t, svc.UID, slice.OwnerReferences[0].UID, "the EndpointSlice is owned by its Service")
	})

	t.Run("NodeIPAMAssignsPodCIDRs", func(t *testing.T) {
		cidrs := map[string]string{}
		for _, name := range []string{"node-a", "node-b"} {
			_, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			require.NoError(t, err)
		}
		for _, name := range []string{"node-a", "node-b"} {
			framework.WaitFor(t, waitTimeout, "nodeipam to assign a podCIDR to Node "+name, func(ctx context.Context) (bool, string, error) {
				n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return false, err.Error(), nil
				}
				cidrs[name] = n.Spec.PodCIDR
				return n.Spec.PodCIDR != "", "spec.podCIDR is empty", nil
			})
			_, n, err := net.ParseCIDR(cidrs[name])
			require.NoError(t, err, "podCIDR of Node %s", name)
			ones, _ := n.Mask.Size()
			require.Equal(t, 24, ones, "podCIDR %s of Node %s", cidrs[name], name)
			requireIPInCIDR(t, n.IP.String(), cp.ClusterCIDR, "podCIDR of Node "+name)
		}
		require.NotEqual(t, cidrs["node-a"], cidrs["node-b"], "two Nodes got the same podCIDR")
	})

	t.Run("RBACIsEnforced", func(t *testing.T) {
		nobody, _ := cp.ClientFor(t, "e2e-nobody")
		review, err := nobody.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		require.NoError(t, err, "a minted client certificate must authenticate")
		require.Equal(t, "e2e-nobody", review.Status.UserInfo.Username)

		_, err = nobody.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
		require.True(t, apierrors.IsForbidden(err), "listing Secrets without a grant: want Forbidden, got %v", err)

		// Granting the permission through RBAC lets the same identity in: authorization is RBAC's.
		_, err = cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: "secret-reader"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list"}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "nobody-reads-secrets"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "secret-reader"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "e2e-nobody"}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		framework.WaitFor(t, waitTimeout, "RBAC to let e2e-nobody list Secrets in cp-e2e after the RoleBinding", func(ctx context.Context) (bool, string, error) {
			_, err := nobody.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			return true, "", nil
		})
		_, err = nobody.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{})
		require.True(t, apierrors.IsForbidden(err), "the Role grants only namespace cp-e2e: want Forbidden in default, got %v", err)
	})

	t.Run("ServiceAccountTokens", func(t *testing.T) {
		framework.WaitFor(t, waitTimeout, "the serviceaccount controller to create ServiceAccount cp-e2e/default", func(ctx context.Context) (bool, string, error) {
			_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			return true, "", nil
		})
		_, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "default-token", Annotations: map[string]string{corev1.ServiceAccountNameKey: "default"}},
			Type:       corev1.SecretTypeServiceAccountToken,
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		framework.WaitFor(t, waitTimeout, "the serviceaccount-token controller to fill Secret cp-e2e/default-token", func(ctx context.Context) (bool, string, error) {
			s, err := cs.CoreV1().Secrets(ns).Get(ctx, "default-token", metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			return len(s.Data[corev1.ServiceAccountTokenKey]) > 0 && len(s.Data[corev1.ServiceAccountRootCAKey]) > 0,
				fmt.Sprintf("data keys: %d", len(s.Data)), nil
		})
		s, err := cs.CoreV1().Secrets(ns).Get(ctx, "default-token", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, cp.CA.CertPEM, s.Data[corev1.ServiceAccountRootCAKey], "the token Secret carries --root-ca-file")

		// The apiserver accepts the token the controller signed.
		cfg := *cp.Config
		cfg.TLSClientConfig.CertData, cfg.TLSClientConfig.KeyData = nil, nil
		cfg.BearerToken = string(s.Data[corev1.ServiceAccountTokenKey])
		review, err := clientsetFor(t, &cfg).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		require.NoError(t, err)
		require.Equal(t, "system:serviceaccount:cp-e2e:default", review.Status.UserInfo.Username)
	})

	t.Run("GarbageCollectorAndNamespaceDeletion", func(t *testing.T) {
		owner, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name:            "dependent",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}},
		}}, metav1.CreateOptions{})
		require.NoError(t, err)
		require.NoError(t, cs.CoreV1().ConfigMaps(ns).Delete(ctx, "owner", metav1.DeleteOptions{}))
		framework.WaitFor(t, waitTimeout, "the garbage collector to delete ConfigMap cp-e2e/dependent after its owner", func(ctx context.Context) (bool, string, error) {
			_, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "dependent", metav1.GetOptions{})
			return apierrors.IsNotFound(err), fmt.Sprintf("get: %v", err), nil
		})

		require.NoError(t, cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}))
		framework.WaitFor(t, waitTimeout, "the namespace controller to finish deleting Namespace cp-e2e", func(ctx context.Context) (bool, string, error) {
			n, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, "", nil
			}
			if err != nil {
				return false, err.Error(), nil
			}
			return false, fmt.Sprintf("phase %s, conditions %v", n.Status.Phase, n.Status.Conditions), nil
		})
	})
}

func requireIPInCIDR(t *testing.T, ip, cidr, what string) {
	t.Helper()
	_, n, err := net.ParseCIDR(cidr)
	require.NoError(t, err)
	parsed := net.ParseIP(ip)
	require.NotNil(t, parsed, "%s: %q is not an IP", what, ip)
	require.True(t, n.Contains(parsed), "%s: %s is not in %s", what, ip, cidr)
}

func clientsetFor(t *testing.T, cfg *rest.Config) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return cs
}
