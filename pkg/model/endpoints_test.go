package model

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

type sliceOpt func(*discovery.EndpointSlice)

func newSlice(name string, addrType discovery.AddressType, ports []discovery.EndpointPort, eps []discovery.Endpoint, opts ...sliceOpt) *discovery.EndpointSlice {
	s := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: name,
			Labels: map[string]string{discovery.LabelServiceName: "svc"},
		},
		AddressType: addrType,
		Ports:       ports,
		Endpoints:   eps,
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

func ePort(name string, proto v1.Protocol, port int32) discovery.EndpointPort {
	return discovery.EndpointPort{Name: ptr(name), Protocol: ptr(proto), Port: ptr(port)}
}

func ep(ip, node string) discovery.Endpoint {
	e := discovery.Endpoint{Addresses: []string{ip}}
	if node != "" {
		e.NodeName = ptr(node)
	}
	return e
}

func withConds(e discovery.Endpoint, ready, serving, terminating *bool) discovery.Endpoint {
	e.Conditions = discovery.EndpointConditions{Ready: ready, Serving: serving, Terminating: terminating}
	return e
}

func want(ip string, port uint16, node string, ready, serving, terminating bool) Endpoint {
	return Endpoint{IP: netip.MustParseAddr(ip), Port: port, NodeName: node, Local: node == "node1",
		Ready: ready, Serving: serving, Terminating: terminating}
}

var (
	tru = ptr(true)
	fls = ptr(false)
)

