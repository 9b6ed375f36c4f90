package loadbalancer

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/antrea-proxy/antrea-proxy/pkg/config"
	c "github.com/antrea-proxy/antrea-proxy/pkg/loadbalancer/conditions"
)

var proxyAddr = netip.MustParseAddr("192.0.2.1")

func toClusterIP(s *v1.Service) { s.Spec.Type = v1.ServiceTypeClusterIP }

// settle waits until the controller's cache has the stored version of
// each Service, then empties the queue and returns what it held.
func (h *harness) settle(names ...string) []string {
	h.t.Helper()
	for _, name := range names {
		stored, err := h.client.CoreV1().Services("ns").Get(h.ctx, name, metav1.GetOptions{})
		require.NoError(h.t, err)
		require.Eventually(h.t, func() bool {
			cached, err := h.ctrl.services.Services("ns").Get(name)
			return err == nil && cached.ResourceVersion == stored.ResourceVersion
		}, 5*time.Second, time.Millisecond)
	}
	var out []string
	for h.ctrl.queue.Len() > 0 {
		k, _ := h.ctrl.queue.Get()
		h.ctrl.queue.Done(k)
		out = append(out, k.Name)
	}
	return out
}

// TestReleaseQueuesWaitersLongestFirst: with pool "proxy" (one address)
// exhausted, two Services wait; when the holder becomes a ClusterIP
// Service, both are queued by the release, longest waiting first, and
// that one gets the address.
func TestReleaseQueuesWaitersLongestFirst(t *testing.T) {
	h := newHarness(t, testPools(), readyNode("node-a", nil))
	h.create(lbService("a", withPool("proxy")))
	require.Equal(t, []string{"192.0.2.1"}, ingressIPs(h.sync("a")))

	// "w2" starts waiting before "w1": order is by waiting time, not name.
	h.create(lbService("w2", withPool("proxy")))
	h.create(lbService("w1", withPool("proxy")))
	h.clock.SetTime(t0.Add(time.Minute))
	w2 := h.sync("w2")
	h.clock.SetTime(t0.Add(2 * time.Minute))
	w1 := h.sync("w1")
	for _, w := range []*v1.Service{w1, w2} {
		require.Empty(t, ingressIPs(w), w.Name)
		require.Equal(t, notServing(c.ReasonInfrastructure), condsOf(w)[c.TypeServing], w.Name)
	}
	// A later sync does not reset the waiting time.
	h.clock.SetTime(t0.Add(3 * time.Minute))
	h.sync("w2")

	h.update("a", toClusterIP)
	h.settle("a", "w1", "w2")
	h.sync("a")
	queued := slices.DeleteFunc(h.settle("a"), func(n string) bool { return n == "a" })
	require.Equal(t, []string{"w2", "w1"}, queued, "the release queues the waiters, longest waiting first")

	require.Equal(t, []string{"192.0.2.1"}, ingressIPs(h.sync("w2")))
	require.Equal(t, serving, condsOf(h.sync("w2"))[c.TypeServing])
	require.Empty(t, ingressIPs(h.sync("w1")))
	require.Equal(t, []types.NamespacedName{{Namespace: "ns", Name: "w1"}}, h.ctrl.waiters())
}

