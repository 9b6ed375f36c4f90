package loadbalancer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/antrea-proxy/antrea-proxy/pkg/config"
	"github.com/antrea-proxy/antrea-proxy/pkg/lbapi"
	c "github.com/antrea-proxy/antrea-proxy/pkg/loadbalancer/conditions"
)

// running is a controller started with Run and its own informers.
type running struct {
	ctrl *Controller
	stop func()
}

// watchesStarted signals every Services watch the fake clientset opens.
// Tests wait for it before writing in bulk: the fake tracker replays the
// changes made between an informer's List and Watch into a 100-slot
// channel and panics when it overflows.
func watchesStarted(client *fake.Clientset) <-chan struct{} {
	started := make(chan struct{}, 16)
	client.PrependWatchReactor("services", func(action k8stesting.Action) (bool, watch.Interface, error) {
		wa := action.(k8stesting.WatchActionImpl)
		w, err := client.Tracker().Watch(servicesGVR, action.GetNamespace(), wa.ListOptions)
		started <- struct{}{}
		return true, w, err
	})
	return started
}

func startController(t *testing.T, client *fake.Clientset, watching <-chan struct{}, pools []config.IPPool) *running {
	t.Helper()
	ps, err := NewPools(pools)
	require.NoError(t, err)
	factory := informers.NewSharedInformerFactory(client, 0)
	ctrl, err := New(client, factory, Options{Class: testClass, Pools: ps, Recorder: &record.FakeRecorder{},
		Clock: clocktesting.NewFakeClock(t0), Workers: 8})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	select {
	case <-watching:
	case <-time.After(10 * time.Second):
		t.Fatal("the Services informer did not start watching")
	}
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			require.NoError(t, <-done)
			factory.Shutdown()
		})
	}
	t.Cleanup(stop)
	return &running{ctrl: ctrl, stop: stop}
}

// waitAllServing waits until every Service in ns/ is Serving=True and
// returns them by name.
func waitAllServing(t *testing.T, client *fake.Clientset, n int) map[string]*v1.Service {
	t.Helper()
	var got map[string]*v1.Service
	require.Eventually(t, func() bool {
		list, err := client.CoreV1().Services("ns").List(context.Background(), metav1.ListOptions{})
		if err != nil || len(list.Items) != n {
			return false
		}
		got = map[string]*v1.Service{}
		for i := range list.Items {
			svc := &list.Items[i]
			if condsOf(svc)[c.TypeServing] != serving {
				return false
			}
			got[svc.Name] = svc
		}
		return true
	}, 60*time.Second, 10*time.Millisecond)
	return got
}

func TestConcurrentCreatesGetDistinctAddresses(t *testing.T) {
	const n = 200
	client := fake.NewClientset(readyNode("node-a", nil), readyNode("node-b", nil), readyNode("node-c", nil))
	conflicts, statusConflicts := apiServerLike(client, true)
	r := startController(t, client, watchesStarted(client), []config.IPPool{{Name: "big", CIDRs: []string{"10.1.0.0/23"}}})

	// Another writer keeps relabelling Services, so the controller's
	// writes keep meeting stale resourceVersions.
	ctx, stopMeddler := context.WithCancel(context.Background())
	var meddler sync.WaitGroup
	meddler.Add(1)
	go func() {
		defer meddler.Done()
		for i := 0; ctx.Err() == nil; i++ {
			name := fmt.Sprint("s", rand.IntN(n))
			svc, err := client.CoreV1().Services("ns").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				continue
			}
			if svc.Labels == nil {
				svc.Labels = map[string]string{}
			}
			svc.Labels["touched"] = fmt.Sprint(i)
			_, _ = client.CoreV1().Services("ns").Update(ctx, svc, metav1.UpdateOptions{})
		}
	}()

	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := client.CoreV1().Services("ns").Create(context.Background(), lbService(fmt.Sprint("s", i)), metav1.CreateOptions{})
			require.NoError(t, err)
		}()
	}
	close(start)
	wg.Wait()
	svcs := waitAllServing(t, client, n)
	stopMeddler()
	meddler.Wait()

	seen := map[string]string{}
	for name, svc := range svcs {
		ips := ingressIPs(svc)
		require.Len(t, ips, 1, name)
		require.NotContains(t, seen, ips[0], "%s handed out to %s and %s", ips[0], seen[ips[0]], name)
		seen[ips[0]] = name
		require.Contains(t, svc.Finalizers, lbapi.Finalizer, name)
		require.Contains(t, svc.Annotations[lbapi.AnnotationAnnouncingNode], ips[0]+"=node-", name)
		require.Equal(t, []netip.Addr{netip.MustParseAddr(ips[0])}, assignedAddrs(r.ctrl, svc))
	}
	require.Equal(t, n, r.ctrl.alloc.InUse())
	require.GreaterOrEqual(t, statusConflicts.Load(), int64(n), "every Service's first status write met a conflict")
	t.Logf("%d Services, %d conflicts (%d on the controller's status writes) resolved", n, conflicts.Load(), statusConflicts.Load())
}

