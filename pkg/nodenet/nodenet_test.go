package nodenet

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/knftables"
)

var (
	a     = netip.MustParseAddr
	p     = netip.MustParsePrefix
	vMAC  = net.HardwareAddr{0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}
	npVIP = []netip.Addr{a("169.254.0.252"), a("fc01::aabb:ccdd:eefe")}
	svVIP = []netip.Addr{a("169.254.0.253"), a("fc01::aabb:ccdd:eeff")}
)

func TestGatewayMACAndAddresses(t *testing.T) {
	m := GatewayMAC("node-1")
	require.Equal(t, m, GatewayMAC("node-1"), "stable")
	require.NotEqual(t, m, GatewayMAC("node-2"))
	require.Len(t, m, 6)
	require.Equal(t, byte(0x02), m[0]&0x03, "locally administered unicast")
	require.Equal(t, []netip.Prefix{p("10.20.0.1/24"), p("fd00:20::1/64")},
		GatewayAddresses([]netip.Prefix{p("10.20.0.0/24"), p("fd00:20::/64")}))
}

func TestMergePrefixes(t *testing.T) {
	got := mergePrefixes([]netip.Prefix{p("10.20.1.0/24"), p("10.20.0.0/16"), p("10.30.0.0/24"), p("fd00::/64"), p("10.30.0.0/24"), {}})
	require.Equal(t, []netip.Prefix{p("10.20.0.0/16"), p("10.30.0.0/24"), p("fd00::/64")}, got)
}

func TestBuildNFT(t *testing.T) {
	fake := knftables.NewFake(knftables.InetFamily, "antrea-proxy")
	cfg := NFTConfig{Gateway: "antrea-gw0", PodCIDRs: []netip.Prefix{p("10.20.0.0/24")},
		NoMasquerade: []netip.Prefix{p("10.20.0.0/24"), p("10.20.1.0/24")}, SNATVirtualIPs: svVIP[:1], NodePortVirtualIPs: npVIP[:1],
		NodePorts:   []NodePort{{a("192.168.50.1"), "tcp", 30080}, {a("192.168.50.1"), "udp", 30053}},
		HostSources: []netip.Addr{a("10.20.0.1")}}
	tx := fake.NewTransaction()
	BuildNFT(tx, cfg)
	require.NoError(t, fake.Run(t.Context(), tx))
	dump := fake.Dump()
	for _, want := range []string{
		"add rule inet antrea-proxy nodeports ip daddr . meta l4proto . th dport @nodeports-v4 dnat ip to 169.254.0.252",
		"add rule inet antrea-proxy prerouting jump nodeports",
		"add rule inet antrea-proxy output jump nodeports",
		`add rule inet antrea-proxy postrouting ip saddr 10.20.0.0/24 ip daddr != @no-masquerade-v4 oifname != "antrea-gw0" masquerade`,
		`add rule inet antrea-proxy postrouting ip saddr 169.254.0.253 oifname != "antrea-gw0" masquerade`,
		"add element inet antrea-proxy nodeports-v4 { 192.168.50.1 . tcp . 30080 }",
		"add element inet antrea-proxy nodeports-v4 { 192.168.50.1 . udp . 30053 }",
		"add element inet antrea-proxy no-masquerade-v4 { 10.20.0.0/24 }",
		"add element inet antrea-proxy no-masquerade-v4 { 10.20.1.0/24 }",
		`add rule inet antrea-proxy postrouting oifname "antrea-gw0" ip daddr != 10.20.0.0/24 fib saddr type local ip saddr != 10.20.0.1 snat ip to 10.20.0.1`,
	} {
		require.Contains(t, dump, want)
	}

	// A second build replaces the content: a NodePort that went away leaves no element.
	cfg.NodePorts = cfg.NodePorts[:1]
	tx = fake.NewTransaction()
	BuildNFT(tx, cfg)
	require.NoError(t, fake.Run(t.Context(), tx))
	dump = fake.Dump()
	require.NotContains(t, dump, "30053")
	require.Equal(t, 1, strings.Count(dump, "dnat ip to"), "rules are not duplicated:\n%s", dump)
}

