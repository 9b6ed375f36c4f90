package model

import (
	"net/netip"
	"reflect"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// TestServicePortEqual changes each field of a port in turn: Equal must see every change, and a
// copy with its own lists (or nil for empty ones) must be equal. A field added to ServicePort
// without a change here fails the count check.
func TestServicePortEqual(t *testing.T) {
	base := func() ServicePort {
		return ServicePort{
			Name:       ServicePortName{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "web"}, Port: "http", Protocol: TCP},
			ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.10")}, Port: 80, Protocol: TCP, NodePort: 30080,
			ExternalIPs:         []netip.Addr{netip.MustParseAddr("192.0.2.7")},
			LoadBalancerIngress: []LBIngress{{IP: netip.MustParseAddr("192.0.2.8"), IPMode: IPModeVIP, Decision: Decision{Program: true, Reason: ReasonProgrammedVIP}}},
			SourceRanges:        []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")},
			ExternalPolicyLocal: true, StickyMaxAgeSeconds: 10800, HealthCheckNodePort: 31000, TrafficDistribution: "PreferClose",
		}
	}
	changes := map[string]func(*ServicePort){
		"Name":                func(s *ServicePort) { s.Name.Port = "https" },
		"ClusterIPs":          func(s *ServicePort) { s.ClusterIPs = append(s.ClusterIPs, netip.MustParseAddr("fd00::a")) },
		"Port":                func(s *ServicePort) { s.Port++ },
		"Protocol":            func(s *ServicePort) { s.Protocol = UDP },
		"NodePort":            func(s *ServicePort) { s.NodePort = 0 },
		"ExternalIPs":         func(s *ServicePort) { s.ExternalIPs = nil },
		"LoadBalancerIngress": func(s *ServicePort) { s.LoadBalancerIngress[0].Decision.Program = false },
		"SourceRanges":        func(s *ServicePort) { s.SourceRanges[0] = netip.MustParsePrefix("198.51.100.0/24") },
		"ExternalPolicyLocal": func(s *ServicePort) { s.ExternalPolicyLocal = false },
		"InternalPolicyLocal": func(s *ServicePort) { s.InternalPolicyLocal = true },
		"StickyMaxAgeSeconds": func(s *ServicePort) { s.StickyMaxAgeSeconds = 0 },
		"HealthCheckNodePort": func(s *ServicePort) { s.HealthCheckNodePort = 0 },
		"TrafficDistribution": func(s *ServicePort) { s.TrafficDistribution = "" },
	}
	typ := reflect.TypeOf(ServicePort{})
	if typ.NumField() != len(changes) {
		t.Fatalf("ServicePort has %d fields, the test changes %d: cover the new field in Equal and here", typ.NumField(), len(changes))
	}
	for i := range typ.NumField() {
		name := typ.Field(i).Name
		change, ok := changes[name]
		if !ok {
			t.Fatalf("field %s is not changed by the test", name)
		}
		a, b := base(), base()
		change(&b)
		if a.Equal(b) || b.Equal(a) {
			t.Errorf("a change of %s is not seen by Equal", name)
		}
	}
	a, b := base(), base()
	b.ClusterIPs, b.LoadBalancerIngress = slices.Clone(b.ClusterIPs), slices.Clone(b.LoadBalancerIngress)
	if !a.Equal(b) {
		t.Error("a copy with its own lists is not Equal")
	}
	a.ExternalIPs, b.ExternalIPs = nil, []netip.Addr{}
	if !a.Equal(b) {
		t.Error("nil and empty lists differ")
	}
}
