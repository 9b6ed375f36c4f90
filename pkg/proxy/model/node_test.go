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
