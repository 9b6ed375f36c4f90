package nodenet

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/knftables"
)

// TestBuildNFTServicePorts: the marking rules and the Service port sets, as transaction text.
func TestBuildNFTServicePorts(t *testing.T) {
	mark := " meta mark set meta mark | 0x1000"
	v4 := "ip daddr . meta l4proto . th dport @service-ports-v4" + mark
	v6 := "ip6 daddr . meta l4proto . th dport @service-ports-v6" + mark
	for _, tc := range []struct {
		name        string
		cfg         NFTConfig
		want, never []string
	}{{
		name: "proxyAll: both families marked, from outside except the gateway, and from the node",
		cfg: NFTConfig{Gateway: "antrea-gw0", MarkServicePorts: true, ServicePorts: []AddrPortProto{
			{a("192.168.77.12"), "tcp", 9999}, {a("172.18.0.100"), "udp", 53}, {a("fd00:77::12"), "sctp", 9999}}},
		want: []string{
			"add chain inet antrea-proxy mark-prerouting { type filter hook prerouting priority -90 ; }",
			"add chain inet antrea-proxy mark-output { type route hook output priority -90 ; }",
			"add set inet antrea-proxy service-ports-v4 { type ipv4_addr . inet_proto . inet_service ;",
			"add set inet antrea-proxy service-ports-v6 { type ipv6_addr . inet_proto . inet_service ;",
			`add rule inet antrea-proxy mark-prerouting iifname != "antrea-gw0" ` + v4,
			`add rule inet antrea-proxy mark-prerouting iifname != "antrea-gw0" ` + v6,
			"add rule inet antrea-proxy mark-output " + v4,
			"add rule inet antrea-proxy mark-output " + v6,
			"add element inet antrea-proxy service-ports-v4 { 192.168.77.12 . tcp . 9999 }",
			"add element inet antrea-proxy service-ports-v4 { 172.18.0.100 . udp . 53 }",
			"add element inet antrea-proxy service-ports-v6 { fd00:77::12 . sctp . 9999 }",
		},
		never: []string{"192.168.77.12/32", "dnat ip to 192.168.77.12"},
	}, {
		name: "without proxyAll: the chains and sets exist (flushed), nothing marks",
		cfg:  NFTConfig{Gateway: "antrea-gw0", ServicePorts: []AddrPortProto{{a("192.168.77.12"), "tcp", 9999}}},
		want: []string{
			"add chain inet antrea-proxy mark-prerouting { type filter hook prerouting priority -90 ; }",
			"add set inet antrea-proxy service-ports-v4 { type ipv4_addr . inet_proto . inet_service ;",
		},
		never: []string{"meta mark set", "192.168.77.12"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			fake := knftables.NewFake(knftables.InetFamily, "antrea-proxy")
			// A previous content (another port) is replaced, not added to.
			for _, cfg := range []NFTConfig{{Gateway: "antrea-gw0", MarkServicePorts: true, ServicePorts: []AddrPortProto{{a("192.0.2.1"), "tcp", 1}}}, tc.cfg} {
				tx := fake.NewTransaction()
				BuildNFT(tx, cfg)
				require.NoError(t, fake.Run(t.Context(), tx))
			}
			dump := fake.Dump()
			for _, w := range tc.want {
				require.Contains(t, dump, w)
			}
			for _, n := range append(tc.never, "192.0.2.1") {
				require.NotContains(t, dump, n)
			}
			require.LessOrEqual(t, strings.Count(dump, "mark-output ip daddr"), 1, "rules are not duplicated:\n%s", dump)
		})
	}
}

