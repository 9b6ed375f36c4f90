//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/antrea-proxy/antrea-proxy/pkg/lbapi"
	"github.com/antrea-proxy/antrea-proxy/pkg/loadbalancer/conditions"
	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// Addresses of the tenancy subtests, high in the Proxy pool so that no other subtest's
// allocation holds them (Proxy mode: only the provider's verdict matters here).
const (
	sharedProxyIP   = "172.18.1.240"
	reservedProxyIP = "172.18.1.241"
	tenantNamespace = "lbtenant"
)

// tenantService is a LoadBalancer Service in ns requesting ip, with one TCP port.
func tenantService(ns, name, ip string, port int32, shareKey string) *corev1.Service {
	ann := map[string]string{lbapi.AnnotationLoadBalancerIPs: ip}
	if shareKey != "" {
		ann[lbapi.AnnotationAllowSharedIP] = shareKey
	}
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: ann},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "none"},
			Ports: []corev1.ServicePort{{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: port, TargetPort: intstr.FromInt32(framework.EchoPort)}}},
	}
}

// waitServing waits until the Service's Serving condition has reason and a message containing
// msg, and returns the Service.
func (p *provider) waitServing(t *testing.T, ns, name, reason, msg string) *corev1.Service {
	t.Helper()
	var got *corev1.Service
	framework.WaitFor(t, providerTimeout, fmt.Sprintf("%s/%s to be %s (%q)", ns, name, reason, msg), func(ctx context.Context) (bool, string, error) {
		svc, err := p.sb.CP.Client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		got = svc
		c := findCondition(svc, conditions.TypeServing)
		if c == nil {
			return false, "no Serving condition", nil
		}
		return c.Reason == reason && strings.Contains(c.Message, msg), c.Reason + ": " + c.Message, nil
	})
	return got
}

// crossNamespaceSharing: a Service of another namespace with the same allow-shared-ip key and
// no clashing port does not get a shared address (the pool does not allow cross-namespace
// sharing): Serving=False/Unsupported and a Warning Event say why; a Service of the holder's
// namespace with the same key shares it.
func (p *provider) crossNamespaceSharing(t *testing.T) {
	ctx := context.Background()
	cs := p.sb.CP.Client
	create := func(ns string, svc *corev1.Service) {
		_, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	create(p.ns, tenantService(p.ns, "share-a", sharedProxyIP, 80, "k"))
	p.serving(t, "share-a")
	create(tenantNamespace, tenantService(tenantNamespace, "share-b", sharedProxyIP, 8080, "k"))
	b := p.waitServing(t, tenantNamespace, "share-b", conditions.ReasonUnsupported, "allowCrossNamespaceSharing")
	require.Empty(t, b.Status.LoadBalancer.Ingress)
	framework.WaitFor(t, providerTimeout, "a Warning Event on lbtenant/share-b", func(ctx context.Context) (bool, string, error) {
		evs, err := cs.CoreV1().Events(tenantNamespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=share-b"})
		if err != nil {
			return false, "", err
		}
		for _, e := range evs.Items {
			if e.Type == corev1.EventTypeWarning && e.Reason == "AllocationFailed" && strings.Contains(e.Message, "allowCrossNamespaceSharing") {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%d Events", len(evs.Items)), nil
	})
	create(p.ns, tenantService(p.ns, "share-c", sharedProxyIP, 8080, "k"))
	c := p.serving(t, "share-c")
	require.Equal(t, sharedProxyIP, ingressIP(t, c, corev1.LoadBalancerIPModeProxy).String())
}

// deletedAddressReserved: a tenant waiting for the address another namespace's Service
// requested does not get it when that Service is deleted; the Service re-created under the same
// namespace/name gets it back.
func (p *provider) deletedAddressReserved(t *testing.T) {
	ctx := context.Background()
	cs := p.sb.CP.Client
	_, err := cs.CoreV1().Services(p.ns).Create(ctx, tenantService(p.ns, "victim", reservedProxyIP, 80, ""), metav1.CreateOptions{})
	require.NoError(t, err)
	p.serving(t, "victim")
	_, err = cs.CoreV1().Services(tenantNamespace).Create(ctx, tenantService(tenantNamespace, "grab", reservedProxyIP, 80, ""), metav1.CreateOptions{})
	require.NoError(t, err)
	p.waitServing(t, tenantNamespace, "grab", conditions.ReasonInfrastructure, "is in use by "+p.ns+"/victim")

	require.NoError(t, cs.CoreV1().Services(p.ns).Delete(ctx, "victim", metav1.DeleteOptions{}))
	framework.WaitFor(t, providerTimeout, "victim to be deleted (the controller removed its finalizer)", func(ctx context.Context) (bool, string, error) {
		_, err := cs.CoreV1().Services(p.ns).Get(ctx, "victim", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err), nil
	})
	g := p.waitServing(t, tenantNamespace, "grab", conditions.ReasonInfrastructure, "is reserved for "+p.ns+"/victim, deleted")
	require.Empty(t, g.Status.LoadBalancer.Ingress)

	_, err = cs.CoreV1().Services(p.ns).Create(ctx, tenantService(p.ns, "victim", reservedProxyIP, 80, ""), metav1.CreateOptions{})
	require.NoError(t, err)
	v := p.serving(t, "victim")
	require.Equal(t, reservedProxyIP, ingressIP(t, v, corev1.LoadBalancerIPModeProxy).String())
	g, err = cs.CoreV1().Services(tenantNamespace).Get(ctx, "grab", metav1.GetOptions{})
	require.NoError(t, err)
	require.Empty(t, g.Status.LoadBalancer.Ingress)
}
