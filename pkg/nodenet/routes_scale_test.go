package nodenet

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/antrea-proxy/antrea-proxy/test/ovssandbox"
)

// clusterIPRoutes returns n ClusterIP routes into OVS (10.96.0.0/16 upwards) through dev.
func clusterIPRoutes(n int, dev string) []Route {
	routes := []Route{{Dst: p("169.254.0.253/32"), Dev: dev}}
	ip := a("10.96.0.1")
	for i := 0; i < n; i++ {
		routes = append(routes, Route{Dst: netip.PrefixFrom(ip, 32), Via: a("169.254.0.253"), Dev: dev, OnLink: true})
		ip = ip.Next()
	}
	return routes
}

func scaleNetNS(tb testing.TB) Host {
	ns := ovssandbox.NewNetNS(tb, "rtscale") // skips with -short, like every real-namespace test
	for _, c := range [][]string{{"ip", "link", "add", "gw0", "type", "veth", "peer", "name", "gw0p"}, {"ip", "link", "set", "gw0p", "up"}, {"ip", "link", "set", "gw0", "up"}} {
		if out, err := ns.Exec(c...); err != nil {
			tb.Fatalf("%v: %v: %s", c, err, out)
		}
	}
	return Host{NetNS: "/var/run/netns/" + ns.Name}
}

// TestSyncRoutesClusterIPScale: 10,000 ClusterIP routes are installed, an unchanged sync
// writes nothing, and one change of 10,000 replaces one route and deletes one, leaving
// exactly the wanted set (checked against the kernel's table).
func TestSyncRoutesClusterIPScale(t *testing.T) {
	h := scaleNetNS(t)
	want := clusterIPRoutes(10000, "gw0")
	require.NoError(t, h.SyncRoutes(want))
	require.NoError(t, h.SyncRoutes(want))
	want[5000].Dst = p("10.97.0.1/32")
	require.NoError(t, h.SyncRoutes(want))
	have, err := h.routeKeys()
	require.NoError(t, err)
	require.Len(t, have, len(want))
	for _, r := range want {
		require.True(t, have[r.Dst], "route %s is in the table", r)
	}
}

