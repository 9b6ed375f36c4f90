package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/antrea-proxy/antrea-proxy/pkg/lbapi"
	"github.com/antrea-proxy/antrea-proxy/pkg/model"
)

func managed() []metav1.ManagedFieldsEntry {
	return []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply,
		FieldsV1: metav1.NewFieldsV1(`{"f:spec":{}}`)}}
}

func ptr[T any](v T) *T { return &v }

func trimTestService() *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", ManagedFields: managed(),
		Labels: map[string]string{"service.kubernetes.io/service-proxy-name": "x"},
		Annotations: map[string]string{
			lastAppliedAnnotation:          `{"kind":"Service"}`,
			lbapi.AnnotationAnnouncingNode: "10.0.0.1=n1",
			lbapi.AnnotationPool:           "pool-a",
		}},
		Spec: v1.ServiceSpec{ClusterIP: "10.96.0.10", Ports: []v1.ServicePort{{Port: 80}}}}
}

func trimTestSlice(name string) *discovery.EndpointSlice {
	return &discovery.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ManagedFields: managed(),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "web", UID: "uid-web", Controller: ptr(true)}},
		Labels:          map[string]string{discovery.LabelServiceName: "web", discovery.LabelManagedBy: "endpointslice-controller.k8s.io"},
		Annotations:     map[string]string{v1.EndpointsLastChangeTriggerTime: "2026-12-01T10:00:00Z", lastAppliedAnnotation: "{}"}},
		AddressType: discovery.AddressTypeIPv4,
		Endpoints: []discovery.Endpoint{
			{Addresses: []string{"10.1.0.1"}, NodeName: ptr("node-a"), Zone: ptr("z1"), Hostname: ptr("pod-1"),
				TargetRef:          &v1.ObjectReference{Kind: "Pod", Name: "pod-1"},
				DeprecatedTopology: map[string]string{"k": "v"},
				Conditions:         discovery.EndpointConditions{Ready: ptr(true), Serving: ptr(false)},
				Hints:              &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: "z1"}}}},
			{Addresses: []string{"10.1.0.2"}, NodeName: ptr("node-a"),
				Conditions: discovery.EndpointConditions{Ready: ptr(false), Terminating: ptr(true)}},
		},
		Ports: []discovery.EndpointPort{{Port: ptr(int32(8080))}}}
}

func TestTrimmerService(t *testing.T) {
	svc := trimTestService()
	out, err := newTrimmer().transform(svc)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*v1.Service)
	if got.ManagedFields != nil {
		t.Errorf("managedFields kept: %v", got.ManagedFields)
	}
	if _, ok := got.Annotations[lastAppliedAnnotation]; ok {
		t.Errorf("%s kept", lastAppliedAnnotation)
	}
	want := trimTestService()
	if got.Annotations[lbapi.AnnotationAnnouncingNode] != want.Annotations[lbapi.AnnotationAnnouncingNode] ||
		got.Annotations[lbapi.AnnotationPool] != want.Annotations[lbapi.AnnotationPool] || len(got.Annotations) != 2 {
		t.Errorf("annotations = %v, want the project's two kept", got.Annotations)
	}
	if got.Labels["service.kubernetes.io/service-proxy-name"] != "x" || got.Spec.ClusterIP != "10.96.0.10" || len(got.Spec.Ports) != 1 {
		t.Errorf("labels or spec changed: %v %+v", got.Labels, got.Spec)
	}
}

// TestTrimmerEndpointSlice: an EndpointSlice becomes its compact form, what the proxier reads,
// with its namespace and node names shared across endpoints and slices; a compact slice passes
// unchanged (the transform is idempotent).
func TestTrimmerEndpointSlice(t *testing.T) {
	tr := newTrimmer()
	a, _ := tr.transform(trimTestSlice("web-1"))
	second := trimTestSlice("web-2")
	second.Namespace = strings.Clone(second.Namespace) // as decoded: its own copies
	second.Endpoints[0].NodeName = ptr(strings.Clone("node-a"))
	b, _ := tr.transform(second)
	sa, sb := a.(*model.EndpointSlice), b.(*model.EndpointSlice)
	if sa.Namespace != "ns" || sa.Name != "web-1" || sa.Service != "web" || sa.Headless ||
		sa.AddressType != discovery.AddressTypeIPv4 || len(sa.Ports) != 1 || *sa.Ports[0].Port != 8080 ||
		!sa.TriggerTime.Equal(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)) {
		t.Errorf("slice fields: %+v", sa)
	}
	e0, e1 := sa.Endpoints[0], sa.Endpoints[1]
	if e0.Addr.String() != "10.1.0.1" || e0.Node() != "node-a" || e0.Zone() != "z1" || sa.HintsOf(0) == nil || sa.HintsOf(0).ForZones[0].Name != "z1" ||
		!e0.Ready || e0.Serving || e0.Terminating {
		t.Errorf("endpoint 0: %+v", e0)
	}
	if e1.Addr.String() != "10.1.0.2" || e1.Ready || e1.Serving || !e1.Terminating {
		t.Errorf("endpoint 1: %+v", e1)
	}
	if unsafeStringData(sa.Namespace) != unsafeStringData(sb.Namespace) {
		t.Error("the namespace strings of two slices are not one copy")
	}
	if unsafeStringData(e0.Node()) != unsafeStringData(e1.Node()) || unsafeStringData(e0.Node()) != unsafeStringData(sb.Endpoints[0].Node()) {
		t.Error("the node names are not one copy")
	}
	if again, _ := tr.transform(sa); again != sa {
		t.Error("a compact slice is not returned as it is")
	}
}