func TestReconcilerDesired(t *testing.T) {
	r := NewReconciler(Config{LocalNode: "n1", Gateway: "antrea-gw0", IPv4: true, ProxyAll: true,
		ClusterCIDRs: []netip.Prefix{p("10.20.0.0/16")}, NodePortVirtualIPs: npVIP, ServiceVirtualIPs: svVIP, VirtualMAC: vMAC}, nil)
	r.SetNode(NodeInfo{Name: "n1", PodCIDRs: []netip.Prefix{p("10.20.0.0/24"), p("fd00:20::/64")},
		InternalIPs: []netip.Addr{a("192.168.50.1"), a("10.99.0.1")}})
	r.SetNode(NodeInfo{Name: "n2", PodCIDRs: []netip.Prefix{p("10.20.1.0/24")}, InternalIPs: []netip.Addr{a("192.168.50.2")}})
	r.SetNode(NodeInfo{Name: "n3", PodCIDRs: []netip.Prefix{p("10.20.2.0/24")}}) // no InternalIP: no route
	// The NodePort addresses are the proxier's (model.NodePortAddresses: 10.99.0.1 is outside
	// nodePortAddresses, so it is not among them); the host drops only an unrouted family.
	r.SetExposure(Exposure{NodePorts: []PortProto{{"tcp", 30080}},
		NodePortAddresses: []netip.Addr{a("192.168.50.1"), a("192.168.50.11"), a("fd00:50::1")}, Ports: []AddrPortProto{{a("172.18.0.100"), "tcp", 80}},
		ClusterIPs: []netip.Addr{a("10.96.0.10"), a("fd00:96::10")}})
	d := r.Desired()
	gw := "antrea-gw0"
	require.Empty(t, cmp.Diff([]Route{
		{Dst: p("10.20.1.0/24"), Via: a("192.168.50.2")},
		{Dst: p("169.254.0.253/32"), Dev: gw},
		{Dst: p("169.254.0.252/32"), Via: a("169.254.0.253"), Dev: gw, OnLink: true},
		{Dst: p("10.96.0.10/32"), Via: a("169.254.0.253"), Dev: gw, OnLink: true}, // IPv6 is not routed
	}, d.Routes, cmp.Comparer(func(x, y netip.Addr) bool { return x == y }), cmp.Comparer(func(x, y netip.Prefix) bool { return x == y })))
	require.Equal(t, []Neighbor{{IP: a("169.254.0.253"), MAC: vMAC, Dev: gw}}, d.Neighbors)
	require.Equal(t, NFTConfig{Gateway: gw, PodCIDRs: []netip.Prefix{p("10.20.0.0/24")},
		NoMasquerade:       []netip.Prefix{p("10.20.0.0/16"), p("10.20.0.0/24"), p("10.20.1.0/24"), p("10.20.2.0/24")},
		SNATVirtualIPs:     svVIP[:1],
		NodePortVirtualIPs: npVIP[:1],
		NodePorts:          []NodePort{{a("192.168.50.1"), "tcp", 30080}, {a("192.168.50.11"), "tcp", 30080}},
		HostSources:        []netip.Addr{a("10.20.0.1")},
		ServicePorts:       []AddrPortProto{{a("172.18.0.100"), "tcp", 80}},
		MarkServicePorts:   true,
	}, d.NFT, "the proxier's addresses, without IPv6 (not routed)")

	// A family without a NodePort virtual IP gets no NodePort rules, even when routed.
	r.cfg.IPv6, r.cfg.NodePortVirtualIPs = true, npVIP[:1]
	require.Equal(t, []NodePort{{a("192.168.50.1"), "tcp", 30080}, {a("192.168.50.11"), "tcp", 30080}}, r.Desired().NFT.NodePorts)
	r.cfg.IPv6, r.cfg.NodePortVirtualIPs = false, npVIP

	// A deleted Node loses its route; without proxyAll nothing is sent into OVS.
	r.DeleteNode("n2")
	r.cfg.ProxyAll = false
	d = r.Desired()
	for _, rt := range d.Routes {
		require.NotEqual(t, p("10.20.1.0/24"), rt.Dst)
		require.NotEqual(t, p("172.18.0.100/32"), rt.Dst)
		require.NotEqual(t, p("10.96.0.10/32"), rt.Dst)
	}
	require.Empty(t, d.NFT.HostSources)
	require.Empty(t, d.NFT.NodePorts)
	require.Empty(t, d.NFT.NodePortVirtualIPs)
}

func TestReconcilerTriggersOnlyOnChange(t *testing.T) {
	r := NewReconciler(Config{LocalNode: "n1"}, nil)
	n := NodeInfo{Name: "n2", PodCIDRs: []netip.Prefix{p("10.20.1.0/24")}}
	r.SetNode(n)
	<-r.kick
	r.SetExposure(Exposure{}) // the first exposure makes it known: a change
	<-r.kick
	r.SetNode(n)
	r.SetExposure(Exposure{})
	r.DeleteNode("absent")
	select {
	case <-r.kick:
		t.Fatal("an unchanged input triggered a sync")
	default:
	}
	r.DeleteNode("n2")
	select {
	case <-r.kick:
	default:
		t.Fatal("deleting a Node did not trigger a sync")
	}
}

// TestReconcilerWaitsForFirstExposure: before the proxier's first sync is known, Sync changes
// nothing (a restarted agent must not wipe the rules live traffic depends on).
func TestReconcilerWaitsForFirstExposure(t *testing.T) {
	r := NewReconciler(Config{LocalNode: "n1"}, nil)
	r.SetNode(NodeInfo{Name: "n2", PodCIDRs: []netip.Prefix{p("10.20.1.0/24")}})
	// cfg.Host and nft are nil: a Sync that touched them would panic.
	require.NoError(t, r.Sync(context.Background()))
}
