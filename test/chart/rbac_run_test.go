package chart

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent"
	"github.com/antrea-proxy/antrea-proxy/pkg/config"
	"github.com/antrea-proxy/antrea-proxy/pkg/lbapi"
	"github.com/antrea-proxy/antrea-proxy/pkg/loadbalancer"
	"github.com/antrea-proxy/antrea-proxy/pkg/loadbalancer/conditions"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/openflowtest"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy"
)

const waitTimeout = 20 * time.Second

func readyNode(name string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.1.10"}},
		},
	}
}

func webService(typ corev1.ServiceType) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: corev1.ServiceSpec{
			Type: typ, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			Selector:   map[string]string{"app": "web"},
			Ports:      []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
}

func webSlice() *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-1",
			Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.10.1.5"}, NodeName: ptr("node-a"),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr("http"), Protocol: ptr(corev1.ProtocolTCP), Port: ptr[int32](8080)}},
	}
}

// TestAgentRBAC runs antrea-agent's Kubernetes code (the proxier's informers and sync loop, the
// agent's only API client) against a fake clientset until it has programmed a Service, and
// compares its calls with the agent ServiceAccount's permissions.
func TestAgentRBAC(t *testing.T) {
	h := NewHelm(t)
	r := render(t, h)
	cfg, err := config.ParseWithEnv([]byte(dataKey(t, r.configMap(t), "antrea-agent.conf")), nodeEnv)
	require.NoError(t, err)

	cs := fake.NewClientset(readyNode("node-a"), webService(corev1.ServiceTypeLoadBalancer), webSlice())
	p, err := proxy.New(proxy.Options{
		NodeName:             cfg.NodeName,
		ProxyLoadBalancerIPs: cfg.AntreaProxy.ProxyLoadBalancerIPsEnabled(),
		MinSyncInterval:      10 * time.Millisecond,
		FullSyncPeriod:       cfg.AntreaProxy.FullSyncPeriod.Duration,
		Round:                1,
	}, openflowtest.NewFakeBridge())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	// The agent watches ServiceCIDRs when the API server serves them.
	cs.Resources = []*metav1.APIResourceList{{GroupVersion: "networking.k8s.io/v1",
		APIResources: []metav1.APIResource{{Name: "servicecidrs", Kind: "ServiceCIDR"}}}}
	cidrFactory := informers.NewSharedInformerFactory(cs, 0)
	// Shutdown waits for the informers, which stop with ctx.
	defer func() { cancel(); cidrFactory.Shutdown() }()
	watching, err := agent.WatchServiceCIDRs(ctx, cs, cidrFactory, p)
	require.NoError(t, err)
	require.True(t, watching)
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, cs) }()
	require.Eventually(t, func() bool {
		st := p.Services()
		return len(st) == 1 && len(st[0].Ports) == 1 && st[0].Ports[0].Buckets == 1
	}, waitTimeout, 10*time.Millisecond, "the proxier did not program Service default/web")
	// A change after the initial list arrives through the watch. (The test writes through the
	// tracker, so that cs.Actions() holds only the proxier's calls.)
	require.NoError(t, cs.Tracker().Delete(servicesGVR, "default", "web"))
	require.Eventually(t, func() bool { return len(p.Services()) == 0 }, waitTimeout, 10*time.Millisecond,
		"the proxier did not see Service default/web go")
	// The announcer Lease: renewed while healthy, released at shutdown, then the handover's
	// wait for the Services to name another node.
	a := cfg.Announcer
	lease := agent.NewAnnouncerLease(cs.CoordinationV1().Leases(a.LeaseNamespace), cfg.NodeName, a, func() bool { return true }, clock.RealClock{})
	leaseCtx, stopLease := context.WithCancel(ctx)
	leaseDone := make(chan struct{})
	go func() { lease.Run(leaseCtx); close(leaseDone) }()
	require.Eventually(t, lease.Valid, waitTimeout, 10*time.Millisecond, "the announcer Lease was never renewed")
	require.Eventually(t, func() bool {
		n := 0
		for _, a := range cs.Actions() {
			if a.GetResource().Resource == "leases" && a.GetVerb() == "update" {
				n++
			}
		}
		return n > 0
	}, waitTimeout, 10*time.Millisecond, "the announcer Lease was never updated")
	stopLease()
	<-leaseDone
	require.NoError(t, lease.Release(context.Background()))
	_, moved := agent.HandOver(cs.CoreV1().Services(metav1.NamespaceAll), cfg.NodeName, waitTimeout, clock.RealClock{})
	require.True(t, moved)
	cancel()
	require.NoError(t, <-done)
	recordAgentWarnings(t, cs)

	// Discovery (the ServiceCIDR API's presence) is open to every authenticated user.
	actions := slices.DeleteFunc(cs.Actions(), func(a k8stesting.Action) bool {
		return a.GetResource().Group == "" && a.GetResource().Resource == "resource"
	})
	compareRBAC(t, "antrea-agent", grantsFor(t, r, "antrea-agent"), callsOf(actions))
}

// recordAgentWarnings emits, twice, the Warning Event the agent records on a Service whose flows
// OVS rejected, through the agent's own event sink (agent.NewServiceEvents, which pkg/agent passes
// as proxy.Options.Events): the first is created, the repeat patched.
func recordAgentWarnings(t *testing.T, cs *fake.Clientset) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := agent.NewServiceEvents(ctx, cs, "node-a")
	for range 2 {
		events.Warning(types.NamespacedName{Namespace: "default", Name: "web"}, "OVSRejected", "OFPBAC_BAD_OUT_GROUP")
	}
	require.Eventually(t, func() bool {
		return slices.ContainsFunc(cs.Actions(), func(a k8stesting.Action) bool {
			return a.GetVerb() == "patch" && a.GetResource().Resource == "events"
		})
	}, waitTimeout, 10*time.Millisecond, "the repeated Warning Event was not patched")
}

