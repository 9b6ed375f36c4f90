package nodenet

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/antrea-proxy/antrea-proxy/test/ovssandbox"
)

// announceLAN is a bridge in its own namespace with members attached by veth as eth0.
type announceLAN struct {
	t  *testing.T
	sw *ovssandbox.NetNS
	n  int
}

func mustExec(t *testing.T, ns *ovssandbox.NetNS, cmds ...[]string) {
	t.Helper()
	for _, c := range cmds {
		out, err := ns.Exec(c...)
		require.NoError(t, err, "%v in %s: %s", c, ns.Name, out)
	}
}

func newAnnounceLAN(t *testing.T) *announceLAN {
	sw := ovssandbox.NewNetNS(t, "answ")
	mustExec(t, sw, []string{"ip", "link", "add", "br0", "type", "bridge"}, []string{"ip", "link", "set", "br0", "up"})
	return &announceLAN{t: t, sw: sw}
}

// member creates a namespace on the LAN with addr/24 on eth0.
func (l *announceLAN) member(prefix, addr string) (*ovssandbox.NetNS, Host) {
	t := l.t
	ns := ovssandbox.NewNetNS(t, prefix)
	l.n++
	port := "p" + ns.Name[len(ns.Name)-6:]
	mustExec(t, l.sw,
		[]string{"ip", "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns.Name},
		[]string{"ip", "link", "set", port, "master", "br0"},
		[]string{"ip", "link", "set", port, "up"})
	mustExec(t, ns, []string{"ip", "addr", "add", addr + "/24", "dev", "eth0"}, []string{"ip", "link", "set", "eth0", "up"})
	return ns, Host{NetNS: "/var/run/netns/" + ns.Name}
}

// node makes a member route vip into a dummy "gw0" (as nodenet routes LoadBalancer IPs into
// the gateway) with forwarding on, as the agent's node data path does.
func (l *announceLAN) node(prefix, addr string, vip netip.Addr) (*ovssandbox.NetNS, Host) {
	ns, h := l.member(prefix, addr)
	mustExec(l.t, ns, []string{"ip", "link", "add", "gw0", "type", "veth", "peer", "name", "gw0p"}, []string{"ip", "link", "set", "gw0", "up"}, []string{"ip", "link", "set", "gw0p", "up"},
		[]string{"ip", "route", "add", vip.String() + "/32", "dev", "gw0"})
	require.NoError(l.t, h.EnableForwarding(false))
	return ns, h
}

// neigh returns h's neighbour entry for ip on eth0, if it has one.
func neigh(t *testing.T, h Host, ip netip.Addr) (netlink.Neigh, bool) {
	nl, err := h.handle()
	require.NoError(t, err)
	defer nl.Close()
	l, err := nl.LinkByName("eth0")
	require.NoError(t, err)
	neighs, err := nl.NeighList(l.Attrs().Index, netlink.FAMILY_V4)
	require.NoError(t, err)
	for _, n := range neighs {
		if n.IP.Equal(net.IP(ip.AsSlice())) {
			return n, true
		}
	}
	return netlink.Neigh{}, false
}

// neighMAC returns the MAC h resolved ip to on eth0, "" while unresolved.
func neighMAC(t *testing.T, h Host, ip netip.Addr) string {
	n, ok := neigh(t, h, ip)
	if ok && n.State&(netlink.NUD_REACHABLE|netlink.NUD_STALE|netlink.NUD_DELAY|netlink.NUD_PROBE|netlink.NUD_PERMANENT) != 0 {
		return n.HardwareAddr.String()
	}
	return ""
}

// neighFailed reports whether h's neighbour entry for ip on eth0 is FAILED: the kernel sent
// its solicitations and nobody answered.
func neighFailed(t *testing.T, h Host, ip netip.Addr) bool {
	n, ok := neigh(t, h, ip)
	return ok && n.State&netlink.NUD_FAILED != 0
}

// requireUnanswered makes h resolve ip and waits until the kernel gave up (the entry is FAILED
// after its solicitations; the client's retransmit time is 100 ms): nobody answered for ip.
func requireUnanswered(t *testing.T, ns *ovssandbox.NetNS, h Host, ip netip.Addr) {
	t.Helper()
	mustExec(t, ns, []string{"sysctl", "-qw", "net.ipv4.neigh.eth0.retrans_time_ms=100"}, []string{"ip", "neigh", "flush", "dev", "eth0"})
	poke(t, h, ip)
	require.Eventually(t, func() bool { return neighFailed(t, h, ip) }, 5*time.Second, 50*time.Millisecond,
		"the client's resolution of %s to fail", ip)
	require.Empty(t, neighMAC(t, h, ip))
}

func eth0MAC(t *testing.T, h Host) string {
	_, mac, err := h.linkMAC("eth0")
	require.NoError(t, err)
	return mac.String()
}

// poke sends one UDP datagram from h to ip:9, which makes h resolve ip.
func poke(t *testing.T, h Host, ip netip.Addr) {
	require.NoError(t, h.do(func() error {
		c, err := net.Dial("udp", net.JoinHostPort(ip.String(), "9"))
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte("who has it"))
		return err
	}))
}

