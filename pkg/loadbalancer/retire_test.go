package loadbalancer

import (
	"errors"
	"net/netip"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/antrea-proxy/antrea-proxy/pkg/lbapi"
)

// TestDroppedAddressKeptUntilStatusWritten: whatever makes a Service drop
// the address it publishes during a normal sync, the address stays
// blocked while the status write that stops publishing it fails; a
// Service waiting for exactly that address gets it only once the write
// succeeded, and is queued by that release.
func TestDroppedAddressKeptUntilStatusWritten(t *testing.T) {
	held := netip.MustParseAddr("10.0.0.1")
	for _, tc := range []struct {
		name   string
		mutate func(*v1.Service)
	}{
		{"loadBalancerIP changes", func(s *v1.Service) { s.Spec.LoadBalancerIP = "10.0.0.2" }},
		{"pool changes", func(s *v1.Service) { s.Spec.LoadBalancerIP = ""; withPool("proxy")(s) }},
		{"family dropped", func(s *v1.Service) {
			s.Spec.LoadBalancerIP = ""
			s.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol}
		}},
		{"loadBalancerIP malformed", func(s *v1.Service) { s.Spec.LoadBalancerIP = "not-an-ip" }},
		{"required feature unknown", withAnn(lbapi.AnnotationRequiredFeatures, "no-such-feature")},
		{"class changes", func(s *v1.Service) { other := "example.com/other"; s.Spec.LoadBalancerClass = &other }},
		{"type changes", toClusterIP},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, testPools(), readyNode("node-a", nil))
			var failing atomic.Bool
			h.client.PrependReactor("update", "services", func(action k8stesting.Action) (bool, runtime.Object, error) {
				upd := action.(k8stesting.UpdateAction).GetObject().(*v1.Service)
				if failing.Load() && action.GetSubresource() == "status" && upd.Name == "a" {
					return true, nil, errors.New("injected status write failure")
				}
				return false, nil, nil
			})
			wantsHeld := func(s *v1.Service) { s.Spec.LoadBalancerIP = held.String() }
			h.create(lbService("a", wantsHeld))
			require.Equal(t, []string{"10.0.0.1"}, ingressIPs(h.sync("a")))
			h.create(lbService("b", wantsHeld))
			require.Empty(t, ingressIPs(h.sync("b")))

			failing.Store(true)
			h.update("a", tc.mutate)
			h.settle("a", "b")
			require.Error(t, h.ctrl.sync(h.ctx, types.NamespacedName{Namespace: "ns", Name: "a"}))
			require.Empty(t, ingressIPs(h.sync("b")), "b must not get an address a still publishes")
			require.Equal(t, 1, countHolding(h, held))

			failing.Store(false)
			a := h.sync("a")
			require.NotContains(t, ingressIPs(a), "10.0.0.1")
			require.Contains(t, h.settle("a", "b"), "b", "the release queues the waiter")
			require.Equal(t, []string{"10.0.0.1"}, ingressIPs(h.sync("b")))
			require.Equal(t, []types.NamespacedName{{Namespace: "ns", Name: "b"}}, h.ctrl.alloc.Holders(held))
		})
	}
}

// countHolding counts the Services holding or retiring addr.
func countHolding(h *harness, addr netip.Addr) int {
	n := len(h.ctrl.alloc.Holders(addr))
	for _, name := range []string{"a", "b"} {
		for _, r := range h.ctrl.alloc.Retiring(types.NamespacedName{Namespace: "ns", Name: name}) {
			if r == addr {
				n++
			}
		}
	}
	return n
}
