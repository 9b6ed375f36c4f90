package loadbalancer

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/antrea-proxy/antrea-proxy/pkg/config"
	"github.com/antrea-proxy/antrea-proxy/pkg/loadbalancer/conditions"
)

const testClass = "antrea-proxy.io/lb"

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// testPools: "vip" (10.0.0.1-10.0.0.2, fd00::1-fd00::2), "proxy" (Proxy,
// 192.0.2.1 only, IPv4 only), "sel" (VIP, 10.0.1.1 only, nodes lb=yes), "proxy-ranges"
// (Proxy, 192.0.2.9 only, used only when named; its proxy enforces source ranges).
func testPools() []config.IPPool {
	return []config.IPPool{
		{Name: "vip", Ranges: []string{"10.0.0.1-10.0.0.2", "fd00::1-fd00::2"}},
		{Name: "proxy", IPMode: config.IPModeProxy, Ranges: []string{"192.0.2.1-192.0.2.1"}},
		{Name: "sel", Ranges: []string{"10.0.1.1-10.0.1.1"},
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"lb": "yes"}}},
		{Name: "proxy-ranges", IPMode: config.IPModeProxy, Ranges: []string{"192.0.2.9-192.0.2.9"},
			AutoAssign: ptrTo(false), ProxyEnforcesSourceRanges: true},
	}
}

var servicesGVR = v1.SchemeGroupVersion.WithResource("services")

// apiServerLike makes the fake clientset behave like an API server for
// Services: every write bumps metadata.resourceVersion, an update whose
// resourceVersion is stale fails with a Conflict, Update keeps the stored
// status and UpdateStatus keeps everything but the status. It returns the
// number of conflicts returned so far, and of those on UpdateStatus (which
// only the controller calls). With interfere, the first UpdateStatus of
// every Service finds it changed by "someone else" (its resourceVersion is
// bumped) and fails with a Conflict.
func apiServerLike(client *fake.Clientset, interfere bool) (conflicts, statusConflicts *atomic.Int64) {
	var mu sync.Mutex
	interfered := map[string]bool{}
	conflicts, statusConflicts = new(atomic.Int64), new(atomic.Int64)
	rv := int64(100)
	tracker := client.Tracker()
	client.PrependReactor("create", "services", func(action k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		svc := action.(k8stesting.CreateAction).GetObject().(*v1.Service).DeepCopy()
		rv++
		svc.ResourceVersion = strconv.FormatInt(rv, 10)
		svc.Generation = 1
		if err := tracker.Create(servicesGVR, svc, svc.Namespace); err != nil {
			return true, nil, err
		}
		return true, svc, nil
	})
	client.PrependReactor("update", "services", func(action k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		upd := action.(k8stesting.UpdateAction).GetObject().(*v1.Service)
		obj, err := tracker.Get(servicesGVR, upd.Namespace, upd.Name)
		if err != nil {
			return true, nil, err
		}
		cur := obj.(*v1.Service)
		if key := upd.Namespace + "/" + upd.Name; interfere && action.GetSubresource() == "status" && !interfered[key] {
			interfered[key] = true
			bumped := cur.DeepCopy()
			rv++
			bumped.ResourceVersion = strconv.FormatInt(rv, 10)
			if err := tracker.Update(servicesGVR, bumped, bumped.Namespace); err != nil {
				return true, nil, err
			}
			cur = bumped
		}
		if upd.ResourceVersion != cur.ResourceVersion {
			conflicts.Add(1)
			if action.GetSubresource() == "status" {
				statusConflicts.Add(1)
			}
			return true, nil, apierrors.NewConflict(servicesGVR.GroupResource(), upd.Name,
				fmt.Errorf("resourceVersion %s is stale (current %s)", upd.ResourceVersion, cur.ResourceVersion))
		}
		var next *v1.Service
		if action.GetSubresource() == "status" {
			next = cur.DeepCopy()
			next.Status = *upd.Status.DeepCopy()
		} else {
			next = upd.DeepCopy()
			next.Status = *cur.Status.DeepCopy()
			if !equalSpec(cur, upd) {
				next.Generation = cur.Generation + 1
			}
		}
		rv++
		next.ResourceVersion = strconv.FormatInt(rv, 10)
		if err := tracker.Update(servicesGVR, next, next.Namespace); err != nil {
			return true, nil, err
		}
		return true, next, nil
	})
	return conflicts, statusConflicts
}

func equalSpec(a, b *v1.Service) bool { return apiequality.Semantic.DeepEqual(a.Spec, b.Spec) }

type harness struct {
	t         *testing.T
	ctx       context.Context
	client    *fake.Clientset
	clock     *clocktesting.FakeClock
	recorder  *record.FakeRecorder
	factory   informers.SharedInformerFactory
	ctrl      *Controller
	conflicts *atomic.Int64
}

// newHarness builds a controller over a fake clientset holding objs and
// starts its informers, but not its workers: tests call h.sync.
func newHarness(t *testing.T, pools []config.IPPool, objs ...runtime.Object) *harness {
	t.Helper()
	return newHarnessWith(t, pools, nil, objs...)
}