func TestAnnounceIntegration(t *testing.T) {
	vip := netip.MustParseAddr("10.99.1.5")
	lan := newAnnounceLAN(t)
	_, hostA := lan.node("ana", "10.99.0.1", vip)
	_, hostB := lan.node("anb", "10.99.0.2", vip)
	client, hostC := lan.member("anc", "10.99.0.3")
	mustExec(t, client, []string{"ip", "route", "add", "10.99.1.0/24", "dev", "eth0"})

	uplink, err := hostA.UplinkOf(netip.MustParseAddr("10.99.0.1"))
	require.NoError(t, err)
	require.Equal(t, "eth0", uplink)
	_, err = hostA.UplinkOf(netip.MustParseAddr("10.99.0.2"))
	require.ErrorContains(t, err, "no interface holds 10.99.0.2")

	annA := NewAnnouncer(HostAnnounceOps{Host: hostA}, 1)
	annB := NewAnnouncer(HostAnnounceOps{Host: hostB}, 1)
	t.Cleanup(func() { _ = annA.Withdraw(); _ = annB.Withdraw() })

	// Nobody announces yet: the client cannot resolve the address.
	requireUnanswered(t, client, hostC, vip)

	// A announces: ARP resolves to A.
	require.NoError(t, annA.Sync("eth0", []netip.Addr{vip}))
	macA, macB := eth0MAC(t, hostA), eth0MAC(t, hostB)
	mustExec(t, client, []string{"ip", "neigh", "flush", "dev", "eth0"})
	require.Eventually(t, func() bool {
		poke(t, hostC, vip)
		return neighMAC(t, hostC, vip) == macA
	}, 5*time.Second, 100*time.Millisecond, "client resolves %s to A (%s)", vip, macA)

	// The address moves to B: the client updates its entry from B's gratuitous ARP alone.
	require.NoError(t, annA.Sync("eth0", nil))
	require.NoError(t, annB.Sync("eth0", []netip.Addr{vip}))
	require.Eventually(t, func() bool { return neighMAC(t, hostC, vip) == macB },
		3*time.Second, 50*time.Millisecond, "client learns %s moved to B (%s) from the gratuitous ARP", vip, macB)

	// A no longer answers: a fresh resolution still finds B only.
	mustExec(t, client, []string{"ip", "neigh", "flush", "dev", "eth0"})
	require.Eventually(t, func() bool {
		poke(t, hostC, vip)
		return neighMAC(t, hostC, vip) == macB
	}, 5*time.Second, 100*time.Millisecond)

	// Withdrawn everywhere: nothing answers.
	require.NoError(t, annB.Withdraw())
	requireUnanswered(t, client, hostC, vip)
}

// TestAnnounceRestoresProxyDelay checks that the announcer sets the uplink's proxy_delay to 0
// while it announces and puts the previous value back when it stops or leaves the uplink.
func TestAnnounceRestoresProxyDelay(t *testing.T) {
	vip := netip.MustParseAddr("10.99.1.5")
	lan := newAnnounceLAN(t)
	ns, h := lan.node("and", "10.99.0.1", vip)
	mustExec(t, ns, []string{"ip", "link", "add", "eth1", "type", "veth", "peer", "name", "eth1p"}, []string{"ip", "link", "set", "eth1", "up"})
	const file = "/proc/sys/net/ipv4/neigh/%s/proxy_delay"
	read := func(dev string) string {
		out, err := ns.Exec("cat", fmt.Sprintf(file, dev))
		require.NoError(t, err, out)
		return strings.TrimSpace(out)
	}
	// Values in units of 1/100 s that convert exactly to jiffies and back.
	mustExec(t, ns, []string{"sh", "-c", "echo 40 > " + fmt.Sprintf(file, "eth0")}, []string{"sh", "-c", "echo 60 > " + fmt.Sprintf(file, "eth1")})

	ann := NewAnnouncer(HostAnnounceOps{Host: h}, 1)
	require.NoError(t, ann.Sync("eth0", []netip.Addr{vip}))
	require.Equal(t, "0", read("eth0"), "answers at once while announcing")
	require.NoError(t, ann.Sync("eth0", nil))
	require.Equal(t, "0", read("eth0"), "kept while the announcer runs on the uplink")

	// The uplink changes: the old one gets its value back.
	require.NoError(t, ann.Sync("eth1", []netip.Addr{vip}))
	require.Equal(t, "40", read("eth0"))
	require.Equal(t, "0", read("eth1"))

	// Stopping restores the current uplink.
	require.NoError(t, ann.Withdraw())
	require.Equal(t, "60", read("eth1"))
	require.Equal(t, "40", read("eth0"))
}
