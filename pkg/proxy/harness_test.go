package proxy

import (
	"context"
	"net/netip"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/openflowtest"
)

const testNode = "node-a"

type harness struct {
	t      *testing.T
	p      *Proxier
	bridge *openflowtest.FakeBridge
}

func testOptions() Options {
	return Options{
		NodeName:             testNode,
		Round:                1,
		ProxyLoadBalancerIPs: true,
		Families:             model.Families{IPv4: true},
		GatewayOFPort:        2,
		GatewayIPv4:          netip.MustParseAddr("10.0.0.1"),
		Clock:                clocktesting.NewFakeClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)),
	}
}

func newHarness(t *testing.T, opts Options) *harness {
	t.Helper()
	return newHarnessOn(t, opts, openflowtest.NewFakeBridge())
}

func newHarnessOn(t *testing.T, opts Options, b *openflowtest.FakeBridge) *harness {
	t.Helper()
	h := realHarness(t, opts, b)
	h.bridge = b
	return h
}

// realHarness is a harness whose proxier installs into b (a real OVS, or the fake through
// newHarnessOn), with the test Node.
func realHarness(t *testing.T, opts Options, b Bridge) *harness {
	t.Helper()
	p, err := New(opts, b)
	if err != nil {
		t.Fatal(err)
	}
	p.OnNodeUpdate(&v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: testNode},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{
			{Type: v1.NodeInternalIP, Address: "192.168.77.10"},
			{Type: v1.NodeHostName, Address: testNode},
		}},
	})
	return &harness{t: t, p: p}
}

func (h *harness) sync() {
	h.t.Helper()
	if err := h.p.SyncNow(context.Background(), false); err != nil {
		h.t.Fatalf("sync: %v", err)
	}
}

func (h *harness) addService(svc *v1.Service) { h.p.Tracker().Services.OnServiceAdd(svc) }
func (h *harness) updateService(old, svc *v1.Service) {
	h.p.Tracker().Services.OnServiceUpdate(old, svc)
}
func (h *harness) deleteService(svc *v1.Service) { h.p.Tracker().Services.OnServiceDelete(svc) }
func (h *harness) addSlice(s *discovery.EndpointSlice) {
	h.p.Tracker().Endpoints.OnEndpointSliceAdd(s)
}
func (h *harness) updateSlice(old, s *discovery.EndpointSlice) {
	h.p.Tracker().Endpoints.OnEndpointSliceUpdate(old, s)
}

type svcOpt func(*v1.Service)

func makeService(ns, name, clusterIP string, opts ...svcOpt) *v1.Service {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.ServiceSpec{
			Type:       v1.ServiceTypeClusterIP,
			ClusterIP:  clusterIP,
			ClusterIPs: []string{clusterIP},
			Ports:      []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	for _, o := range opts {
		o(svc)
	}
	return svc
}

func withPorts(ports ...v1.ServicePort) svcOpt {
	return func(s *v1.Service) { s.Spec.Ports = ports }
}

func withNodePort(np int32) svcOpt {
	return func(s *v1.Service) {
		if s.Spec.Type == v1.ServiceTypeClusterIP {
			s.Spec.Type = v1.ServiceTypeNodePort
		}
		s.Spec.Ports[0].NodePort = np
	}
}

func withExternalIPs(ips ...string) svcOpt {
	return func(s *v1.Service) { s.Spec.ExternalIPs = ips }
}

func modePtr(m v1.LoadBalancerIPMode) *v1.LoadBalancerIPMode { return &m }

// withLB makes the Service a LoadBalancer with the given ingresses.
func withLB(nodePort int32, ingress ...v1.LoadBalancerIngress) svcOpt {
	return func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Spec.Ports[0].NodePort = nodePort
		s.Status.LoadBalancer.Ingress = ingress
	}
}

func vip(ip string) v1.LoadBalancerIngress {
	return v1.LoadBalancerIngress{IP: ip, IPMode: modePtr(v1.LoadBalancerIPModeVIP)}
}

func proxyMode(ip string) v1.LoadBalancerIngress {
	return v1.LoadBalancerIngress{IP: ip, IPMode: modePtr(v1.LoadBalancerIPModeProxy)}
}

type ep struct {
	ip    string
	node  string
	ready bool
}

func makeSlice(ns, svc, name string, port int32, proto v1.Protocol, portName string, eps ...ep) *discovery.EndpointSlice {
	s := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{discovery.LabelServiceName: svc}},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: &portName, Port: &port, Protocol: &proto}},
	}
	for _, e := range eps {
		ready, serving, term := e.ready, e.ready, !e.ready
		node := e.node
		s.Endpoints = append(s.Endpoints, discovery.Endpoint{
			Addresses:  []string{e.ip},
			NodeName:   &node,
			Conditions: discovery.EndpointConditions{Ready: &ready, Serving: &serving, Terminating: &term},
		})
	}
	return s
}
