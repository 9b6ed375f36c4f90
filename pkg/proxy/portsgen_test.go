package proxy

import (
	"net/netip"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
)

// TestPortsGeneration: the generation moves with what Services and NodePortAddresses report of
// the ports and the NodePort addresses (a Service added, redefined or removed; the node's
// address), and stays put through endpoint changes and idle full resyncs, whose exposure is
// unchanged.
func TestPortsGeneration(t *testing.T) {
	h, svcs := resyncHarness(t)
	gen := h.p.PortsGeneration()
	if gen == 0 {
		t.Fatal("the first sync installed three Services and the NodePort addresses, but the generation did not move")
	}
	same := func(what string) {
		t.Helper()
		if got := h.p.PortsGeneration(); got != gen {
			t.Fatalf("%s moved the generation from %d to %d", what, gen, got)
		}
	}
	moved := func(what string) {
		t.Helper()
		got := h.p.PortsGeneration()
		if got == gen {
			t.Fatalf("%s left the generation at %d", what, gen)
		}
		gen = got
	}

	h.fullSync()
	h.fullSync()
	same("idle full resyncs")
	h.updateSlice(twoEndpointSlices(svcs[1])[0], makeSlice("ns1", "web1", "web1-http", 8080, v1.ProtocolTCP, "http",
		ep{ip: "10.10.9.9", node: "node-b", ready: true}))
	h.sync()
	same("an endpoint change")

	np := makeService("ns1", "web1", "10.96.0.11", withNodePort(30080))
	h.updateService(svcs[1], np)
	h.sync()
	moved("a NodePort added to a Service")
	h.updateService(np, makeService("ns1", "web1", "10.96.0.11", withNodePort(30080)))
	h.sync()
	same("an update that changes no port")

	h.deleteService(svcs[2])
	h.sync()
	moved("a Service deleted")

	h.p.OnNodeUpdate(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.168.77.11"}}}})
	h.sync()
	moved("the node's address (its NodePort address) changed")
	h.fullSync()
	same("an idle full resync after the node change")
}

// TestPortDefRoundTrip: a status gives back every port exactly as it was kept, field for field
// (nil and empty lists apart), whether it is kept in its compact form or whole.
func TestPortDefRoundTrip(t *testing.T) {
	nn := types.NamespacedName{Namespace: "ns", Name: "web"}
	name := model.ServicePortName{NamespacedName: nn, Port: "http", Protocol: model.TCP}
	plain := model.ServicePort{Name: name, ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.1")}, Port: 80,
		Protocol: model.TCP, NodePort: 30080, ExternalPolicyLocal: true, InternalPolicyLocal: true}
	cases := map[string]func(*model.ServicePort){
		"plain":                func(*model.ServicePort) {},
		"no ClusterIP":         func(sp *model.ServicePort) { sp.ClusterIPs = nil },
		"empty ExternalIPs":    func(sp *model.ServicePort) { sp.ExternalIPs = []netip.Addr{} },
		"ExternalIPs":          func(sp *model.ServicePort) { sp.ExternalIPs = []netip.Addr{netip.MustParseAddr("203.0.113.7")} },
		"LB ingress":           func(sp *model.ServicePort) { sp.LoadBalancerIngress = []model.LBIngress{} },
		"source ranges":        func(sp *model.ServicePort) { sp.SourceRanges = []netip.Prefix{} },
		"affinity":             func(sp *model.ServicePort) { sp.StickyMaxAgeSeconds = 60 },
		"health check":         func(sp *model.ServicePort) { sp.HealthCheckNodePort = 31000 },
		"traffic distribution": func(sp *model.ServicePort) { sp.TrafficDistribution = "PreferClose" },
		"other protocol name":  func(sp *model.ServicePort) { sp.Name.Protocol = model.UDP },
		"other Service name":   func(sp *model.ServicePort) { sp.Name.Name = "other" },
	}
	for what, change := range cases {
		sp := plain
		change(&sp)
		d := makePortDef(nn, sp)
		if got := d.servicePort(nn); !reflect.DeepEqual(got, sp) {
			t.Errorf("%s: kept %+v, got back %+v", what, sp, got)
		}
		if got := d.portName(nn); got != sp.Name {
			t.Errorf("%s: port name %v, got back %v", what, sp.Name, got)
		}
	}
}

// TestStatusOneObject: the status of a Service of one port (and family) keeps that port in its
// own object, one heap object a Service for the collector to mark; one of two ports keeps both,
// in order.
func TestStatusOneObject(t *testing.T) {
	h, _ := resyncHarness(t)
	nn := types.NamespacedName{Namespace: "ns", Name: "web"}
	port := func(name string, p uint16) desired {
		sp := model.ServicePort{Name: model.ServicePortName{NamespacedName: nn, Port: name, Protocol: model.TCP}, Port: p, Protocol: model.TCP}
		return desired{owner: ownerOf(sp.Name, false), port: sp}
	}
	now := time.Now()
	one := h.p.makeStatus(nn, []desired{port("http", 80)}, &now)
	if len(one.ports) != 1 || &one.ports[0] != &one.one[0] || one.ports[0].def.port != 80 {
		t.Errorf("one port: %d ports, held in the status itself: %v", len(one.ports), len(one.ports) == 1 && &one.ports[0] == &one.one[0])
	}
	two := h.p.makeStatus(nn, []desired{port("http", 80), port("https", 443)}, &now)
	if got := two.portStatuses(nn); len(got) != 2 || got[0].Port.Port != 80 || got[1].Port.Port != 443 || one.lastSync != &now {
		t.Errorf("two ports: %+v", got)
	}
}
