package model

import (
	"net/netip"
	"reflect"
	"testing"
	"time"
	"unique"
	"unsafe"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func apiSlice() *discovery.EndpointSlice {
	return &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1", ResourceVersion: "7", UID: "uid-1",
			Labels:      map[string]string{discovery.LabelServiceName: "web", discovery.LabelManagedBy: "m"},
			Annotations: map[string]string{v1.EndpointsLastChangeTriggerTime: "2026-12-01T10:00:00.5Z"}},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{ePort("http", v1.ProtocolTCP, 80)},
		Endpoints: []discovery.Endpoint{
			{Addresses: []string{"10.0.0.1", "10.0.0.9"}, NodeName: ptr("n1"), Zone: ptr("z1"),
				Hints:      &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: "z1"}}},
				Conditions: discovery.EndpointConditions{Ready: ptr(true), Serving: ptr(false)}},
			{Addresses: []string{" 010.000.000.002 "}, Conditions: discovery.EndpointConditions{Ready: ptr(false), Terminating: ptr(true)}},
			{}, // no address, no conditions
			{Addresses: []string{"fe80::1%eth0"}},
		},
	}
}

// TestNewEndpointSlice: the compact form keeps what the proxier reads, with the conditions'
// documented defaults applied and only the first address, parsed as the proxier parses it.
func TestNewEndpointSlice(t *testing.T) {
	got := NewEndpointSlice(apiSlice())
	want := &EndpointSlice{Namespace: "ns", Name: "web-1", ResourceVersion: "7", UID: "uid-1", Service: "web",
		AddressType: discovery.AddressTypeIPv4, Ports: []discovery.EndpointPort{ePort("http", v1.ProtocolTCP, 80)},
		TriggerTime: time.Date(2026, 12, 1, 10, 0, 0, 5e8, time.UTC),
		Endpoints: []SliceEndpoint{
			{Addr: netip.MustParseAddr("10.0.0.1"), nodeName: unique.Make("n1"), zone: unique.Make("z1"), Ready: true},
			{Addr: netip.MustParseAddr("10.0.0.2"), Terminating: true},
			{Ready: true, Serving: true},
			{Ready: true, Serving: true}, // a zoned address is not usable
		},
		Hints: []*discovery.EndpointHints{{ForZones: []discovery.ForZone{{Name: "z1"}}}, nil, nil, nil}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}

	s := apiSlice()
	s.Labels[v1.IsHeadlessService] = ""
	s.Annotations[v1.EndpointsLastChangeTriggerTime] = "yesterday"
	s.Endpoints = nil
	got = NewEndpointSlice(s)
	if !got.Headless || !got.TriggerTime.IsZero() || got.BadTriggerTime != "yesterday" || got.Endpoints != nil {
		t.Errorf("headless, a bad trigger time, no endpoints: %+v", got)
	}
	if got := NewEndpointSlice(&discovery.EndpointSlice{}); got.Service != "" || got.Headless || got.Endpoints != nil {
		t.Errorf("an empty slice: %+v", got)
	}
}

// TestNewEndpointSliceSharesNodesAndZones: equal node names and zones are one copy, across
// endpoints and slices; an endpoint is 48 bytes.
func TestNewEndpointSliceSharesNodesAndZones(t *testing.T) {
	a, b := NewEndpointSlice(apiSlice()), NewEndpointSlice(apiSlice())
	for _, pair := range [][2]string{{a.Endpoints[0].Node(), b.Endpoints[0].Node()}, {a.Endpoints[0].Zone(), b.Endpoints[0].Zone()}} {
		if unsafe.StringData(pair[0]) != unsafe.StringData(pair[1]) {
			t.Errorf("%q is not one copy", pair[0])
		}
	}
	if a.Endpoints[1].Node() != "" || a.Endpoints[1].Zone() != "" {
		t.Errorf("unset node or zone reads %q, %q", a.Endpoints[1].Node(), a.Endpoints[1].Zone())
	}
	if s := unsafe.Sizeof(SliceEndpoint{}); s != 48 {
		t.Errorf("an endpoint is %d bytes, want 48", s)
	}
}