// TestControllerRBAC runs antrea-controller's wiring (cmd/antrea-controller: event broadcaster,
// informers, loadbalancer controller under leader election) with the rendered
// antrea-controller.conf against a fake clientset. It drives every API path: allocation
// (finalizer and status writes), a write conflict (the re-read), a repeated Event (its patch),
// release (finalizer removal) and the Lease's acquisition and release. Then it compares the
// calls with the controller ServiceAccount's permissions.
func TestControllerRBAC(t *testing.T) {
	h := NewHelm(t)
	r := render(t, h, "--set-json", `lbPools=[{"name":"default","cidrs":["192.168.240.0/28"]}]`)
	cfg, err := config.ParseController([]byte(dataKey(t, r.configMap(t), "antrea-controller.conf")))
	require.NoError(t, err)
	pools, err := loadbalancer.NewPools(cfg.IPPools)
	require.NoError(t, err)

	// node-a's agent renews its announcer Lease (seen by the controller as a renewal when it
	// lists it).
	nodeLease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: cfg.AnnouncerLeases.Namespace, Name: lbapi.AnnouncerLeaseName("node-a"),
			Labels: map[string]string{lbapi.LabelAnnouncer: "node-a"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("node-a"), LeaseDurationSeconds: ptr[int32](3600),
			RenewTime: &metav1.MicroTime{Time: time.Now()}},
	}
	cs := fake.NewClientset(readyNode("node-a"), webService(corev1.ServiceTypeLoadBalancer), webSlice(), nodeLease)
	// Service updates as on a real API server: a write from an older copy of the Service fails
	// with a Conflict instead of undoing a newer write, the test's included.
	services := newServiceStore(t, cs)
	// On top of that, one Conflict on the first status write, wherever the copy came from: the
	// controller must read the Service again.
	var conflictOnce sync.Once
	cs.PrependReactor("update", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
		handled := false
		if a.GetSubresource() == "status" {
			conflictOnce.Do(func() { handled = true })
		}
		if handled {
			return true, nil, apierrors.NewConflict(corev1.Resource("services"), "web", errors.New("the object has been modified"))
		}
		return false, nil, nil
	})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "antrea-controller"})
	factory := informers.NewSharedInformerFactory(cs, 0)
	ctrl, err := loadbalancer.New(cs, factory, loadbalancer.Options{Class: cfg.LoadBalancerClass, Pools: pools, Recorder: recorder, Workers: 1,
		AnnouncerLeaseNamespace: cfg.AnnouncerLeases.Namespace})
	require.NoError(t, err)
	le := cfg.LeaderElection
	done := make(chan error, 1)
	go func() {
		done <- loadbalancer.RunLeaderElected(ctx, cs, loadbalancer.LeaderElection{
			Namespace: le.LeaseNamespace, Name: le.LeaseName, Identity: "test",
			LeaseDuration: le.LeaseDuration.Duration, RenewDeadline: le.RenewDeadline.Duration, RetryPeriod: le.RetryPeriod.Duration,
		}, func(ctx context.Context) error {
			factory.Start(ctx.Done())
			defer factory.Shutdown()
			return ctrl.Run(ctx)
		})
	}()

	// The test reads and writes through the tracker (services), so that cs.Actions() holds only
	// the controller's calls.
	web := func() *corev1.Service { return services.Get("default", "web") }
	ingress := func() string {
		if in := web().Status.LoadBalancer.Ingress; len(in) > 0 {
			return in[0].IP
		}
		return ""
	}
	setType := func(typ corev1.ServiceType) {
		svc := web().DeepCopy()
		svc.Spec.Type = typ
		require.NoError(t, services.Update(svc))
	}
	require.Eventually(t, func() bool { return ingress() != "" }, waitTimeout, 10*time.Millisecond, "no address allocated")
	// Let the controller finish the allocation (finalizer, Serving condition) before the test
	// changes the Service, so that the allocation path is driven to its end.
	require.Eventually(t, func() bool {
		svc := web()
		return slices.Contains(svc.Finalizers, lbapi.Finalizer) &&
			meta.IsStatusConditionTrue(svc.Status.Conditions, conditions.TypeServing)
	}, waitTimeout, 10*time.Millisecond, "allocation never completed (finalizer and Serving condition)")
	first := ingress()
	// Released when the Service stops being a LoadBalancer, then allocated again: the same
	// address, so the same "Allocated" Event repeats and is patched.
	setType(corev1.ServiceTypeClusterIP)
	require.Eventually(t, func() bool {
		svc := web()
		return ingress() == "" && !slices.Contains(svc.Finalizers, lbapi.Finalizer)
	}, waitTimeout, 10*time.Millisecond, "address not released")
	require.Equal(t, corev1.ServiceTypeClusterIP, web().Spec.Type, "the controller undid the test's type change")
	setType(corev1.ServiceTypeLoadBalancer)
	require.Eventually(t, func() bool { return ingress() == first }, waitTimeout, 10*time.Millisecond, "address not allocated again")
	require.Equal(t, corev1.ServiceTypeLoadBalancer, web().Spec.Type, "the controller undid the test's type change")
	require.Eventually(t, func() bool {
		return slices.ContainsFunc(cs.Actions(), func(a k8stesting.Action) bool {
			return a.GetVerb() == "patch" && a.GetResource().Resource == "events"
		})
	}, waitTimeout, 10*time.Millisecond, "the repeated Event was not patched")
	cancel() // releases the Lease
	require.NoError(t, <-done)

	compareRBAC(t, "antrea-controller", grantsFor(t, r, "antrea-controller"), callsOf(cs.Actions()))
}
