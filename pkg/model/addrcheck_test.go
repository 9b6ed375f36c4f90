package model

import (
	"net/netip"
	"strings"
	"testing"
)

func testPolicy() AddrPolicy {
	return AddrPolicy{
		NodePortVirtualIPs: []netip.Addr{netip.MustParseAddr("169.254.0.252"), netip.MustParseAddr("fc01::aabb:ccdd:eefe")},
		ServiceVirtualIPs:  []netip.Addr{netip.MustParseAddr("169.254.0.253"), netip.MustParseAddr("fc01::aabb:ccdd:eeff")},
		ServiceCIDRs:       []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16"), netip.MustParsePrefix("fd00:96::/108")},
	}
}

func TestAddrPolicyRefuse(t *testing.T) {
	own := []netip.Addr{netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("fd00:96::10")}
	withCIDRs := testPolicy()
	withCIDRs.ExternalIPCIDRs = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("2001:db8::/64")}
	for _, tc := range []struct {
		name   string
		policy AddrPolicy
		addr   string
		kind   AddrKind
		want   string // "" allowed; else a prefix of the reason
	}{
		{"public v4", testPolicy(), "192.0.2.1", KindExternalIP, ""},
		{"public v6", testPolicy(), "2001:db8::1", KindLoadBalancerIP, ""},
		{"unspecified v4", testPolicy(), "0.0.0.0", KindExternalIP, RefusedUnspecified},
		{"unspecified v6", testPolicy(), "::", KindLoadBalancerIP, RefusedUnspecified},
		{"loopback v4", testPolicy(), "127.0.0.53", KindExternalIP, RefusedLoopback},
		{"loopback v6", testPolicy(), "::1", KindExternalIP, RefusedLoopback},
		{"mapped loopback", testPolicy(), "::ffff:127.0.0.1", KindExternalIP, RefusedLoopback},
		{"link-local v4", testPolicy(), "169.254.10.1", KindExternalIP, RefusedLinkLocal},
		{"link-local v6", testPolicy(), "fe80::1", KindLoadBalancerIP, RefusedLinkLocal},
		{"link-local multicast v4", testPolicy(), "224.0.0.251", KindExternalIP, RefusedLinkLocalMulti},
		{"link-local multicast v6", testPolicy(), "ff02::1", KindExternalIP, RefusedLinkLocalMulti},
		{"multicast v4", testPolicy(), "239.1.2.3", KindExternalIP, RefusedMulticast},
		{"multicast v6", testPolicy(), "ff0e::1", KindLoadBalancerIP, RefusedMulticast},
		{"NodePort virtual v6 (a ULA)", testPolicy(), "fc01::aabb:ccdd:eefe", KindExternalIP, RefusedNodePortVirtual},
		{"Service virtual v6", testPolicy(), "fc01::aabb:ccdd:eeff", KindLoadBalancerIP, RefusedServiceVirtual},
		{"NodePort virtual v4 (link-local first)", testPolicy(), "169.254.0.252", KindExternalIP, RefusedLinkLocal},
		{"another ClusterIP v4", testPolicy(), "10.96.0.11", KindExternalIP, RefusedServiceCIDR + "10.96.0.0/16"},
		{"another ClusterIP v6", testPolicy(), "fd00:96::11", KindLoadBalancerIP, RefusedServiceCIDR + "fd00:96::/108"},
		{"own ClusterIP", testPolicy(), "10.96.0.10", KindExternalIP, ""},
		{"no ServiceCIDR known", AddrPolicy{}, "10.96.0.11", KindExternalIP, ""},
		{"inside externalIPCIDRs", withCIDRs, "192.0.2.7", KindExternalIP, ""},
		{"outside externalIPCIDRs", withCIDRs, "198.51.100.7", KindExternalIP, RefusedOutsideExternals},
		{"outside externalIPCIDRs v6", withCIDRs, "2001:db8:1::7", KindExternalIP, RefusedOutsideExternals},
		{"LB IP not bound by externalIPCIDRs", withCIDRs, "198.51.100.7", KindLoadBalancerIP, ""},
		{"ServiceCIDR before externalIPCIDRs", withCIDRs, "10.96.0.12", KindExternalIP, RefusedServiceCIDR},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.policy.Refuse(netip.MustParseAddr(tc.addr), tc.kind, own)
			if (tc.want == "") != (got == "") || !strings.HasPrefix(got, tc.want) {
				t.Errorf("Refuse(%s, %v) = %q, want %q", tc.addr, tc.kind, got, tc.want)
			}
		})
	}
	if got := testPolicy().Refuse(netip.Addr{}, KindExternalIP, own); got != RefusedInvalid {
		t.Errorf("invalid address: got %q", got)
	}
}

// FuzzAddrPolicyRefuse checks, for any address, that Refuse never panics, that the address
// classes no Service may use are always refused, that a refused answer is one of the known
// phrases and that ExternalIPCIDRs only ever refuse more (never less).
func FuzzAddrPolicyRefuse(f *testing.F) {
	for _, s := range []string{"192.0.2.1", "127.0.0.1", "::1", "fe80::1", "fc01::aabb:ccdd:eefe", "10.96.0.11", "239.1.1.1", "0.0.0.0"} {
		a := netip.MustParseAddr(s)
		b := a.As16()
		f.Add(b[:], a.Is4(), false)
	}
	known := []string{RefusedInvalid, RefusedUnspecified, RefusedLoopback, RefusedLinkLocal, RefusedLinkLocalMulti,
		RefusedMulticast, RefusedNodePortVirtual, RefusedServiceVirtual, RefusedServiceCIDR, RefusedOutsideExternals}
	f.Fuzz(func(t *testing.T, raw []byte, v4, lb bool) {
		var b [16]byte
		copy(b[:], raw)
		a := netip.AddrFrom16(b)
		if v4 {
			a = a.Unmap()
			if !a.Is4() {
				a = netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
			}
		}
		kind := KindExternalIP
		if lb {
			kind = KindLoadBalancerIP
		}
		p := testPolicy()
		got := p.Refuse(a, kind, nil)
		u := a.Unmap()
		mustRefuse := u.IsLoopback() || u.IsUnspecified() || u.IsLinkLocalUnicast() || u.IsMulticast()
		if mustRefuse && got == "" {
			t.Fatalf("%s must be refused", a)
		}
		if got != "" && !hasKnownPrefix(got, known) {
			t.Fatalf("%s: unknown reason %q", a, got)
		}
		p.ExternalIPCIDRs = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}
		if got != "" && p.Refuse(a, kind, nil) == "" {
			t.Fatalf("%s: externalIPCIDRs made a refused address allowed", a)
		}
	})
}

func hasKnownPrefix(s string, known []string) bool {
	for _, k := range known {
		if strings.HasPrefix(s, k) {
			return true
		}
	}
	return false
}
