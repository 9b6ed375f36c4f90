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

func TestTrimmerEndpointSlice(t *testing.T) {
	tr := newTrimmer()
	a, _ := tr.transform(trimTestSlice("web-1"))
	second := trimTestSlice("web-2")
	second.Namespace = strings.Clone(second.Namespace) // as decoded: its own copy
	b, _ := tr.transform(second)
	sa, sb := a.(*discovery.EndpointSlice), b.(*discovery.EndpointSlice)
	if sa.ManagedFields != nil || sa.Annotations[lastAppliedAnnotation] != "" {
		t.Errorf("managedFields or last-applied kept: %v %v", sa.ManagedFields, sa.Annotations)
	}
	if sa.Annotations[v1.EndpointsLastChangeTriggerTime] != "2026-12-01T10:00:00Z" || sa.Labels[discovery.LabelServiceName] != "web" {
		t.Errorf("trigger time or service-name label lost: %v %v", sa.Annotations, sa.Labels)
	}
	e0, e1 := sa.Endpoints[0], sa.Endpoints[1]
	if sa.OwnerReferences != nil || sa.Labels[discovery.LabelManagedBy] != "endpointslice-controller.k8s.io" {
		t.Errorf("ownerReferences kept or managed-by label lost: %v %v", sa.OwnerReferences, sa.Labels)
	}
	if e0.TargetRef != nil || e0.Hostname != nil || e0.DeprecatedTopology != nil {
		t.Errorf("targetRef, hostname or deprecatedTopology kept: %+v", e0)
	}
	if *e0.NodeName != "node-a" || *e0.Zone != "z1" || e0.Hints == nil || e0.Hints.ForZones[0].Name != "z1" || e0.Addresses[0] != "10.1.0.1" {
		t.Errorf("read fields changed: %+v", e0)
	}
	c0, c1 := e0.Conditions, e1.Conditions
	if !*c0.Ready || *c0.Serving || c0.Terminating != nil || *c1.Ready || c1.Serving != nil || !*c1.Terminating {
		t.Errorf("conditions changed: %+v %+v", c0, c1)
	}
	if unsafeStringData(sa.Namespace) != unsafeStringData(sb.Namespace) {
		t.Error("the namespace strings of two slices are not one copy")
	}
	// Equal values share one copy, across endpoints and slices.
	if e0.NodeName != e1.NodeName || e0.NodeName != sb.Endpoints[0].NodeName || c0.Ready != sb.Endpoints[0].Conditions.Ready || c0.Serving != c1.Ready {
		t.Error("nodeName or condition values are not shared")
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
	tr.maxInterned = 1
	a, b := ptr("a"), ptr("b")
	if tr.intern(a) != a || tr.intern(ptr("a")) != a {
		t.Error("first value not shared")
	}
	if tr.intern(b) != b || tr.intern(ptr("b")) == b || len(tr.strs) != 1 {
		t.Errorf("table grew past its bound: %d entries", len(tr.strs))
	}
}

// TestInformerFactoryTrims checks that the agent's factory stores trimmed objects: what the
// proxier's trackers and the data path get from its informers.
func TestInformerFactoryTrims(t *testing.T) {
	client := fake.NewSimpleClientset(trimTestService(), trimTestSlice("web-1"))
	factory := newInformerFactory(client)
	svcInf := factory.Core().V1().Services().Informer()
	sliceInf := factory.Discovery().V1().EndpointSlices().Informer()
	handedCh := make(chan *discovery.EndpointSlice, 1)
	if _, err := sliceInf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		handedCh <- obj.(*discovery.EndpointSlice)
	}}); err != nil {
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
	var handed *discovery.EndpointSlice
	select {
	case handed = <-handedCh:
	case <-time.After(30 * time.Second):
		t.Fatal("the EndpointSlice handler was not called within 30s")
	}
	svc, err := factory.Core().V1().Services().Lister().Services("ns").Get("web")
	if err != nil {
		t.Fatal(err)
	}
	if svc.ManagedFields != nil || svc.Annotations[lastAppliedAnnotation] != "" || svc.Annotations[lbapi.AnnotationPool] != "pool-a" {
		t.Errorf("cached Service not trimmed as expected: %+v", svc.ObjectMeta)
	}
	if s := handed; s.ManagedFields != nil || s.Endpoints[0].TargetRef != nil || *s.Endpoints[0].NodeName != "node-a" {
		t.Errorf("EndpointSlice handed to the handler not trimmed as expected: %+v", s)
	}
}

// TestTrimmerKeepsEverythingElse: a transformed Service or EndpointSlice equals the original
// with exactly the documented fields cleared, so a field the trackers or the proxier read cannot
// be stripped unnoticed; the endpoints fill an array of their exact length.
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
	grown := make([]discovery.Endpoint, len(slice.Endpoints), 16)
	copy(grown, slice.Endpoints)
	slice.Endpoints = grown
	wantSlice := slice.DeepCopy()
	wantSlice.ManagedFields, wantSlice.OwnerReferences, wantSlice.UID, wantSlice.GenerateName = nil, nil, "", ""
	delete(wantSlice.Annotations, lastAppliedAnnotation)
	for i := range wantSlice.Endpoints {
		e := &wantSlice.Endpoints[i]
		e.TargetRef, e.Hostname, e.DeprecatedTopology = nil, nil, nil
	}
	out, err := newTrimmer().transform(slice)
	if err != nil {
		t.Fatal(err)
	}
	gotSlice := out.(*discovery.EndpointSlice)
	if !reflect.DeepEqual(gotSlice, wantSlice) {
		t.Errorf("EndpointSlice:\n got %+v\nwant %+v", gotSlice, wantSlice)
	}
	if cap(gotSlice.Endpoints) != len(gotSlice.Endpoints) {
		t.Errorf("endpoints in an array of %d for %d", cap(gotSlice.Endpoints), len(gotSlice.Endpoints))
	}
}

// BenchmarkTrimmedSlices10k reports the heap that 10,000 EndpointSlices of 10 endpoints each
// retain once decoded (each its own strings, as from the API server) and trimmed.
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