// newHarnessWith is newHarness with options changed by mutate (nil: none).
func newHarnessWith(t *testing.T, pools []config.IPPool, mutate func(*Options), objs ...runtime.Object) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	client := fake.NewClientset(objs...)
	h := &harness{t: t, ctx: ctx, client: client, clock: clocktesting.NewFakeClock(t0),
		recorder: record.NewFakeRecorder(1000)}
	h.conflicts, _ = apiServerLike(client, false)
	h.factory = informers.NewSharedInformerFactory(client, 0)
	h.ctrl = h.newControllerWith(pools, h.recorder, mutate)
	h.factory.Start(ctx.Done())
	if h.ctrl.leaseInf != nil {
		go h.ctrl.leaseInf.Run(ctx.Done())
		require.True(t, cache.WaitForCacheSync(ctx.Done(), h.ctrl.leaseInf.HasSynced))
	}
	t.Cleanup(func() {
		cancel()
		h.factory.Shutdown()
	})
	h.factory.WaitForCacheSync(ctx.Done())
	return h
}

func (h *harness) newControllerWith(pools []config.IPPool, rec record.EventRecorder, mutate func(*Options)) *Controller {
	h.t.Helper()
	ps, err := NewPools(pools)
	require.NoError(h.t, err)
	opts := Options{Class: testClass, Pools: ps, Recorder: rec, Clock: h.clock, ReleaseGrace: config.DefaultReleaseGracePeriod}
	if mutate != nil {
		mutate(&opts)
	}
	c, err := New(h.client, h.factory, opts)
	require.NoError(h.t, err)
	return c
}

// sync waits until the controller's cache has the stored version of the
// Service and runs one sync of it.
func (h *harness) sync(name string) *v1.Service {
	h.t.Helper()
	key := types.NamespacedName{Namespace: "ns", Name: name}
	stored, err := h.client.CoreV1().Services("ns").Get(h.ctx, name, metav1.GetOptions{})
	if err == nil {
		require.Eventually(h.t, func() bool {
			cached, err := h.ctrl.services.Services("ns").Get(name)
			return err == nil && cached.ResourceVersion == stored.ResourceVersion
		}, 5*time.Second, time.Millisecond)
	}
	require.NoError(h.t, h.ctrl.sync(h.ctx, key))
	out, err := h.client.CoreV1().Services("ns").Get(h.ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(h.t, err)
	return out
}

func (h *harness) create(svc *v1.Service) {
	h.t.Helper()
	_, err := h.client.CoreV1().Services(svc.Namespace).Create(h.ctx, svc, metav1.CreateOptions{})
	require.NoError(h.t, err)
}

// update applies mutate to the stored Service (metadata and spec).
func (h *harness) update(name string, mutate func(*v1.Service)) {
	h.t.Helper()
	svc, err := h.client.CoreV1().Services("ns").Get(h.ctx, name, metav1.GetOptions{})
	require.NoError(h.t, err)
	mutate(svc)
	_, err = h.client.CoreV1().Services("ns").Update(h.ctx, svc, metav1.UpdateOptions{})
	require.NoError(h.t, err)
}

// writes counts the write requests sent for Services so far.
func (h *harness) writes() int {
	n := 0
	for _, a := range h.client.Actions() {
		if a.GetResource() == servicesGVR && (a.GetVerb() == "update" || a.GetVerb() == "patch" || a.GetVerb() == "delete") {
			n++
		}
	}
	return n
}

// events drains the recorded events.
func (h *harness) events() []string {
	var out []string
	for {
		select {
		case e := <-h.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// lbService returns a LoadBalancer Service "ns/<name>" with one TCP port 80.
func lbService(name string, mutate ...func(*v1.Service)) *v1.Service {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Annotations: map[string]string{},
			CreationTimestamp: metav1.NewTime(t0)},
		Spec: v1.ServiceSpec{
			Type:       v1.ServiceTypeLoadBalancer,
			IPFamilies: []v1.IPFamily{v1.IPv4Protocol},
			Ports:      []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}},
		},
	}
	for _, m := range mutate {
		m(svc)
	}
	return svc
}

func readyNode(name string, lbls map[string]string) *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls},
		Status:     v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}},
	}
}

func notReadyNode(name string) *v1.Node {
	n := readyNode(name, nil)
	n.Status.Conditions[0].Status = v1.ConditionFalse
	return n
}

func endpointSlice(svc, name string, nodes ...string) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	for i, n := range nodes {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{
			Addresses: []string{fmt.Sprintf("10.244.0.%d", i+1)}, NodeName: &n,
		})
	}
	return es
}

type condSummary struct {
	Status metav1.ConditionStatus
	Reason string
}

// condsOf summarises the KEP-4631 conditions of svc; absent ones are "".
func condsOf(svc *v1.Service) map[string]condSummary {
	out := map[string]condSummary{}
	for _, typ := range []string{conditions.TypeServing, conditions.TypeProvisioning, conditions.TypeDegraded} {
		if c := meta.FindStatusCondition(svc.Status.Conditions, typ); c != nil {
			out[typ] = condSummary{c.Status, c.Reason}
		}
	}
	return out
}

func ingressIPs(svc *v1.Service) []string {
	out := []string{}
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		out = append(out, ing.IP)
	}
	return out
}

func servingCond(t *testing.T, svc *v1.Service) metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(svc.Status.Conditions, conditions.TypeServing)
	require.NotNil(t, c, "Service %s has no %s condition", svc.Name, conditions.TypeServing)
	return *c
}
