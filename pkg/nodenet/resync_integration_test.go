package nodenet

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/ovsdb"
	"github.com/antrea-proxy/antrea-proxy/test/ovssandbox"
)

// tapPorts stands in for OVS: EnsurePort creates the gateway interface (a veth) when it is
// missing, as ovs-vswitchd creates the tap of an internal port.
type tapPorts struct {
	t  *testing.T
	ns *ovssandbox.NetNS
}

func (p tapPorts) EnsurePort(_ context.Context, _ string, cfg ovsdb.PortConfig) (int32, error) {
	if out, err := p.ns.Exec("ip", "link", "show", cfg.Name); err == nil && strings.Contains(out, cfg.Name) {
		return 3, nil
	}
	mustExec(p.t, p.ns, []string{"ip", "link", "add", cfg.Name, "type", "veth", "peer", "name", cfg.Name + "p"},
		[]string{"ip", "link", "set", cfg.Name + "p", "up"})
	return 3, nil
}

// recreateGateway deletes the gateway and creates a bare one, as a restarted ovs-vswitchd does.
func recreateGateway(t *testing.T, ns *ovssandbox.NetNS, ports tapPorts) {
	mustExec(t, ns, []string{"ip", "link", "del", "gw0"})
	_, err := ports.EnsurePort(context.Background(), "br-int", ovsdb.PortConfig{Name: "gw0"})
	require.NoError(t, err)
}

func execOut(t *testing.T, ns *ovssandbox.NetNS, args ...string) string {
	t.Helper()
	out, err := ns.Exec(args...)
	require.NoError(t, err, "%v: %s", args, out)
	return out
}

func TestRestoreGatewayAndResyncAfterRecreation(t *testing.T) {
	ns := ovssandbox.NewNetNS(t, "gwrs")
	h := Host{NetNS: "/var/run/netns/" + ns.Name}
	ports := tapPorts{t: t, ns: ns}
	ctx := context.Background()
	mac := net.HardwareAddr{0x02, 0x11, 0x22, 0x33, 0x44, 0x55}
	cfg := GatewayConfig{Name: "gw0", Bridge: "br-int", MAC: mac, MTU: 1400, DisableTXChecksumOffload: true}
	addrs := []netip.Prefix{p("10.20.0.1/24")}

	nft, err := NewNFT(h, "apx-resync-test")
	require.NoError(t, err)
	r := NewReconciler(Config{Host: h, LocalNode: "n1", Gateway: "gw0", IPv4: true, ProxyAll: true,
		ClusterCIDRs: []netip.Prefix{p("10.20.0.0/16")}, NodePortVirtualIPs: npVIP[:1], ServiceVirtualIPs: svVIP[:1], VirtualMAC: vMAC}, nft)
	r.SetNode(NodeInfo{Name: "n1", PodCIDRs: []netip.Prefix{p("10.20.0.0/24")}})
	r.SetExposure(Exposure{Ports: []AddrPortProto{{a("172.18.0.100"), "tcp", 80}}, ClusterIPs: []netip.Addr{a("10.96.0.10")}})

	check := func(when string) {
		t.Helper()
		link := execOut(t, ns, "ip", "link", "show", "gw0")
		require.Contains(t, link, "link/ether "+mac.String(), when)
		require.Contains(t, link, "mtu 1400", when)
		require.Contains(t, link, "state UP", when)
		require.Contains(t, execOut(t, ns, "ip", "-4", "addr", "show", "dev", "gw0"), "10.20.0.1/24", when)
		require.Contains(t, execOut(t, ns, "ethtool", "-k", "gw0"), "tx-checksumming: off", when)
		routes := execOut(t, ns, "ip", "route", "show", "proto", "0x61")
		require.NotContains(t, routes, "172.18.0.100", when)
		require.Contains(t, execOut(t, ns, "ip", "route", "show", "table", "9700"), "default via 169.254.0.253 dev gw0 proto 97 onlink", when)
		require.Contains(t, execOut(t, ns, "ip", "rule", "show"), "9700:	from all fwmark 0x1000/0x1000 lookup 9700 proto 97", when)
		require.Contains(t, routes, "10.96.0.10 via 169.254.0.253 dev gw0", when)
		require.Contains(t, routes, "169.254.0.253 dev gw0", when)
		require.Contains(t, execOut(t, ns, "ip", "neigh", "show", "dev", "gw0"), "169.254.0.253 lladdr "+vMAC.String()+" PERMANENT", when)
		table := execOut(t, ns, "nft", "list", "table", "inet", "apx-resync-test")
		require.Contains(t, table, "masquerade", when)
		require.Contains(t, table, "172.18.0.100 . tcp . 80", when)
		// The kernel accepted the SNAT of the node's own connections into OVS.
		require.Contains(t, table, `oifname "gw0" ip daddr != 10.20.0.0/24 fib saddr type local ip saddr != 10.20.0.1 snat ip to 10.20.0.1`, when)
	}

	_, err = h.RestoreGateway(ctx, ports, cfg, addrs)
	require.NoError(t, err)
	require.NoError(t, r.Sync(ctx))
	check("after the first set-up")

	// vswitchd restarts: the tap is new, with nothing of the old one; someone also flushed the
	// table, which a plain Sync (same content as last time) does not notice.
	recreateGateway(t, ns, ports)
	mustExec(t, ns, []string{"nft", "delete", "table", "inet", "apx-resync-test"})
	require.NotContains(t, execOut(t, ns, "ip", "route", "show", "proto", "0x61"), "gw0")

	gw, err := h.RestoreGateway(ctx, ports, cfg, addrs)
	require.NoError(t, err)
	require.Equal(t, uint32(3), gw.OFPort)
	require.NoError(t, r.Sync(ctx))
	_, err = ns.Exec("nft", "list", "table", "inet", "apx-resync-test")
	require.Error(t, err, "a plain Sync trusts its memory of the table")
	require.NoError(t, r.Resync(ctx))
	check("after RestoreGateway and Resync")

	// Resync is idempotent.
	require.NoError(t, r.Resync(ctx))
	check("after a second Resync")
}

func TestResyncFailureKicksRun(t *testing.T) {
	ns := ovssandbox.NewNetNS(t, "gwrf")
	h := Host{NetNS: "/var/run/netns/" + ns.Name}
	nft, err := NewNFT(h, "apx-resync-fail")
	require.NoError(t, err)
	r := NewReconciler(Config{Host: h, LocalNode: "n1", Gateway: "gw0", IPv4: true, ServiceVirtualIPs: svVIP[:1], VirtualMAC: vMAC}, nft)
	r.SetExposure(Exposure{})
	<-r.kick
	require.Error(t, r.Resync(context.Background()), "no gateway interface")
	select {
	case <-r.kick:
	default:
		t.Fatal("a failed Resync did not ask Run to retry")
	}
}
