package podnet

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/test/ovssandbox"
)

// TestSetupCheckTeardownDualStack runs against real namespaces: a "host" namespace standing
// for the root one and a pod namespace, both created by the test.
func TestSetupCheckTeardownDualStack(t *testing.T) {
	host, pod := ovssandbox.NewNetNS(t, "host"), ovssandbox.NewNetNS(t, "pod")
	n := &Netlink{HostNetNS: "/var/run/netns/" + host.Name}
	cfg := Config{
		NetNS: "/var/run/netns/" + pod.Name, IfName: "eth0", HostIfName: "apxtest0", MTU: 1450,
		Addresses:                []netip.Prefix{netip.MustParsePrefix("10.30.0.2/24"), netip.MustParsePrefix("fd00:30::2/64")},
		Gateways:                 []netip.Addr{netip.MustParseAddr("10.30.0.1"), netip.MustParseAddr("fd00:30::1")},
		DisableTXChecksumOffload: true,
	}
	require.True(t, n.NetNSExists(cfg.NetNS))
	require.False(t, n.NetNSExists("/var/run/netns/does-not-exist"))

	ifs, err := n.Setup(cfg)
	require.NoError(t, err)
	require.Len(t, ifs.PodMAC, 6)
	require.Len(t, ifs.HostMAC, 6)

	out, err := pod.Exec("ip", "-o", "addr", "show", "dev", "eth0")
	require.NoError(t, err, out)
	require.Contains(t, out, "inet 10.30.0.2/24")
	require.Contains(t, out, "inet6 fd00:30::2/64")
	out, err = pod.Exec("ip", "-o", "link", "show", "dev", "eth0")
	require.NoError(t, err, out)
	require.Contains(t, out, "mtu 1450")
	require.Contains(t, out, strings.ToLower(ifs.PodMAC.String()))
	for _, fam := range []string{"-4", "-6"} {
		out, err = pod.Exec("ip", fam, "route", "show", "default")
		require.NoError(t, err, out)
		require.Contains(t, out, "default via", fam)
	}
	out, err = host.Exec("ethtool", "-k", "apxtest0")
	require.NoError(t, err, out)
	require.Contains(t, out, "tx-checksumming: off")
	out, err = pod.Exec("ethtool", "-k", "eth0")
	require.NoError(t, err, out)
	require.Contains(t, out, "tx-checksumming: off")

	again, err := n.Setup(cfg)
	require.NoError(t, err, "Setup is idempotent")
	require.Equal(t, ifs, again, "the same pair is kept")
	require.NoError(t, n.Check(cfg))

	_, err = pod.Exec("ip", "addr", "del", "fd00:30::2/64", "dev", "eth0")
	require.NoError(t, err)
	require.ErrorContains(t, n.Check(cfg), "lacks address fd00:30::2/64")
	_, err = n.Setup(cfg)
	require.NoError(t, err, "Setup repairs what is missing")
	require.NoError(t, n.Check(cfg))

	require.NoError(t, n.Teardown(cfg))
	out, err = host.Exec("ip", "-o", "link", "show")
	require.NoError(t, err)
	require.NotContains(t, out, "apxtest0")
	out, err = pod.Exec("ip", "-o", "link", "show")
	require.NoError(t, err)
	require.NotContains(t, out, "eth0")
	require.NoError(t, n.Teardown(cfg), "Teardown of nothing is fine")
	require.Error(t, n.Check(cfg))
}

func TestHalfPairIsReplaced(t *testing.T) {
	host, pod := ovssandbox.NewNetNS(t, "host"), ovssandbox.NewNetNS(t, "pod")
	n := &Netlink{HostNetNS: "/var/run/netns/" + host.Name}
	cfg := Config{NetNS: "/var/run/netns/" + pod.Name, IfName: "eth0", HostIfName: "apxtest1",
		Addresses: []netip.Prefix{netip.MustParsePrefix("10.30.0.3/24")}, Gateways: []netip.Addr{netip.MustParseAddr("10.30.0.1")}}
	// A leftover host end whose peer is not in the pod (e.g. an interrupted earlier ADD).
	out, err := host.Exec("ip", "link", "add", "apxtest1", "type", "veth", "peer", "name", "stray0")
	require.NoError(t, err, out)
	_, err = n.Setup(cfg)
	require.NoError(t, err)
	require.NoError(t, n.Check(cfg))
	out, err = host.Exec("ip", "-o", "link", "show")
	require.NoError(t, err)
	require.NotContains(t, out, "stray0")

	_, err = n.Setup(Config{NetNS: "/var/run/netns/gone-" + pod.Name, IfName: "eth0", HostIfName: "apxtest2"})
	require.ErrorIs(t, err, ErrNetNSNotFound)
}
