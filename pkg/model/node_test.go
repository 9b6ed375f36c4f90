package model

import (
	"net/netip"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestNodePodCIDRs(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec v1.NodeSpec
		want []string
		fam  Families
	}{
		{"podCIDRs win", v1.NodeSpec{PodCIDR: "10.1.0.0/24", PodCIDRs: []string{"10.2.0.0/24", "fd00::/64"}}, []string{"10.2.0.0/24", "fd00::/64"}, DualStack},
		{"podCIDR alone", v1.NodeSpec{PodCIDR: "10.1.0.7/24"}, []string{"10.1.0.0/24"}, Families{IPv4: true}},
		{"unparseable left out", v1.NodeSpec{PodCIDRs: []string{"nope", "fd00::/64"}}, []string{"fd00::/64"}, Families{IPv6: true}},
		{"none", v1.NodeSpec{}, nil, Families{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := NodePodCIDRs(&v1.Node{Spec: tc.spec})
			var want []netip.Prefix
			for _, s := range tc.want {
				want = append(want, netip.MustParsePrefix(s))
			}
			if len(got) != len(want) {
				t.Fatalf("got %v, want %v", got, want)
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("got %v, want %v", got, want)
				}
			}
			if f := FamiliesOf(got); f != tc.fam {
				t.Errorf("families %+v, want %+v", f, tc.fam)
			}
		})
	}
	if NodePodCIDRs(nil) != nil {
		t.Error("nil Node: want no prefixes")
	}
}

func TestNodePortAddresses(t *testing.T) {
	node := &v1.Node{Status: v1.NodeStatus{Addresses: []v1.NodeAddress{
		{Type: v1.NodeExternalIP, Address: "203.0.113.1"},
		{Type: v1.NodeInternalIP, Address: "192.168.50.1"},
		{Type: v1.NodeHostName, Address: "192.168.50.9"},
		{Type: v1.NodeInternalIP, Address: "not-an-ip"},
		{Type: v1.NodeInternalIP, Address: "::ffff:192.168.50.2"},
		{Type: v1.NodeExternalIP, Address: "192.168.50.1"},
		{Type: v1.NodeInternalIP, Address: "10.99.0.1"},
		{Type: v1.NodeInternalIP, Address: "fd00:50::1"},
	}}}
	addrs := func(ss ...string) []netip.Addr {
		var out []netip.Addr
		for _, s := range ss {
			out = append(out, netip.MustParseAddr(s))
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		node   *v1.Node
		within []string
		fam    Families
		want   []netip.Addr
	}{
		{"every InternalIP and ExternalIP, in status order, unmapped, once", node, nil, DualStack,
			addrs("203.0.113.1", "192.168.50.1", "192.168.50.2", "10.99.0.1", "fd00:50::1")},
		{"served families only", node, nil, Families{IPv6: true}, addrs("fd00:50::1")},
		{"within nodePortAddresses", node, []string{"192.168.50.0/24", "fd00:50::/64"}, Families{IPv4: true},
			addrs("192.168.50.1", "192.168.50.2")},
		{"no Node", nil, nil, DualStack, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var within []netip.Prefix
			for _, s := range tc.within {
				within = append(within, netip.MustParsePrefix(s))
			}
			got := NodePortAddresses(tc.node, within, tc.fam)
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
}
