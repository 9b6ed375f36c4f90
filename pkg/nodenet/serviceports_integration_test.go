package nodenet

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/netutil"
	"github.com/antrea-proxy/antrea-proxy/test/ovssandbox"
)

// capture is the world of TestServicePortCaptureIntegration, per family: a node namespace with
// its uplink to a peer (holding peerAddr, the address a Service claims one port of), a second
// link to an external client, and its gateway to a stand-in for OVS, which answers every
// connection routed into the gateway to a claimed port and whose own address plays a local pod.
type capture struct {
	node, peer, client, ovs *ovssandbox.NetNS
	host                    Host
	// Per family (IPv4 first): the peer's address, an LB IP that lives nowhere but in OVS, and
	// the stand-in pod's address.
	peerAddr, lbIP, podAddr [2]netip.Addr
}

func nsPath(ns *ovssandbox.NetNS) string { return "/var/run/netns/" + ns.Name }

// newCapture builds the namespaces. The node does strict reverse-path filtering everywhere
// (all and default rp_filter=1, before its interfaces exist), as many distributions do.
func newCapture(t *testing.T) *capture {
	c := &capture{node: ovssandbox.NewNetNS(t, "spnode"), peer: ovssandbox.NewNetNS(t, "sppeer"),
		client: ovssandbox.NewNetNS(t, "spcli"), ovs: ovssandbox.NewNetNS(t, "spovs"),
		peerAddr: [2]netip.Addr{a("10.77.0.2"), a("fd77::2")}, lbIP: [2]netip.Addr{a("10.79.0.100"), a("fd79::100")},
		podAddr: [2]netip.Addr{a("10.20.0.5"), a("fd20::5")}}
	c.host = Host{NetNS: nsPath(c.node)}
	mustExec(t, c.node, []string{"sysctl", "-qw", "net.ipv4.conf.all.rp_filter=1"}, []string{"sysctl", "-qw", "net.ipv4.conf.default.rp_filter=1"})
	link := func(other *ovssandbox.NetNS, nodeIf, otherIf string) {
		mustExec(t, c.node, []string{"ip", "link", "add", nodeIf, "type", "veth", "peer", "name", otherIf, "netns", other.Name},
			[]string{"ip", "link", "set", nodeIf, "up"})
		mustExec(t, other, []string{"ip", "link", "set", otherIf, "up"})
	}
	addrs := func(ns *ovssandbox.NetNS, dev string, prefixes ...string) {
		for _, p := range prefixes {
			mustExec(t, ns, []string{"ip", "addr", "add", p, "dev", dev, "nodad"})
		}
	}
	link(c.peer, "eth0", "eth0")
	link(c.client, "eth1", "eth0")
	link(c.ovs, "gw0", "gw0p")
	addrs(c.node, "eth0", "10.77.0.1/24", "fd77::1/64")
	addrs(c.node, "eth1", "10.78.0.1/24", "fd78::1/64")
	addrs(c.node, "gw0", "10.20.0.1/24", "fd20::1/64")
	addrs(c.peer, "eth0", "10.77.0.2/24", "fd77::2/64")
	addrs(c.client, "eth0", "10.78.0.2/24", "fd78::2/64")
	// The stand-in OVS receives what the node sends to the virtual next hop's MAC.
	mustExec(t, c.ovs, []string{"ip", "link", "set", "gw0p", "address", vMAC.String()})
	addrs(c.ovs, "gw0p", "10.20.0.5/24", "fd20::5/64")
	// The node's default route leads to the peer (its LAN's router); everyone else's to the node.
	mustExec(t, c.node, []string{"ip", "route", "add", "default", "via", "10.77.0.2"}, []string{"ip", "-6", "route", "add", "default", "via", "fd77::2"})
	for _, ns := range []struct {
		ns     *ovssandbox.NetNS
		v4, v6 string
	}{{c.peer, "10.77.0.1", "fd77::1"}, {c.client, "10.78.0.1", "fd78::1"}, {c.ovs, "10.20.0.1", "fd20::1"}} {
		mustExec(t, ns.ns, []string{"ip", "route", "add", "default", "via", ns.v4}, []string{"ip", "-6", "route", "add", "default", "via", ns.v6})
	}
	mustExec(t, c.peer, []string{"sysctl", "-qw", "net.ipv4.ip_forward=1"})
	// OVS serves the claimed ports: whatever reaches it on 9999 or 80 is answered by "ovs".
	mustExec(t, c.ovs, []string{"nft", "add table inet ovs; add chain inet ovs pre { type nat hook prerouting priority dstnat; }; " +
		"add rule inet ovs pre iifname gw0p tcp dport { 80, 9999 } redirect"})
	serve(t, c.peer, "peer", 7777, 9999)
	serve(t, c.ovs, "ovs", 80, 9999)
	return c
}