// TestFailedCleanupWriteKeepsAddress: while the status write that stops
// publishing the address fails, the address stays held and a waiting
// Service does not get it; once the write succeeds, it is released.
func TestFailedCleanupWriteKeepsAddress(t *testing.T) {
	h := newHarness(t, testPools(), readyNode("node-a", nil))
	var failing atomic.Bool
	h.client.PrependReactor("update", "services", func(action k8stesting.Action) (bool, runtime.Object, error) {
		upd := action.(k8stesting.UpdateAction).GetObject().(*v1.Service)
		if failing.Load() && action.GetSubresource() == "status" && upd.Name == "a" {
			return true, nil, errors.New("injected status write failure")
		}
		return false, nil, nil
	})
	h.create(lbService("a", withPool("proxy")))
	require.Equal(t, []string{"192.0.2.1"}, ingressIPs(h.sync("a")))
	h.create(lbService("b", withPool("proxy")))
	require.Empty(t, ingressIPs(h.sync("b")))

	failing.Store(true)
	h.update("a", toClusterIP)
	h.settle("a", "b")
	require.Error(t, h.ctrl.sync(h.ctx, types.NamespacedName{Namespace: "ns", Name: "a"}))
	require.Equal(t, []netip.Addr{proxyAddr}, h.ctrl.alloc.Retiring(types.NamespacedName{Namespace: "ns", Name: "a"}),
		"the address stays blocked while the Service may still publish it")
	require.Empty(t, ingressIPs(h.sync("b")))

	failing.Store(false)
	a := h.sync("a")
	require.Empty(t, ingressIPs(a))
	require.Empty(t, a.Finalizers)
	require.Empty(t, h.ctrl.alloc.Holders(proxyAddr))
	require.Zero(t, h.ctrl.alloc.InUse())
	require.Contains(t, h.settle("a", "b"), "b", "the release queues the waiter")
	require.Equal(t, []string{"192.0.2.1"}, ingressIPs(h.sync("b")))
}

// TestWaiterServedOnRelease runs the controller: the informers never
// resync, so only the release can bring the waiting Service its address.
func TestWaiterServedOnRelease(t *testing.T) {
	client := fake.NewClientset(readyNode("node-a", nil))
	_, _ = apiServerLike(client, false)
	watching := watchesStarted(client)
	pools := []config.IPPool{{Name: "one", Ranges: []string{"10.3.0.1-10.3.0.1"}}}
	startController(t, client, watching, pools)
	ctx := context.Background()
	_, err := client.CoreV1().Services("ns").Create(ctx, lbService("a"), metav1.CreateOptions{})
	require.NoError(t, err)
	waitAllServing(t, client, 1)
	_, err = client.CoreV1().Services("ns").Create(ctx, lbService("b"), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		b, err := client.CoreV1().Services("ns").Get(ctx, "b", metav1.GetOptions{})
		return err == nil && condsOf(b)[c.TypeServing] == notServing(c.ReasonInfrastructure)
	}, 5*time.Second, time.Millisecond)

	start := time.Now()
	require.NoError(t, client.CoreV1().Services("ns").Delete(ctx, "a", metav1.DeleteOptions{}))
	b := waitAllServing(t, client, 1)["b"]
	require.Equal(t, []string{"10.3.0.1"}, ingressIPs(b))
	t.Logf("waiting Service served %v after the address was released", time.Since(start))
}

// TestYoungerSyncedFirstDoesNotOvertake: after a release, whichever
// worker syncs first, the freed address goes to the Service waiting
// longest: a younger waiter or a new Service synced before it gets
// nothing.
func TestYoungerSyncedFirstDoesNotOvertake(t *testing.T) {
	h := newHarness(t, testPools(), readyNode("node-a", nil))
	h.create(lbService("a", withPool("proxy")))
	require.Equal(t, []string{"192.0.2.1"}, ingressIPs(h.sync("a")))
	h.create(lbService("old", withPool("proxy")))
	require.Empty(t, ingressIPs(h.sync("old")))
	h.create(lbService("young", withPool("proxy")))
	require.Empty(t, ingressIPs(h.sync("young")))

	h.update("a", toClusterIP)
	h.settle("a", "old", "young")
	h.sync("a")
	h.create(lbService("new", withPool("proxy")))
	young := h.sync("young")
	require.Empty(t, ingressIPs(young), "a younger waiter synced first does not take the address")
	require.Contains(t, servingCond(t, young).Message, "no free IPv4 address")
	require.Empty(t, ingressIPs(h.sync("new")), "nor does a new Service")
	require.Equal(t, []string{"192.0.2.1"}, ingressIPs(h.sync("old")))
	require.Equal(t, []types.NamespacedName{{Namespace: "ns", Name: "young"}, {Namespace: "ns", Name: "new"}}, h.ctrl.waiters())
}