// TestReconcilerDesiredIntoOVS: what proxyAll sends into OVS, per input: Service ports marked
// and policy-routed (no host route of their own), announced LB IPs routed whole, ServiceCIDRs
// routed with one route each and only the ClusterIPs outside them with their own.
func TestReconcilerDesiredIntoOVS(t *testing.T) {
	gw := "antrea-gw0"
	into := func(dst string) Route {
		via := svVIP[0]
		if strings.Contains(dst, ":") {
			via = svVIP[1]
		}
		return Route{Dst: p(dst), Via: via, Dev: gw, OnLink: true}
	}
	base := []Route{{Dst: p("169.254.0.253/32"), Dev: gw}, {Dst: p("fc01::aabb:ccdd:eeff/128"), Dev: gw}, into("169.254.0.252/32"), into("fc01::aabb:ccdd:eefe/128")}
	rules := []Rule{{Priority: 9700, Mark: 0x1000, Table: 9700}, {IPv6: true, Priority: 9700, Mark: 0x1000, Table: 9700}}
	tableRoutes := []Route{into("0.0.0.0/0"), into("::/0")}
	ext := []AddrPortProto{{a("192.168.77.12"), "tcp", 9999}, {a("fd00:77::12"), "udp", 53}}
	for _, tc := range []struct {
		name           string
		proxyAll, ipv6 bool
		exp            Exposure
		announced      []netip.Addr
		routes         []Route // after base
		rules          []Rule
		tableRoutes    []Route
		servicePorts   []AddrPortProto
	}{{
		name: "Service ports: marked, no host route", proxyAll: true, ipv6: true, exp: Exposure{Ports: ext},
		rules: rules, tableRoutes: tableRoutes, servicePorts: ext,
	}, {
		name: "an unrouted family has neither rule nor ports", proxyAll: true, exp: Exposure{Ports: ext},
		rules: rules[:1], tableRoutes: tableRoutes[:1], servicePorts: ext[:1],
	}, {
		name: "announced LB IPs: a host route each, for ARP", proxyAll: true, ipv6: true,
		exp: Exposure{Ports: ext}, announced: []netip.Addr{a("172.18.0.100"), a("fd00:18::1")},
		routes: []Route{into("172.18.0.100/32"), into("fd00:18::1/128")}, rules: rules, tableRoutes: tableRoutes, servicePorts: ext,
	}, {
		name: "no ServiceCIDRs: a route per ClusterIP", proxyAll: true, ipv6: true,
		exp:    Exposure{ClusterIPs: []netip.Addr{a("10.96.0.10"), a("10.97.0.5"), a("fd00:96::10")}},
		routes: []Route{into("10.96.0.10/32"), into("10.97.0.5/32"), into("fd00:96::10/128")}, rules: rules, tableRoutes: tableRoutes,
	}, {
		name: "ServiceCIDRs: one route each, and the ClusterIPs outside them", proxyAll: true, ipv6: true,
		exp: Exposure{ClusterIPs: []netip.Addr{a("10.96.0.10"), a("10.96.3.1"), a("10.97.0.5"), a("fd00:96::10")},
			ServiceCIDRs: []netip.Prefix{p("10.96.0.0/16"), p("fd00:96::/112")}},
		routes: []Route{into("10.96.0.0/16"), into("fd00:96::/112"), into("10.97.0.5/32")}, rules: rules, tableRoutes: tableRoutes,
	}, {
		name: "without proxyAll nothing goes into OVS", ipv6: true,
		exp:       Exposure{Ports: ext, ClusterIPs: []netip.Addr{a("10.96.0.10")}, ServiceCIDRs: []netip.Prefix{p("10.96.0.0/16")}},
		announced: []netip.Addr{a("172.18.0.100")},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewReconciler(Config{LocalNode: "n1", Gateway: gw, IPv4: true, IPv6: tc.ipv6, ProxyAll: tc.proxyAll,
				NodePortVirtualIPs: npVIP, ServiceVirtualIPs: svVIP, VirtualMAC: vMAC}, nil)
			r.SetExposure(tc.exp)
			r.SetAnnounced(tc.announced)
			d := r.Desired()
			want := slicesOfFamily(base, tc.ipv6)
			if !tc.proxyAll {
				want = want[:len(want)/2]
			}
			want = append(want, tc.routes...)
			cmpAddr := cmp.Comparer(func(x, y netip.Addr) bool { return x == y })
			cmpPrefix := cmp.Comparer(func(x, y netip.Prefix) bool { return x == y })
			require.Empty(t, cmp.Diff(want, d.Routes, cmpAddr, cmpPrefix), "routes")
			require.Equal(t, tc.rules, d.Rules)
			require.Empty(t, cmp.Diff(tc.tableRoutes, d.TableRoutes, cmpAddr, cmpPrefix), "table routes")
			require.Equal(t, tc.servicePorts, d.NFT.ServicePorts)
			require.Equal(t, tc.proxyAll, d.NFT.MarkServicePorts)
		})
	}
}

// slicesOfFamily keeps the base routes of the routed families: the Service virtual IPs' routes
// first, then the NodePort virtual IPs' (proxyAll).
func slicesOfFamily(base []Route, ipv6 bool) []Route {
	var out []Route
	for _, r := range base {
		if ipv6 || r.Dst.Addr().Is4() {
			out = append(out, r)
		}
	}
	return out
}