func TestEndpointsForServicePort(t *testing.T) {
	httpPorts := []discovery.EndpointPort{ePort("http", v1.ProtocolTCP, 8080)}
	tests := []struct {
		name   string
		slices []*discovery.EndpointSlice
		port   ServicePortName
		served Families
		want   []Endpoint
	}{
		{
			name: "single slice, sorted by IP, local detection",
			slices: []*discovery.EndpointSlice{newSlice("s1", discovery.AddressTypeIPv4, httpPorts, []discovery.Endpoint{
				ep("10.0.0.3", "node2"), ep("10.0.0.1", "node1"), ep("10.0.0.2", ""),
			})},
			port: spn("http", TCP), served: Families{IPv4: true},
			want: []Endpoint{
				want("10.0.0.1", 8080, "node1", true, true, false),
				want("10.0.0.2", 8080, "", true, true, false),
				want("10.0.0.3", 8080, "node2", true, true, false),
			},
		},
		{
			name: "conditions: defaults and explicit values",
			slices: []*discovery.EndpointSlice{newSlice("s1", discovery.AddressTypeIPv4, httpPorts, []discovery.Endpoint{
				withConds(ep("10.0.0.1", ""), nil, nil, nil), // all defaults
				withConds(ep("10.0.0.2", ""), fls, nil, nil), // serving follows ready
				withConds(ep("10.0.0.3", ""), fls, tru, tru), // terminating but serving
				withConds(ep("10.0.0.4", ""), fls, fls, tru), // terminating, not serving
				withConds(ep("10.0.0.5", ""), tru, tru, fls), // explicit ready
				withConds(ep("10.0.0.6", ""), nil, fls, nil), // ready default, serving false
			})},
			port: spn("http", TCP), served: Families{IPv4: true},
			want: []Endpoint{
				want("10.0.0.1", 8080, "", true, true, false),
				want("10.0.0.2", 8080, "", false, false, false),
				want("10.0.0.3", 8080, "", false, true, true),
				want("10.0.0.4", 8080, "", false, false, true),
				want("10.0.0.5", 8080, "", true, true, false),
				want("10.0.0.6", 8080, "", true, false, false),
			},
		},
		{
			name: "endpoints split across slices, one duplicated: counted once, ready copy wins whatever the slice order",
			slices: []*discovery.EndpointSlice{
				newSlice("b", discovery.AddressTypeIPv4, httpPorts, []discovery.Endpoint{
					withConds(ep("10.0.0.2", "node1"), tru, nil, nil), ep("10.0.0.3", ""),
				}),
				newSlice("a", discovery.AddressTypeIPv4, httpPorts, []discovery.Endpoint{
					ep("10.0.0.1", ""), withConds(ep("10.0.0.2", "node1"), fls, fls, tru),
				}),
				newSlice("c", discovery.AddressTypeIPv4, httpPorts, []discovery.Endpoint{
					withConds(ep("10.0.0.2", "node1"), fls, tru, tru),
				}),
			},
			port: spn("http", TCP), served: Families{IPv4: true},
			want: []Endpoint{
				want("10.0.0.1", 8080, "", true, true, false),
				want("10.0.0.2", 8080, "node1", true, true, false),
				want("10.0.0.3", 8080, "", true, true, false),
			},
		},
		{
			name: "duplicate without a ready copy: serving copy wins",
			slices: []*discovery.EndpointSlice{
				newSlice("a", discovery.AddressTypeIPv4, httpPorts, []discovery.Endpoint{withConds(ep("10.0.0.2", ""), fls, fls, tru)}),
				newSlice("b", discovery.AddressTypeIPv4, httpPorts, []discovery.Endpoint{withConds(ep("10.0.0.2", ""), fls, tru, tru)}),
			},
			port: spn("http", TCP), served: Families{IPv4: true},
			want: []Endpoint{want("10.0.0.2", 8080, "", false, true, true)},
		},
		{
			name: "equally good copies: the one in the slice with the smallest name wins, whatever the order",
			slices: []*discovery.EndpointSlice{
				newSlice("c", discovery.AddressTypeIPv4, httpPorts, []discovery.Endpoint{ep("10.0.0.2", "node3"), ep("10.0.0.1", "node3")}),
				newSlice("a", discovery.AddressTypeIPv4, httpPorts, []discovery.Endpoint{ep("10.0.0.2", "node1")}),
				newSlice("b", discovery.AddressTypeIPv4, httpPorts, []discovery.Endpoint{ep("10.0.0.2", "node2"), ep("10.0.0.1", "node2")}),
			},
			port: spn("http", TCP), served: Families{IPv4: true},
			want: []Endpoint{want("10.0.0.1", 8080, "node2", true, true, false), want("10.0.0.2", 8080, "node1", true, true, false)},
		},
		{
			name: "same IP with different port numbers in two slices is two endpoints",
			slices: []*discovery.EndpointSlice{
				newSlice("a", discovery.AddressTypeIPv4, []discovery.EndpointPort{ePort("http", v1.ProtocolTCP, 8081)}, []discovery.Endpoint{ep("10.0.0.1", "")}),
				newSlice("b", discovery.AddressTypeIPv4, httpPorts, []discovery.Endpoint{ep("10.0.0.1", "")}),
			},
			port: spn("http", TCP), served: Families{IPv4: true},
			want: []Endpoint{want("10.0.0.1", 8080, "", true, true, false), want("10.0.0.1", 8081, "", true, true, false)},
		},
		{
			name: "port matched by name and protocol; nil protocol means TCP; nil name means unnamed",
			slices: []*discovery.EndpointSlice{
				newSlice("a", discovery.AddressTypeIPv4, []discovery.EndpointPort{
					ePort("dns", v1.ProtocolTCP, 5353),
					ePort("dns", v1.ProtocolUDP, 53),
					{Port: ptr(int32(9999))},
				}, []discovery.Endpoint{ep("10.0.0.1", "")}),
			},
			port: spn("dns", UDP), served: Families{IPv4: true},
			want: []Endpoint{want("10.0.0.1", 53, "", true, true, false)},
		},
		{
			name: "unnamed TCP port from nil name and protocol",
			slices: []*discovery.EndpointSlice{
				newSlice("a", discovery.AddressTypeIPv4, []discovery.EndpointPort{{Port: ptr(int32(9999))}}, []discovery.Endpoint{ep("10.0.0.1", "")}),
			},
			port: spn("", TCP), served: Families{IPv4: true},
			want: []Endpoint{want("10.0.0.1", 9999, "", true, true, false)},
		},
		{
			name: "SCTP",
			slices: []*discovery.EndpointSlice{
				newSlice("a", discovery.AddressTypeIPv4, []discovery.EndpointPort{ePort("s", v1.ProtocolSCTP, 9000)}, []discovery.Endpoint{ep("10.0.0.1", "")}),
			},
			port: spn("s", SCTP), served: Families{IPv4: true},
			want: []Endpoint{want("10.0.0.1", 9000, "", true, true, false)},
		},
		{
			name: "nil or out-of-range port number skips the slice's port",
			slices: []*discovery.EndpointSlice{
				newSlice("a", discovery.AddressTypeIPv4, []discovery.EndpointPort{{Name: ptr("http"), Protocol: ptr(v1.ProtocolTCP)}}, []discovery.Endpoint{ep("10.0.0.1", "")}),
				newSlice("b", discovery.AddressTypeIPv4, []discovery.EndpointPort{ePort("http", v1.ProtocolTCP, 0)}, []discovery.Endpoint{ep("10.0.0.2", "")}),
				newSlice("c", discovery.AddressTypeIPv4, []discovery.EndpointPort{ePort("http", v1.ProtocolTCP, 65536)}, []discovery.Endpoint{ep("10.0.0.3", "")}),
				newSlice("d", discovery.AddressTypeIPv4, httpPorts, []discovery.Endpoint{ep("10.0.0.4", "")}),
			},
			port: spn("http", TCP), served: Families{IPv4: true},
			want: []Endpoint{want("10.0.0.4", 8080, "", true, true, false)},
		},
		{
			name: "families: FQDN skipped, IPv6 slice skipped on IPv4 proxier, mismatched address skipped",
			slices: []*discovery.EndpointSlice{
				newSlice("fqdn", discovery.AddressTypeFQDN, httpPorts, []discovery.Endpoint{ep("example.com", "")}),
				newSlice("v6", discovery.AddressTypeIPv6, httpPorts, []discovery.Endpoint{ep("fd00::1", "")}),
				newSlice("v4", discovery.AddressTypeIPv4, httpPorts, []discovery.Endpoint{ep("10.0.0.1", ""), ep("fd00::2", ""), ep("garbage", "")}),
			},
			port: spn("http", TCP), served: Families{IPv4: true},
			want: []Endpoint{want("10.0.0.1", 8080, "", true, true, false)},
		},
		{
			name: "dual-stack proxier takes both address types, IPv4 sorts first",
			slices: []*discovery.EndpointSlice{
				newSlice("v6", discovery.AddressTypeIPv6, httpPorts, []discovery.Endpoint{ep("fd00::1", "node1")}),
				newSlice("v4", discovery.AddressTypeIPv4, httpPorts, []discovery.Endpoint{ep("10.0.0.1", "")}),
			},
			port: spn("http", TCP), served: DualStack,
			want: []Endpoint{want("10.0.0.1", 8080, "", true, true, false), want("fd00::1", 8080, "node1", true, true, false)},
		},
		{
			name: "only the first address of an endpoint is used",
			slices: []*discovery.EndpointSlice{newSlice("a", discovery.AddressTypeIPv4, httpPorts, []discovery.Endpoint{
				{Addresses: []string{"10.0.0.1", "10.0.0.9"}}, {Addresses: nil},
			})},
			port: spn("http", TCP), served: Families{IPv4: true},
			want: []Endpoint{want("10.0.0.1", 8080, "", true, true, false)},
		},
		{
			name: "slices of other Services, other namespaces or without label are ignored; nil slices too",
			slices: []*discovery.EndpointSlice{
				nil,
				newSlice("other", discovery.AddressTypeIPv4, httpPorts, []discovery.Endpoint{ep("10.0.0.1", "")},
					func(s *discovery.EndpointSlice) { s.Labels[discovery.LabelServiceName] = "other" }),
				newSlice("otherns", discovery.AddressTypeIPv4, httpPorts, []discovery.Endpoint{ep("10.0.0.2", "")},
					func(s *discovery.EndpointSlice) { s.Namespace = "ns2" }),
				newSlice("nolabel", discovery.AddressTypeIPv4, httpPorts, []discovery.Endpoint{ep("10.0.0.3", "")},
					func(s *discovery.EndpointSlice) { s.Labels = nil }),
				newSlice("mine", discovery.AddressTypeIPv4, httpPorts, []discovery.Endpoint{ep("10.0.0.4", "")}),
			},
			port: spn("http", TCP), served: Families{IPv4: true},
			want: []Endpoint{want("10.0.0.4", 8080, "", true, true, false)},
		},
		{name: "no slices", slices: nil, port: spn("http", TCP), served: DualStack, want: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := endpointsForServicePort(tc.slices, tc.port, "node1", tc.served)
			if diff := cmp.Diff(tc.want, got, netipCmp); diff != "" {
				t.Errorf("endpoints (-want +got):\n%s", diff)
			}
			// Reversing the slice order must not change the result.
			rev := make([]*discovery.EndpointSlice, len(tc.slices))
			for i, s := range tc.slices {
				rev[len(rev)-1-i] = s
			}
			if diff := cmp.Diff(got, endpointsForServicePort(rev, tc.port, "node1", tc.served), netipCmp); diff != "" {
				t.Errorf("result depends on slice order (-forward +reversed):\n%s", diff)
			}
		})
	}
}