// BenchmarkSyncRoutes10k measures installing 10,000 ClusterIP routes into an empty table
// (install) and a sync over them that changes nothing (unchanged).
func BenchmarkSyncRoutes10k(b *testing.B) {
	want := clusterIPRoutes(10000, "gw0")
	b.Run("install", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			h := scaleNetNS(b)
			b.StartTimer()
			if err := h.SyncRoutes(want); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("unchanged", func(b *testing.B) {
		h := scaleNetNS(b)
		if err := h.SyncRoutes(want); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if err := h.SyncRoutes(want); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// routeKeys lists the destinations of the agent's routes (RouteProtocol) in the main table.
func (h Host) routeKeys() (map[netip.Prefix]bool, error) {
	nl, err := h.handle()
	if err != nil {
		return nil, err
	}
	defer nl.Close()
	have, err := nl.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Protocol: RouteProtocol, Table: unix.RT_TABLE_MAIN},
		netlink.RT_FILTER_PROTOCOL|netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, err
	}
	out := map[netip.Prefix]bool{}
	for i := range have {
		if p, ok := prefixOf(have[i].Dst); ok {
			out[p] = true
		}
	}
	return out, nil
}

// TestSyncRoutesBatchReportsEachFailure: a route the kernel rejects (a next hop that is not
// on-link, without onlink), in the middle and at the end of a batch, fails alone and by name;
// the routes around it are installed, and a later sync without it succeeds.
func TestSyncRoutesBatchReportsEachFailure(t *testing.T) {
	h := scaleNetNS(t)
	want := clusterIPRoutes(2*routeBatchSize, "gw0")
	bad := func(dst string) Route { return Route{Dst: p(dst), Via: a("192.0.2.1"), Dev: "gw0"} }
	want[routeBatchSize/2] = bad("10.98.0.1/32")
	want = append(want, bad("10.98.0.2/32"))
	err := h.SyncRoutes(want)
	require.Error(t, err)
	require.Contains(t, err.Error(), "10.98.0.1/32")
	require.Contains(t, err.Error(), "10.98.0.2/32")
	require.Equal(t, 2, strings.Count(err.Error(), "adding host route"), "only the two bad routes fail: %v", err)
	have, err := h.routeKeys()
	require.NoError(t, err)
	require.Len(t, have, len(want)-2)

	good := slices.DeleteFunc(slices.Clone(want), func(r Route) bool { return r.Via == a("192.0.2.1") })
	require.NoError(t, h.SyncRoutes(good))
	require.NoError(t, h.SyncRoutes(good[:10]), "deleting most of them in batches")
	have, err = h.routeKeys()
	require.NoError(t, err)
	require.Len(t, have, 10)
}

// scaleReconciler is a Reconciler over a real namespace whose exposure has n ClusterIPs.
func scaleReconciler(tb testing.TB, n int) (*Reconciler, Exposure) {
	h := scaleNetNS(tb)
	nft, err := NewNFT(h, "apx-scale")
	if err != nil {
		tb.Fatal(err)
	}
	r := NewReconciler(Config{Host: h, LocalNode: "n1", Gateway: "gw0", IPv4: true, ProxyAll: true,
		ServiceVirtualIPs: svVIP[:1], VirtualMAC: vMAC}, nft)
	r.SetNode(NodeInfo{Name: "n1", PodCIDRs: []netip.Prefix{p("10.20.0.0/24")}})
	var e Exposure
	for _, rt := range clusterIPRoutes(n, "gw0")[1:] {
		e.ClusterIPs = append(e.ClusterIPs, rt.Dst.Addr())
	}
	r.SetExposure(e)
	return r, e
}

// TestReconcilerRoutesByDifference: after a first sync of 10,000 ClusterIP routes, a changed
// exposure is applied by difference (a route deleted behind the agent's back stays deleted:
// the table was not listed), and the periodic full sync repairs it.
func TestReconcilerRoutesByDifference(t *testing.T) {
	r, e := scaleReconciler(t, 10000)
	ctx := t.Context()
	require.NoError(t, r.Sync(ctx))
	have, err := r.cfg.Host.routeKeys()
	require.NoError(t, err)
	require.Len(t, have, 10001, "the ClusterIPs and the Service virtual IP")

	ns := ovssandbox.NetNS{Name: strings.TrimPrefix(r.cfg.Host.NetNS, "/var/run/netns/")}
	out, err := ns.Exec("ip", "route", "del", "10.96.0.1/32")
	require.NoError(t, err, out)
	e.ClusterIPs = append(slices.Clone(e.ClusterIPs[1000:]), a("10.97.0.1"))
	r.SetExposure(e)
	require.NoError(t, r.Sync(ctx))
	have, err = r.cfg.Host.routeKeys()
	require.NoError(t, err)
	require.True(t, have[p("10.97.0.1/32")], "the new ClusterIP is routed")
	require.False(t, have[p("10.96.0.2/32")], "a removed ClusterIP is not")
	require.Len(t, have, 9002)

	e.ClusterIPs = append(e.ClusterIPs, a("10.96.0.1"))
	r.SetExposure(e)
	require.NoError(t, r.Sync(ctx))
	have, err = r.cfg.Host.routeKeys()
	require.NoError(t, err)
	require.True(t, have[p("10.96.0.1/32")], "re-added")
	out, err = ns.Exec("ip", "route", "del", "10.96.0.1/32")
	require.NoError(t, err, out)
	require.NoError(t, r.Sync(ctx))
	have, err = r.cfg.Host.routeKeys()
	require.NoError(t, err)
	require.False(t, have[p("10.96.0.1/32")], "a plain Sync trusts what it installed")
	require.NoError(t, r.fullSync(ctx))
	have, err = r.cfg.Host.routeKeys()
	require.NoError(t, err)
	require.True(t, have[p("10.96.0.1/32")], "the full sync repairs the table")
}

// BenchmarkReconcilerOneClusterIPChange10k measures a sync after one of 10,000 ClusterIPs
// changed: what the agent does when a Service is created or deleted.
func BenchmarkReconcilerOneClusterIPChange10k(b *testing.B) {
	r, e := scaleReconciler(b, 10000)
	if err := r.Sync(b.Context()); err != nil {
		b.Fatal(err)
	}
	alt := []netip.Addr{a("10.97.0.1"), a("10.97.0.2")}
	i := 0
	for b.Loop() {
		e.ClusterIPs[0] = alt[i%2]
		i++
		r.SetExposure(e)
		if err := r.Sync(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
}

// TestReconcilerServiceCIDRRouteCount: at 30,000 ClusterIPs the node holds a route per
// ClusterIP while the ServiceCIDRs are not known, and one route for their ServiceCIDR once they
// are (a ClusterIP outside it keeps its own); the change is applied by difference.
func TestReconcilerServiceCIDRRouteCount(t *testing.T) {
	const n = 30000
	r, e := scaleReconciler(t, n)
	ctx := t.Context()
	start := time.Now()
	require.NoError(t, r.Sync(ctx))
	have, err := r.cfg.Host.routeKeys()
	require.NoError(t, err)
	require.Len(t, have, n+1, "a route per ClusterIP and the Service virtual IP's")
	t.Logf("without ServiceCIDRs: %d routes (first sync %v)", len(have), time.Since(start))

	e.ServiceCIDRs = []netip.Prefix{p("10.96.0.0/16")}
	e.ClusterIPs = append(e.ClusterIPs, a("10.97.0.1"))
	r.SetExposure(e)
	start = time.Now()
	require.NoError(t, r.Sync(ctx))
	have, err = r.cfg.Host.routeKeys()
	require.NoError(t, err)
	t.Logf("with one ServiceCIDR: %d routes (sync %v)", len(have), time.Since(start))
	require.Equal(t, map[netip.Prefix]bool{p("169.254.0.253/32"): true, p("10.96.0.0/16"): true, p("10.97.0.1/32"): true}, have)
}
