package config

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
)

func TestParseSkipServices(t *testing.T) {
	nn := func(ns, name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }
	tests := []struct {
		name      string
		in        []string
		wantNames []types.NamespacedName
		wantIPs   []netip.Addr
		wantErrs  []string
	}{
		{name: "empty"},
		{
			name:      "names and IPs",
			in:        []string{"kube-system/kube-dns", "10.96.0.10", "fd00::a", "default/web"},
			wantNames: []types.NamespacedName{nn("kube-system", "kube-dns"), nn("default", "web")},
			wantIPs:   []netip.Addr{netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("fd00::a")},
		},
		{
			name:      "duplicates collapse, mapped IPv4 is unmapped",
			in:        []string{"ns/a", "ns/a", "::ffff:10.0.0.1", "10.0.0.1"},
			wantNames: []types.NamespacedName{nn("ns", "a")},
			wantIPs:   []netip.Addr{netip.MustParseAddr("10.0.0.1")},
		},
		{
			name:      "bad entries reported, good ones kept",
			in:        []string{"a/b/c", "ns/ok", "noslash", "/name", "ns/", "fe80::1%eth0", "ns/9svc", "10.0.0.256"},
			wantNames: []types.NamespacedName{nn("ns", "ok")},
			wantErrs: []string{
				`skipServices[0]: "a/b/c" is neither "namespace/name" nor an IP address`,
				`skipServices[2]: "noslash" is neither "namespace/name" nor an IP address`,
				`skipServices[3]: "/name": namespace "" is invalid: `,
				`skipServices[4]: "ns/": Service name "" is invalid: `,
				`skipServices[5]: "fe80::1%eth0": a ClusterIP has no zone`,
				`skipServices[6]: "ns/9svc": Service name "9svc" is invalid: `,
				`skipServices[7]: "10.0.0.256" is neither "namespace/name" nor an IP address`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseSkipServices(tt.in)
			lines := errorLines(err)
			require.Len(t, lines, len(tt.wantErrs), "errors: %q", lines)
			for i := range tt.wantErrs {
				require.Contains(t, lines[i], tt.wantErrs[i])
			}
			wantNames := map[types.NamespacedName]struct{}{}
			for _, n := range tt.wantNames {
				wantNames[n] = struct{}{}
			}
			wantIPs := map[netip.Addr]struct{}{}
			for _, ip := range tt.wantIPs {
				wantIPs[ip] = struct{}{}
			}
			require.Empty(t, cmp.Diff(wantNames, got.Names))
			require.Empty(t, cmp.Diff(wantIPs, got.IPs, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })))
			require.Equal(t, len(tt.wantNames)+len(tt.wantIPs), got.Len())
		})
	}
}

func TestSkipServicesLookups(t *testing.T) {
	p := AntreaProxyConfig{SkipServices: []string{"kube-system/kube-dns", "10.96.0.10", "fd00::a"}}
	s, err := p.SkipServiceSet()
	require.NoError(t, err)
	require.True(t, s.HasName(types.NamespacedName{Namespace: "kube-system", Name: "kube-dns"}))
	require.False(t, s.HasName(types.NamespacedName{Namespace: "default", Name: "kube-dns"}))
	require.True(t, s.HasIP(netip.MustParseAddr("10.96.0.10")))
	require.True(t, s.HasIP(netip.MustParseAddr("::ffff:10.96.0.10")), "mapped form matches")
	require.True(t, s.HasIP(netip.MustParseAddr("fd00:0::a")))
	require.False(t, s.HasIP(netip.MustParseAddr("10.96.0.11")))

	var zero SkipServices
	require.False(t, zero.HasName(types.NamespacedName{Namespace: "a", Name: "b"}))
	require.False(t, zero.HasIP(netip.MustParseAddr("10.0.0.1")))
}

func TestNodePortPrefixes(t *testing.T) {
	p := AntreaProxyConfig{NodePortAddresses: []string{"10.1.2.3/16", "fd00::1/64"}}
	got, err := p.NodePortPrefixes()
	require.NoError(t, err)
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("fd00::/64")}, got)

	got, err = AntreaProxyConfig{}.NodePortPrefixes()
	require.NoError(t, err)
	require.Empty(t, got)

	_, err = AntreaProxyConfig{NodePortAddresses: []string{"10.0.0.0/8", "x", "10.0.0.0/33"}}.NodePortPrefixes()
	require.Equal(t, []string{
		`nodePortAddresses[1]: "x" is not a valid CIDR`,
		`nodePortAddresses[2]: "10.0.0.0/33" is not a valid CIDR`,
	}, errorLines(err))
}

func TestExternalIPPrefixes(t *testing.T) {
	p := AntreaProxyConfig{ExternalIPCIDRs: []string{"192.0.2.1/24", "::ffff:198.51.100.0/120", "2001:db8::1/64"}}
	got := p.ExternalIPPrefixes()
	want := []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("2001:db8::/64")}
	if !slices.Equal(got, want) {
		t.Errorf("ExternalIPPrefixes() = %v, want %v", got, want)
	}
	if got := (AntreaProxyConfig{}).ExternalIPPrefixes(); len(got) != 0 {
		t.Errorf("unset: %v", got)
	}
}