func TestEndpointsZoneAndHints(t *testing.T) {
	e := ep("10.0.0.1", "node1")
	e.Zone = ptr("zone-a")
	e.Hints = &discovery.EndpointHints{
		ForZones: []discovery.ForZone{{Name: "zone-a"}, {Name: "zone-b"}},
		ForNodes: []discovery.ForNode{{Name: "node1"}},
	}
	got := endpointsForServicePort([]*discovery.EndpointSlice{
		newSlice("a", discovery.AddressTypeIPv4, []discovery.EndpointPort{ePort("http", v1.ProtocolTCP, 80)}, []discovery.Endpoint{e}),
	}, spn("http", TCP), "node1", Families{IPv4: true})
	require.Len(t, got, 1)
	require.Equal(t, "zone-a", got[0].Zone)
	require.Equal(t, []string{"zone-a", "zone-b"}, got[0].ZoneHints)
	require.Equal(t, []string{"node1"}, got[0].NodeHints)
	require.True(t, got[0].Local)
	require.Equal(t, "10.0.0.1:80", got[0].AddrPort())

	// No node name configured: nothing is local, even endpoints without a node name.
	got = endpointsForServicePort([]*discovery.EndpointSlice{
		newSlice("a", discovery.AddressTypeIPv4, []discovery.EndpointPort{ePort("http", v1.ProtocolTCP, 80)}, []discovery.Endpoint{ep("10.0.0.1", "")}),
	}, spn("http", TCP), "", Families{IPv4: true})
	require.Len(t, got, 1)
	require.False(t, got[0].Local)
}