// serve answers every TCP connection to ports, both families, in ns with name.
func serve(t *testing.T, ns *ovssandbox.NetNS, name string, ports ...int) {
	for _, port := range ports {
		var ln net.Listener
		require.NoError(t, netutil.InNetNS(nsPath(ns), func() error {
			var err error
			ln, err = net.Listen("tcp", ":"+strconv.Itoa(port))
			return err
		}))
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				_, _ = conn.Write([]byte(name))
				conn.Close()
			}
		}()
	}
}

// answer connects from ns to addr:port and returns who answered, or the error.
func answer(ns *ovssandbox.NetNS, addr netip.Addr, port int) string {
	var got string
	err := netutil.InNetNS(nsPath(ns), func() error {
		conn, err := net.DialTimeout("tcp", netip.AddrPortFrom(addr, uint16(port)).String(), time.Second)
		if err != nil {
			return err
		}
		defer conn.Close()
		if err := conn.SetReadDeadline(time.Now().Add(time.Second)); err != nil {
			return err
		}
		b, err := io.ReadAll(conn)
		got = string(b)
		return err
	})
	if err != nil {
		var nerr net.Error
		if errors.As(err, &nerr) && nerr.Timeout() {
			return "timeout"
		}
		return "error: " + err.Error()
	}
	return got
}

// requireAnswer polls until a connection from ns to addr:port is answered by want (a first
// connection may wait for neighbour resolution), failing with the last answer at the deadline.
func requireAnswer(t *testing.T, ns *ovssandbox.NetNS, addr netip.Addr, port int, want, why string) {
	t.Helper()
	deadline := time.Now().Add(8 * time.Second)
	got := ""
	for time.Now().Before(deadline) {
		if got = answer(ns, addr, port); got == want {
			return
		}
	}
	t.Fatalf("%s: %s:%d from %s answered %q, want %q", why, addr, port, ns.Name, got, want)
}

// TestServicePortCaptureIntegration: a Service claiming one port of an address (an ExternalIP
// naming another machine's address) takes only that port into OVS; every other port of the
// address is routed as if no Service existed, for the node itself, for a local pod, and for an
// external client, in both families. The LB IP and the claimed port answer external clients
// through the gateway (their replies pass the node's strict reverse-path filter), and with the
// claim gone the port reaches the peer again.
func TestServicePortCaptureIntegration(t *testing.T) {
	c := newCapture(t)
	ctx := context.Background()
	nft, err := NewNFT(c.host, "apx-svcports")
	require.NoError(t, err)
	r := NewReconciler(Config{Host: c.host, LocalNode: "n1", Gateway: "gw0", IPv4: true, IPv6: true, ProxyAll: true,
		ClusterCIDRs: []netip.Prefix{p("10.20.0.0/16"), p("fd20::/48")}, NodePortVirtualIPs: npVIP, ServiceVirtualIPs: svVIP, VirtualMAC: vMAC}, nft)
	r.SetNode(NodeInfo{Name: "n1", PodCIDRs: []netip.Prefix{p("10.20.0.0/24"), p("fd20::/64")}})
	require.NoError(t, c.host.EnableForwarding(true))
	r.SetExposure(claimPorts(c.peerAddr[0], c.lbIP[0], c.peerAddr[1], c.lbIP[1]))
	require.NoError(t, r.Sync(ctx))

	for i, fam := range []string{"IPv4", "IPv6"} {
		peer, lb := c.peerAddr[i], c.lbIP[i]
		requireAnswer(t, c.node, peer, 7777, "peer", fam+": the node reaches an unclaimed port of the address")
		requireAnswer(t, c.ovs, peer, 7777, "peer", fam+": a local pod reaches an unclaimed port of the address")
		requireAnswer(t, c.client, peer, 7777, "peer", fam+": an external client reaches an unclaimed port of the address")
		requireAnswer(t, c.node, peer, 9999, "ovs", fam+": the node's connection to the claimed port goes into OVS")
		requireAnswer(t, c.client, peer, 9999, "ovs", fam+": an external client's connection to the claimed port goes into OVS and is answered")
		requireAnswer(t, c.node, lb, 80, "ovs", fam+": the node reaches the LB IP in OVS")
		requireAnswer(t, c.client, lb, 80, "ovs", fam+": an external client reaches the LB IP in OVS and is answered")
	}

	r.SetExposure(Exposure{})
	require.NoError(t, r.Sync(ctx))
	for i, fam := range []string{"IPv4", "IPv6"} {
		requireAnswer(t, c.node, c.peerAddr[i], 9999, "peer", fam+": without the claim, the port reaches the peer again")
		requireAnswer(t, c.client, c.peerAddr[i], 9999, "peer", fam+": without the claim, the client reaches the peer again")
	}
}

