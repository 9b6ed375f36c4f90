package agent

import (
	"reflect"
	"strings"
	"testing"
	"unsafe"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
)

// protoObject is a generated API type's pointer: it encodes and decodes itself with protobuf.
type protoObject[T any] interface {
	*T
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
}

// decoded returns obj encoded and decoded, as the informer receives it: every string, pointer
// and slice its own.
func decoded[T any, P protoObject[T]](t *testing.T, obj P) P {
	t.Helper()
	raw, err := obj.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	out := P(new(T))
	if err := out.Unmarshal(raw); err != nil {
		t.Fatal(err)
	}
	return out
}

// shareTestService is a Service as kube-apiserver stores it: a single-stack ClusterIP Service
// with its defaults, the shape most Services of a cluster have.
func shareTestService(name, ip string) *v1.Service {
	single, cluster := v1.IPFamilyPolicySingleStack, v1.ServiceInternalTrafficPolicyCluster
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "7"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip},
			IPFamilies: []v1.IPFamily{v1.IPv4Protocol}, IPFamilyPolicy: &single, InternalTrafficPolicy: &cluster,
			SessionAffinity: v1.ServiceAffinityNone, TrafficDistribution: ptr("PreferClose"),
			Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromString("web"),
				AppProtocol: ptr("http")}}},
		Status: v1.ServiceStatus{LoadBalancer: v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: "192.0.2.1", IPMode: ptr(v1.LoadBalancerIPModeProxy)}}}}}
}

// sameData reports whether a and b are one copy.
func sameData[T ~string](a, b T) bool {
	return unsafe.StringData(string(a)) == unsafe.StringData(string(b))
}