func TestEndpointsForService(t *testing.T) {
	slices := []*discovery.EndpointSlice{
		newSlice("a", discovery.AddressTypeIPv4, []discovery.EndpointPort{
			ePort("http", v1.ProtocolTCP, 8080), ePort("dns", v1.ProtocolUDP, 53), {Name: ptr("nonum"), Protocol: ptr(v1.ProtocolTCP)},
		}, []discovery.Endpoint{ep("10.0.0.2", ""), ep("10.0.0.1", "node1")}),
		newSlice("b", discovery.AddressTypeIPv4, []discovery.EndpointPort{ePort("http", v1.ProtocolTCP, 8080)},
			[]discovery.Endpoint{ep("10.0.0.1", "node1"), ep("10.0.0.3", "")}),
	}
	got := endpointsForService(slices, svcNN, "node1", Families{IPv4: true})
	wantMap := map[ServicePortName][]Endpoint{
		spn("http", TCP): {
			want("10.0.0.1", 8080, "node1", true, true, false),
			want("10.0.0.2", 8080, "", true, true, false),
			want("10.0.0.3", 8080, "", true, true, false),
		},
		spn("dns", UDP): {
			want("10.0.0.1", 53, "node1", true, true, false),
			want("10.0.0.2", 53, "", true, true, false),
		},
	}
	if diff := cmp.Diff(wantMap, got, netipCmp); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestEndpointsMalformedNeverPanics(t *testing.T) {
	slices := []*discovery.EndpointSlice{
		nil,
		{},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Labels: map[string]string{discovery.LabelServiceName: "svc"}}},
		newSlice("x", "bogus", nil, []discovery.Endpoint{{}}),
		newSlice("y", discovery.AddressTypeIPv4, []discovery.EndpointPort{{}}, []discovery.Endpoint{{}, {Addresses: []string{""}}, {Hints: &discovery.EndpointHints{}}}),
	}
	require.NotPanics(t, func() {
		require.Empty(t, endpointsForServicePort(slices, spn("", TCP), "node1", DualStack))
		require.Empty(t, endpointsForService(slices, svcNN, "node1", DualStack))
	})
}

// compact converts API slices as the agent's informer does (nil stays nil).
func compact(in []*discovery.EndpointSlice) []*EndpointSlice {
	if in == nil {
		return nil
	}
	out := make([]*EndpointSlice, len(in))
	for i, s := range in {
		if s != nil {
			out[i] = NewEndpointSlice(s)
		}
	}
	return out
}

func endpointsForServicePort(in []*discovery.EndpointSlice, port ServicePortName, nodeName string, served Families) []Endpoint {
	return EndpointsForServicePort(compact(in), port, nodeName, served)
}

func endpointsForService(in []*discovery.EndpointSlice, svc types.NamespacedName, nodeName string, served Families) map[ServicePortName][]Endpoint {
	return EndpointsForService(compact(in), svc, nodeName, served)
}