func TestTrimmerNodeAndOthers(t *testing.T) {
	tr := newTrimmer()
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ManagedFields: managed(), Labels: map[string]string{v1.LabelTopologyZone: "z1"}},
		Spec: v1.NodeSpec{PodCIDRs: []string{"10.244.0.0/24"}, Taints: []v1.Taint{{Key: "k"}}},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.168.0.1"}},
			Images: []v1.ContainerImage{{Names: []string{"img"}}}}}
	out, _ := tr.transform(n)
	got := out.(*v1.Node)
	if got.ManagedFields != nil || got.Status.Images != nil {
		t.Errorf("managedFields or images kept: %+v", got)
	}
	if got.Labels[v1.LabelTopologyZone] != "z1" || got.Spec.PodCIDRs[0] != "10.244.0.0/24" || len(got.Spec.Taints) != 1 ||
		got.Status.Addresses[0].Address != "192.168.0.1" {
		t.Errorf("read fields changed: %+v", got)
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", ManagedFields: managed()}}
	if out, _ := tr.transform(pod); out.(*v1.Pod).ManagedFields != nil {
		t.Error("managedFields of another type kept")
	}
}

func TestTrimmerInternBounded(t *testing.T) {
	tr := newTrimmer()
	tr.namespaces.max = 1
	a := strings.Clone("a")
	if unsafeStringData(tr.intern(a)) != unsafeStringData(a) || unsafeStringData(tr.intern(strings.Clone("a"))) != unsafeStringData(a) {
		t.Error("first value not shared")
	}
	b, b2 := strings.Clone("b"), strings.Clone("b")
	if unsafeStringData(tr.intern(b)) != unsafeStringData(b) || unsafeStringData(tr.intern(b2)) != unsafeStringData(b2) || len(tr.namespaces.m) != 1 {
		t.Errorf("table grew past its bound: %d entries", len(tr.namespaces.m))
	}
}