// TestEndpointSliceSame: Same tells apart every change the proxier reads, and nothing else.
func TestEndpointSliceSame(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(*discovery.EndpointSlice)
		same   bool
	}{
		{"unchanged", func(*discovery.EndpointSlice) {}, true},
		{"metadata only", func(s *discovery.EndpointSlice) {
			s.ResourceVersion, s.Annotations[v1.EndpointsLastChangeTriggerTime] = "8", "2026-12-02T00:00:00Z"
		}, true},
		{"ready nil instead of true", func(s *discovery.EndpointSlice) { s.Endpoints[0].Conditions.Ready = nil }, true},
		{"a second address", func(s *discovery.EndpointSlice) { s.Endpoints[0].Addresses[1] = "10.0.0.8" }, true},
		{"an address", func(s *discovery.EndpointSlice) { s.Endpoints[0].Addresses[0] = "10.0.0.3" }, false},
		{"a node", func(s *discovery.EndpointSlice) { s.Endpoints[0].NodeName = ptr("n2") }, false},
		{"a zone", func(s *discovery.EndpointSlice) { s.Endpoints[0].Zone = nil }, false},
		{"hints", func(s *discovery.EndpointSlice) { s.Endpoints[0].Hints.ForZones[0].Name = "z2" }, false},
		{"no hints", func(s *discovery.EndpointSlice) { s.Endpoints[0].Hints = nil }, false},
		{"serving", func(s *discovery.EndpointSlice) { s.Endpoints[0].Conditions.Serving = ptr(true) }, false},
		{"terminating", func(s *discovery.EndpointSlice) { s.Endpoints[1].Conditions.Terminating = nil }, false},
		{"an endpoint fewer", func(s *discovery.EndpointSlice) { s.Endpoints = s.Endpoints[:3] }, false},
		{"a port", func(s *discovery.EndpointSlice) { *s.Ports[0].Port = 81 }, false},
		{"a port's name", func(s *discovery.EndpointSlice) { s.Ports[0].Name = ptr("https") }, false},
		{"a port's protocol", func(s *discovery.EndpointSlice) { s.Ports[0].Protocol = ptr(v1.ProtocolUDP) }, false},
		{"no ports", func(s *discovery.EndpointSlice) { s.Ports = nil }, false},
		{"the address type", func(s *discovery.EndpointSlice) { s.AddressType = discovery.AddressTypeIPv6 }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := apiSlice()
			c.change(s)
			if got := NewEndpointSlice(apiSlice()).Same(NewEndpointSlice(s)); got != c.same {
				t.Errorf("Same = %v, want %v", got, c.same)
			}
		})
	}
}

// TestEndpointSliceIsAnInformerObject: client-go's store keys the compact form by namespace and
// name and reads its resourceVersion; a deep copy shares nothing that could be modified.
func TestEndpointSliceIsAnInformerObject(t *testing.T) {
	s := NewEndpointSlice(apiSlice())
	if key, err := cache.MetaNamespaceKeyFunc(s); err != nil || key != "ns/web-1" {
		t.Errorf("key %q, %v", key, err)
	}
	m, err := meta.Accessor(s)
	if err != nil || m.GetResourceVersion() != "7" {
		t.Errorf("accessor %v, %v", m, err)
	}
	c := s.DeepCopyObject().(*EndpointSlice)
	if !reflect.DeepEqual(c, s) {
		t.Errorf("copy %+v differs from %+v", c, s)
	}
	bare := NewEndpointSlice(&discovery.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "empty"}})
	if c := bare.DeepCopyObject(); !reflect.DeepEqual(c, bare) {
		t.Errorf("copy of a slice without ports or endpoints %+v differs from %+v", c, bare)
	}
	if m, _ := meta.Accessor(s); m.GetUID() != "uid-1" {
		t.Errorf("uid %q, want uid-1 (client-go's consistency detector sorts by it)", m.GetUID())
	}
	*c.Ports[0].Port, c.Hints[0].ForZones[0].Name = 1, "other"
	if *s.Ports[0].Port != 80 || s.Hints[0].ForZones[0].Name != "z1" {
		t.Error("the copy shares ports or hints with the original")
	}
}