func assignedAddrs(ctrl *Controller, svc *v1.Service) []netip.Addr {
	var out []netip.Addr
	for _, a := range ctrl.alloc.Assigned(keyOf(svc)) {
		out = append(out, a.Addr)
	}
	return out
}

func TestRestartKeepsAllocations(t *testing.T) {
	client := fake.NewClientset(readyNode("node-a", nil), readyNode("node-b", nil))
	_, _ = apiServerLike(client, true)
	watching := watchesStarted(client)
	pools := []config.IPPool{
		{Name: "vip", CIDRs: []string{"10.2.0.0/27", "fd00:2::/123"}},
		{Name: "proxy", IPMode: config.IPModeProxy, Ranges: []string{"192.0.2.10-192.0.2.20"}},
	}
	create := func(svc *v1.Service) {
		_, err := client.CoreV1().Services("ns").Create(context.Background(), svc, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	first := startController(t, client, watching, pools)
	for i := range 8 {
		create(lbService(fmt.Sprint("old", i)))
	}
	create(lbService("dual", dualStack(v1.IPFamilyPolicyRequireDualStack)))
	create(lbService("edge", withPool("proxy")))
	share := withAnn(lbapi.AnnotationAllowSharedIP, "k")
	create(lbService("share-tcp", share))
	create(lbService("share-udp", share, func(s *v1.Service) {
		s.Spec.Ports = []v1.ServicePort{{Name: "dns", Protocol: v1.ProtocolUDP, Port: 53}}
	}))
	before := waitAllServing(t, client, 12)
	require.Equal(t, ingressIPs(before["share-tcp"]), ingressIPs(before["share-udp"]))
	first.stop()

	// Services created while no controller runs race the restored ones
	// when the next controller starts: the restored ones must keep theirs.
	for i := range 10 {
		create(lbService(fmt.Sprint("new", i)))
	}
	second := startController(t, client, watching, pools)
	after := waitAllServing(t, client, 22)
	used := map[string]string{}
	for name, svc := range after {
		if b, ok := before[name]; ok {
			require.Equal(t, ingressIPs(b), ingressIPs(svc), "%s kept its addresses", name)
		}
		for _, ip := range ingressIPs(svc) {
			if other, dup := used[ip]; dup {
				require.ElementsMatch(t, []string{"share-tcp", "share-udp"}, []string{other, name}, "%s used twice", ip)
			}
			used[ip] = name
		}
	}
	require.Equal(t, v1.LoadBalancerIPModeProxy, *after["edge"].Status.LoadBalancer.Ingress[0].IPMode)
	require.Equal(t, before["dual"].Annotations[lbapi.AnnotationAnnouncingNode], after["dual"].Annotations[lbapi.AnnotationAnnouncingNode],
		"announcing nodes survive a restart")
	require.Equal(t, 22, second.ctrl.alloc.InUse())
}

func TestDeletedWhileStoppedIsReleased(t *testing.T) {
	client := fake.NewClientset(readyNode("node-a", nil))
	_, _ = apiServerLike(client, true)
	watching := watchesStarted(client)
	pools := []config.IPPool{{Name: "one", Ranges: []string{"10.3.0.1-10.3.0.1"}}}
	first := startController(t, client, watching, pools)
	_, err := client.CoreV1().Services("ns").Create(context.Background(), lbService("a"), metav1.CreateOptions{})
	require.NoError(t, err)
	waitAllServing(t, client, 1)
	first.stop()
	require.NoError(t, client.CoreV1().Services("ns").Delete(context.Background(), "a", metav1.DeleteOptions{}))
	_, err = client.CoreV1().Services("ns").Create(context.Background(), lbService("b"), metav1.CreateOptions{})
	require.NoError(t, err)
	startController(t, client, watching, pools)
	b := waitAllServing(t, client, 1)["b"]
	require.Equal(t, []string{"10.3.0.1"}, ingressIPs(b))
}

func keyOf(svc *v1.Service) types.NamespacedName {
	return types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
}