// TestInformerFactoryTrims checks that the agent's factory stores trimmed objects: what the
// proxier's trackers and the data path get from its informers. EndpointSlices go through
// client-go's informer in their compact form: stored under their namespace and name, handed to
// the add, update and delete handlers, an update with an unchanged resourceVersion (a resync)
// told apart by it.
func TestInformerFactoryTrims(t *testing.T) {
	client := fake.NewSimpleClientset(trimTestService(), trimTestSlice("web-1"))
	factory := newInformerFactory(client)
	svcInf := factory.Core().V1().Services().Informer()
	sliceInf := factory.Discovery().V1().EndpointSlices().Informer()
	type event struct {
		kind     string
		old, new *model.EndpointSlice
	}
	events := make(chan event, 4)
	if _, err := sliceInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { events <- event{"add", nil, obj.(*model.EndpointSlice)} },
		UpdateFunc: func(o, n any) { events <- event{"update", o.(*model.EndpointSlice), n.(*model.EndpointSlice)} },
		DeleteFunc: func(obj any) { events <- event{"delete", obj.(*model.EndpointSlice), nil} },
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	defer func() {
		cancel()
		factory.Shutdown() // waits for the informers, which stop once ctx is done
	}()
	if !cache.WaitForCacheSync(ctx.Done(), svcInf.HasSynced, sliceInf.HasSynced) {
		t.Fatal("caches did not sync")
	}
	next := func(kind string) event {
		t.Helper()
		select {
		case e := <-events:
			if e.kind != kind {
				t.Fatalf("got a %s event, want %s", e.kind, kind)
			}
			return e
		case <-time.After(30 * time.Second):
			t.Fatalf("no %s event within 30s", kind)
		}
		return event{}
	}
	svc, err := factory.Core().V1().Services().Lister().Services("ns").Get("web")
	if err != nil {
		t.Fatal(err)
	}
	if svc.ManagedFields != nil || svc.Annotations[lastAppliedAnnotation] != "" || svc.Annotations[lbapi.AnnotationPool] != "pool-a" {
		t.Errorf("cached Service not trimmed as expected: %+v", svc.ObjectMeta)
	}
	if e := next("add"); e.new.Service != "web" || e.new.Endpoints[0].Node() != "node-a" {
		t.Errorf("EndpointSlice handed to the add handler: %+v", e.new)
	}
	if obj, ok, err := sliceInf.GetStore().GetByKey("ns/web-1"); err != nil || !ok || obj.(*model.EndpointSlice).Name != "web-1" {
		t.Fatalf("the store holds %v (found %v, %v) under ns/web-1", obj, ok, err)
	}
	changed := trimTestSlice("web-1")
	changed.ResourceVersion = "2"
	changed.Endpoints = changed.Endpoints[:1]
	if _, err := client.DiscoveryV1().EndpointSlices("ns").Update(ctx, changed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if e := next("update"); len(e.old.Endpoints) != 2 || len(e.new.Endpoints) != 1 || e.new.ResourceVersion != "2" {
		t.Errorf("update handed %+v -> %+v", e.old, e.new)
	}
	if err := client.DiscoveryV1().EndpointSlices("ns").Delete(ctx, "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if e := next("delete"); e.old.Name != "web-1" {
		t.Errorf("delete handed %+v", e.old)
	}
	if keys := sliceInf.GetStore().ListKeys(); len(keys) != 0 {
		t.Errorf("the store still holds %v", keys)
	}
}

// TestTrimmerKeepsEverythingElse: a transformed Service equals the original with exactly the
// documented fields cleared, so a field the trackers or the proxier read cannot be stripped
// unnoticed; an EndpointSlice is its model.EndpointSlice (whose own tests check the fields).
func TestTrimmerKeepsEverythingElse(t *testing.T) {
	svc := trimTestService()
	svc.UID, svc.ResourceVersion = "uid-1", "42"
	svc.Spec.Type, svc.Spec.ExternalIPs = v1.ServiceTypeLoadBalancer, []string{"192.0.2.1"}
	svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "192.0.2.2"}}
	svc.Spec.Selector = map[string]string{"app": "web"}
	want := svc.DeepCopy()
	want.ManagedFields, want.Spec.Selector = nil, nil
	delete(want.Annotations, lastAppliedAnnotation)
	got, err := newTrimmer().transform(svc)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Service:\n got %+v\nwant %+v", got, want)
	}

	slice := trimTestSlice("web-1")
	slice.UID, slice.ResourceVersion, slice.GenerateName = "uid-2", "43", "web-"
	wantSlice := model.NewEndpointSlice(slice.DeepCopy())
	out, err := newTrimmer().transform(slice)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out, wantSlice) {
		t.Errorf("EndpointSlice:\n got %+v\nwant %+v", out, wantSlice)
	}
}

// BenchmarkTrimmedSlices10k reports the heap that 10,000 EndpointSlices of 10 endpoints each
// retain once decoded (each its own strings, as from the API server) and transformed.
func BenchmarkTrimmedSlices10k(b *testing.B) {
	raw := make([][]byte, 10000)
	for i := range raw {
		s := trimTestSlice(fmt.Sprintf("s%05d-abcde", i))
		s.UID, s.ResourceVersion, s.Labels[discovery.LabelServiceName] = types.UID(fmt.Sprintf("uid-%05d", i)), "42", fmt.Sprintf("s%05d", i)
		s.Endpoints = nil
		for j := 0; j < 10; j++ {
			s.Endpoints = append(s.Endpoints, discovery.Endpoint{Addresses: []string{fmt.Sprintf("10.30.%d.%d", i/25, i%25*10+j)},
				NodeName: ptr("node-b"), Conditions: discovery.EndpointConditions{Ready: ptr(true), Serving: ptr(true), Terminating: ptr(false)},
				TargetRef: &v1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: fmt.Sprintf("pod-%d-%d", i, j)}})
		}
		var err error
		if raw[i], err = json.Marshal(s); err != nil {
			b.Fatal(err)
		}
	}
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapInuse
	}
	var total uint64
	for range b.N {
		before := heap()
		tr := newTrimmer()
		out := make([]any, len(raw))
		for i, r := range raw {
			var s discovery.EndpointSlice
			if err := json.Unmarshal(r, &s); err != nil {
				b.Fatal(err)
			}
			out[i], _ = tr.transform(&s)
		}
		total += heap() - before
		runtime.KeepAlive(out)
	}
	b.ReportMetric(float64(total)/float64(b.N)/(1<<20), "heap-MB")
}

// unsafeStringData is where s's bytes are: equal for one shared copy.
func unsafeStringData(s string) *byte { return unsafe.StringData(s) }