// claimPorts is the exposure of a Service with ExternalIP ext:9999/TCP and LB IP lb:80/TCP,
// per family.
func claimPorts(ext4, lb4, ext6, lb6 netip.Addr) Exposure {
	return Exposure{Ports: []AddrPortProto{{ext4, "tcp", 9999}, {lb4, "tcp", 80}, {ext6, "tcp", 9999}, {lb6, "tcp", 80}}}
}

// TestServicePortRoutingRepairAndCleanup: the policy rules and the route table of marked
// Service ports are repaired by the periodic full sync after being deleted by hand (a rule of
// the table that is not the agent's own is removed; rules of other tables are never touched),
// and Cleanup removes them with the nftables table and the agent's main-table routes.
func TestServicePortRoutingRepairAndCleanup(t *testing.T) {
	h := scaleNetNS(t)
	ns := &ovssandbox.NetNS{Name: strings.TrimPrefix(h.NetNS, "/var/run/netns/")}
	ctx := context.Background()
	nft, err := NewNFT(h, "apx-svcports-repair")
	require.NoError(t, err)
	r := NewReconciler(Config{Host: h, LocalNode: "n1", Gateway: "gw0", IPv4: true, IPv6: true, ProxyAll: true,
		NodePortVirtualIPs: npVIP, ServiceVirtualIPs: svVIP, VirtualMAC: vMAC}, nft)
	r.SetNode(NodeInfo{Name: "n1", PodCIDRs: []netip.Prefix{p("10.20.0.0/24"), p("fd20::/64")}})
	r.SetExposure(Exposure{Ports: []AddrPortProto{{a("192.168.77.12"), "tcp", 9999}}, ClusterIPs: []netip.Addr{a("10.96.0.10")}})
	mustExec(t, ns, []string{"ip", "rule", "add", "pref", "100", "fwmark", "0x4000/0x4000", "lookup", "100"})

	rule := "9700:\tfrom all fwmark 0x1000/0x1000 lookup 9700 proto 97"
	programmed := func(when string) {
		t.Helper()
		require.Contains(t, execOut(t, ns, "ip", "-4", "rule", "show"), rule, when)
		require.Contains(t, execOut(t, ns, "ip", "-6", "rule", "show"), rule, when)
		require.Equal(t, 1, strings.Count(execOut(t, ns, "ip", "-4", "rule", "show"), "lookup 9700"), when)
		require.Equal(t, "default via 169.254.0.253 dev gw0 proto 97 onlink", strings.TrimSpace(execOut(t, ns, "ip", "-4", "route", "show", "table", "9700")), when)
		require.Contains(t, execOut(t, ns, "ip", "-6", "route", "show", "table", "9700"), "default via fc01::aabb:ccdd:eeff dev gw0 proto 97", when)
		require.Contains(t, execOut(t, ns, "nft", "list", "table", "inet", "apx-svcports-repair"), "192.168.77.12 . tcp . 9999", when)
		require.Contains(t, execOut(t, ns, "ip", "-4", "rule", "show"), "100:\tfrom all fwmark 0x4000/0x4000 lookup 100", when)
	}
	require.NoError(t, r.Sync(ctx))
	programmed("after the first sync")
	require.NoError(t, r.Sync(ctx))
	programmed("after a second sync")

	mustExec(t, ns, []string{"ip", "-4", "rule", "del", "pref", "9700"}, []string{"ip", "-6", "rule", "del", "pref", "9700"},
		[]string{"ip", "-4", "route", "flush", "table", "9700"}, []string{"ip", "-6", "route", "flush", "table", "9700"},
		[]string{"ip", "-4", "rule", "add", "pref", "9701", "fwmark", "0x2000", "lookup", "9700"})
	require.NotContains(t, execOut(t, ns, "ip", "-6", "rule", "show"), "lookup 9700")
	require.NoError(t, r.fullSync(ctx))
	programmed("after the periodic full sync")

	require.NoError(t, r.Cleanup(ctx))
	for _, fam := range []string{"-4", "-6"} {
		require.NotContains(t, execOut(t, ns, "ip", fam, "rule", "show"), "lookup 9700", "after Cleanup")
		require.Empty(t, strings.TrimSpace(execOut(t, ns, "ip", fam, "route", "show", "table", "9700")), "after Cleanup")
		require.Empty(t, strings.TrimSpace(execOut(t, ns, "ip", fam, "route", "show", "proto", "97")), "after Cleanup")
	}
	_, err = ns.Exec("nft", "list", "table", "inet", "apx-svcports-repair")
	require.Error(t, err, "the nftables table is gone")
	require.Contains(t, execOut(t, ns, "ip", "-4", "rule", "show"), "100:\tfrom all fwmark 0x4000/0x4000 lookup 100", "another table's rule stays")

	require.NoError(t, r.Resync(ctx))
	programmed("after a Resync following Cleanup")
}
