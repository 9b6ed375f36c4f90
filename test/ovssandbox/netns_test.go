package ovssandbox

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func netnsExists(t *testing.T, name string) bool {
	t.Helper()
	out, err := RunCmd(10*time.Second, "ip", "netns", "list")
	require.NoError(t, err)
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == name {
			return true
		}
	}
	return false
}

func TestNetNSCleanupKillsProcesses(t *testing.T) {
	Require(t)
	var name string
	exited := make(chan error, 1)
	t.Run("inner", func(t *testing.T) {
		ns := NewNetNS(t, "cleanuptest")
		name = ns.Name
		require.LessOrEqual(t, len(name), 15)
		require.True(t, strings.HasPrefix(name, "cleanupt-"), name)
		out, err := ns.Exec("ip", "-br", "link", "show", "lo")
		require.NoError(t, err)
		require.Contains(t, out, "UP")
		// A process left running must not prevent the deletion.
		cmd := ns.Command(context.Background(), "sleep", "300")
		require.NoError(t, cmd.Start())
		go func() { exited <- cmd.Wait() }()
		// `ip netns exec` enters the namespace after it starts: wait until sleep is inside.
		require.Eventually(t, func() bool {
			out, _ := RunCmd(5*time.Second, "ip", "netns", "pids", name)
			return strings.TrimSpace(out) != ""
		}, 5*time.Second, 10*time.Millisecond, "sleep never showed up in netns %s", name)
		require.True(t, netnsExists(t, name))
	})
	require.NotEmpty(t, name)
	require.False(t, netnsExists(t, name), "netns %s survived its test", name)
	select {
	case err := <-exited:
		require.Error(t, err, "sleep should have been killed")
	case <-time.After(5 * time.Second):
		t.Fatal("process in the namespace still runs after cleanup")
	}
}

// TestVethEchoThroughBridge runs OVS in its own namespace (the netdev datapath allows one
// ovs-vswitchd per namespace), attaches two namespaces to a NORMAL bridge and talks TCP and UDP
// between them through the echo server.
func TestVethEchoThroughBridge(t *testing.T) {
	ovsNS := NewNetNS(t, "ovs")
	o := Start(t, Options{NetNS: ovsNS.Name})
	br := "br" + randomSuffix(6)
	_, err := o.Vsctl("add-br", br, "--", "set", "bridge", br, "datapath_type=netdev")
	require.NoError(t, err)
	require.NoError(t, o.WaitForBridge(br))

	client, server := NewNetNS(t, "cli"), NewNetNS(t, "srv")
	mac, _ := net.ParseMAC("02:00:00:00:00:0b")
	vc := AttachVeth(t, o, br, client, VethConfig{IfName: "eth0", Addr: "10.10.0.10/24"})
	vs := AttachVeth(t, o, br, server, VethConfig{IfName: "eth0", Addr: "10.10.0.11/24", MAC: mac, OFPortRequest: 7})
	require.NotZero(t, vc.OFPort)
	require.Equal(t, uint32(7), vs.OFPort)
	require.NotEqual(t, vc.OFPort, vs.OFPort)
	require.Equal(t, mac, vs.MAC)
	require.Len(t, vc.MAC, 6)

	// TX checksum offload is off on both ends.
	out, err := server.Exec("ethtool", "-k", "eth0")
	require.NoError(t, err)
	require.Contains(t, out, "tx-checksumming: off")
	out, err = ovsNS.Exec("ethtool", "-k", vs.HostIf)
	require.NoError(t, err)
	require.Contains(t, out, "tx-checksumming: off")

	echo := BuildEcho(t)
	echo.Start(t, server, "server1", 8080)
	for _, proto := range []string{"tcp", "udp"} {
		reply, err := echo.Dial(context.Background(), client, proto, "10.10.0.11:8080", 5*time.Second)
		require.NoError(t, err, proto)
		name, from, err := ParseEchoReply(reply)
		require.NoError(t, err)
		require.Equal(t, "server1", name)
		host, _, err := net.SplitHostPort(from)
		require.NoError(t, err)
		require.Equal(t, "10.10.0.10", host, proto)
	}

	// Nothing listens on 9999: the client fails quickly instead of hanging.
	start := time.Now()
	_, err = echo.Dial(context.Background(), client, "tcp", "10.10.0.11:9999", 2*time.Second)
	require.Error(t, err)
	require.Less(t, time.Since(start), 5*time.Second)
}
