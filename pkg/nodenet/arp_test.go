package nodenet

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/test/ovssandbox"
)

// TestRestrictPodARP: in a host namespace with a pod-like veth (explicitly set to answer) and a
// non-veth interface configured explicitly, RestrictPodARP sets arp_ignore=1 on conf/default
// (inherited by veths created later) and on the veth, leaves the explicitly configured
// interface alone, and is idempotent.
func TestRestrictPodARP(t *testing.T) {
	ns := ovssandbox.NewNetNS(t, "arp")
	run := func(args ...string) string {
		t.Helper()
		out, err := ns.Exec(args...)
		require.NoError(t, err, "%v: %s", args, out)
		return strings.TrimSpace(out)
	}
	arpIgnore := func(dev string) string { return run("cat", "/proc/sys/net/ipv4/conf/"+dev+"/arp_ignore") }
	run("ip", "link", "add", "podhost", "type", "veth", "peer", "name", "podend")
	run("ip", "link", "add", "br0", "type", "bridge")
	run("sysctl", "-q", "-w", "net.ipv4.conf.podhost.arp_ignore=0")
	run("sysctl", "-q", "-w", "net.ipv4.conf.br0.arp_ignore=0")

	h := Host{NetNS: "/var/run/netns/" + ns.Name}
	require.NoError(t, h.RestrictPodARP())
	require.Equal(t, "1", arpIgnore("default"))
	require.Equal(t, "1", arpIgnore("podhost"))
	require.Equal(t, "1", arpIgnore("podend"))
	require.Equal(t, "0", arpIgnore("br0"), "an explicitly configured interface other than a veth keeps its setting")
	require.NoError(t, h.RestrictPodARP(), "idempotent")

	run("ip", "link", "add", "newhost", "type", "veth", "peer", "name", "newend")
	require.Equal(t, "1", arpIgnore("newhost"), "a veth created afterwards inherits conf/default")
}