// TestShareServices: two Services decoded apart keep their values and share what they repeat;
// a Service's first cluster IP is its spec.clusterIP; its name, uid and resourceVersion are one
// string.
func TestShareServices(t *testing.T) {
	tr := newTrimmer()
	a, b := decoded(t, shareTestService("a", "10.96.0.1")), decoded(t, shareTestService("b", "10.96.0.2"))
	wantA := a.DeepCopy()
	for _, s := range []*v1.Service{a, b} {
		if _, err := tr.transform(s); err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(a, wantA) {
		t.Errorf("values changed:\n got %+v\nwant %+v", a, wantA)
	}
	sa, sb := &a.Spec, &b.Spec
	if !sameData(sa.Type, sb.Type) || !sameData(sa.SessionAffinity, sb.SessionAffinity) || !sameData(sa.ClusterIPs[0], sa.ClusterIP) {
		t.Error("type, affinity or the first cluster IP not shared")
	}
	if sa.IPFamilyPolicy != sb.IPFamilyPolicy || sa.InternalTrafficPolicy != sb.InternalTrafficPolicy ||
		sa.TrafficDistribution != sb.TrafficDistribution || a.Status.LoadBalancer.Ingress[0].IPMode != b.Status.LoadBalancer.Ingress[0].IPMode {
		t.Error("optional enums not one pointer")
	}
	if &sa.IPFamilies[0] != &sb.IPFamilies[0] || &sa.Ports[0] != &sb.Ports[0] {
		t.Error("IP family or port lists not shared")
	}
	if meta := unsafe.StringData(a.Name); unsafe.StringData(string(a.UID)) != (*byte)(unsafe.Add(unsafe.Pointer(meta), len(a.Name))) ||
		unsafe.StringData(a.ResourceVersion) != (*byte)(unsafe.Add(unsafe.Pointer(meta), len(a.Name)+len(a.UID))) {
		t.Error("name, uid and resourceVersion not one string")
	}
}

// TestShareServicePortsApart: Services whose ports differ in anything keep their own lists,
// each with its own values, and still share their ports' names and protocols.
func TestShareServicePortsApart(t *testing.T) {
	variants := map[string]func(*v1.ServicePort){
		"node port":      func(p *v1.ServicePort) { p.NodePort = 30080 },
		"target port":    func(p *v1.ServicePort) { p.TargetPort = intstr.FromInt32(8080) },
		"no appProtocol": func(p *v1.ServicePort) { p.AppProtocol = nil },
		"appProtocol":    func(p *v1.ServicePort) { p.AppProtocol = ptr("") },
	}
	tr := newTrimmer()
	base := decoded(t, shareTestService("base", "10.96.0.1"))
	_, _ = tr.transform(base)
	for what, change := range variants {
		svc := shareTestService("x", "10.96.0.2")
		change(&svc.Spec.Ports[0])
		svc = decoded(t, svc)
		want := svc.Spec.Ports[0]
		_, _ = tr.transform(svc)
		got := &svc.Spec.Ports[0]
		if got == &base.Spec.Ports[0] || !reflect.DeepEqual(*got, want) {
			t.Errorf("%s: shared %v, port %+v, want %+v", what, got == &base.Spec.Ports[0], *got, want)
		}
		if !sameData(got.Name, base.Spec.Ports[0].Name) || !sameData(got.Protocol, base.Spec.Ports[0].Protocol) {
			t.Errorf("%s: the port's name or protocol not shared", what)
		}
	}
}

// TestShareSlicePorts: EndpointSlices with equal ports share one list, which a deep copy does
// not share; a port without a number is not one with port 0.
func TestShareSlicePorts(t *testing.T) {
	tr := newTrimmer()
	conv := func(name string, port *int32) *model.EndpointSlice {
		s := trimTestSlice(name)
		s.Ports = []discovery.EndpointPort{{Name: ptr("http"), Protocol: ptr(v1.ProtocolTCP), Port: port}}
		out, _ := tr.transform(decoded(t, s))
		return out.(*model.EndpointSlice)
	}
	a, b := conv("a", ptr(int32(8080))), conv("b", ptr(int32(8080)))
	if &a.Ports[0] != &b.Ports[0] || *a.Ports[0].Port != 8080 || *a.Ports[0].Name != "http" {
		t.Errorf("equal port lists not shared: %+v %+v", a.Ports, b.Ports)
	}
	if a.Name != "a" || a.Service != "web" || !a.Same(b) ||
		unsafe.StringData(a.Service) != (*byte)(unsafe.Add(unsafe.Pointer(unsafe.StringData(a.Name)), len(a.Name))) {
		t.Errorf("slice fields, or its name and Service not one string: %+v", a)
	}
	c := a.DeepCopyObject().(*model.EndpointSlice)
	*c.Ports[0].Port, *c.Ports[0].Name = 1, "other"
	if *a.Ports[0].Port != 8080 || *b.Ports[0].Name != "http" {
		t.Error("a deep copy's ports share the shared list")
	}
	none, zero := conv("n", nil), conv("z", ptr(int32(0)))
	if none.Ports[0].Port != nil || zero.Ports[0].Port == nil || *zero.Ports[0].Port != 0 || none.Same(zero) {
		t.Errorf("no port and port 0 confused: %+v %+v", none.Ports, zero.Ports)
	}
	if none.Ports[0].Name != a.Ports[0].Name || none.Ports[0].Protocol != a.Ports[0].Protocol {
		t.Error("the ports' names and protocols not shared across lists")
	}
}

// TestShareBounded: the tables hold at most their bound whatever arrives, and long strings and
// lists are kept as decoded, not in a table.
func TestShareBounded(t *testing.T) {
	s := newSharer(2)
	for i := range 10 {
		svc := shareTestService("a", "10.96.0.1")
		svc.Spec.Ports[0].Name = strings.Repeat("p", i+1)
		svc.Spec.Ports[0].Port = int32(80 + i)
		s.service(decoded(t, svc))
	}
	if len(s.strs.m) > 2 || len(s.svcPorts.m) > 2 || len(s.strPtrs.m) > 2 {
		t.Errorf("tables past their bound: %d strings, %d port lists, %d pointers", len(s.strs.m), len(s.svcPorts.m), len(s.strPtrs.m))
	}
	long := newSharer(maxShared)
	svc := shareTestService("a", "10.96.0.1")
	svc.Spec.Ports[0].AppProtocol = ptr("example.com/" + strings.Repeat("x", maxSharedString))
	for i := range 20 {
		svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{Name: strings.Repeat("q", 15) + string(rune('a'+i)), Port: int32(i + 1)})
	}
	long.service(decoded(t, svc))
	if len(long.svcPorts.m) != 0 || len(long.strPtrs.m) != 1 { // TrafficDistribution's only
		t.Errorf("long values in the tables: %d port lists, %d pointers", len(long.svcPorts.m), len(long.strPtrs.m))
	}
	for k := range long.strs.m {
		if len(k) > maxSharedString {
			t.Errorf("a string of %d bytes in the table", len(k))
		}
	}
}
