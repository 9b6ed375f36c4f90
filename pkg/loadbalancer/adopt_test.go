package loadbalancer

import (
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/antrea-proxy/antrea-proxy/pkg/lbapi"
	c "github.com/antrea-proxy/antrea-proxy/pkg/loadbalancer/conditions"
)

func withIngress(ip string) func(*v1.Service) {
	return func(s *v1.Service) { s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: ip}} }
}

// TestAdoptOnStart: Services another provider served (status set, no
// finalizer) keep an in-pool address on controller start; one outside
// every pool is replaced.
func TestAdoptOnStart(t *testing.T) {
	h := newHarness(t, testPools(), readyNode("node-a", nil),
		lbService("in", withIngress("10.0.0.2")), lbService("out", withIngress("203.0.113.5")))
	require.NoError(t, h.ctrl.restore())
	in := h.sync("in")
	require.Equal(t, []string{"10.0.0.2"}, ingressIPs(in), "adopted, not replaced")
	require.Contains(t, in.Finalizers, lbapi.Finalizer)
	require.Equal(t, "10.0.0.2=node-a", in.Annotations[lbapi.AnnotationAnnouncingNode])
	require.Equal(t, serving, condsOf(in)[c.TypeServing])
	out := h.sync("out")
	require.Equal(t, []string{"10.0.0.1"}, ingressIPs(out), "outside every pool: a new address")
}

// TestAdoptOnSync: a Service whose status another provider set while the
// controller runs keeps its in-pool address.
func TestAdoptOnSync(t *testing.T) {
	h := newHarness(t, testPools(), readyNode("node-a", nil))
	h.create(lbService("mig", withIngress("10.0.0.2")))
	require.Equal(t, []string{"10.0.0.2"}, ingressIPs(h.sync("mig")))
	h.create(lbService("new"))
	require.Equal(t, []string{"10.0.0.1"}, ingressIPs(h.sync("new")))
}
