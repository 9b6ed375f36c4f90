package server_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/cni/protocol"
	"github.com/antrea-proxy/antrea-proxy/test/ovssandbox"
)

// TestIntegrationCNI drives the real antrea-cni binary against the CNI server and a real OVS:
// two pods reach each other through their flows, a repeated ADD changes nothing, CHECK passes,
// spoofed traffic is dropped, malformed input gets the right CNI error and changes nothing,
// DEL leaves no port, flow, interface or address behind, and a DEL made while the agent is
// down is carried out when it starts again.
func TestIntegrationCNI(t *testing.T) {
	n := newNode(t)
	echo := ovssandbox.BuildEcho(t)
	ns1, ns2 := ovssandbox.NewNetNS(t, "pod1"), ovssandbox.NewNetNS(t, "pod2")

	r1 := n.add("c1", ns1)
	r2 := n.add("c2", ns2)
	ip1, ip2 := r1.IPs[0].Address.IP.String(), r2.IPs[0].Address.IP.String()
	require.Equal(t, "10.20.0.2", ip1)
	require.Equal(t, "10.20.0.3", ip2)
	require.Equal(t, "10.20.0.1", r1.IPs[0].Gateway.String())
	require.Equal(t, "/var/run/netns/"+ns1.Name, r1.Interfaces[1].Sandbox)

	out, err := ns1.Exec("ip", "-o", "addr", "show", "dev", "eth0")
	require.NoError(t, err, out)
	require.Contains(t, out, "inet 10.20.0.2/24")
	out, err = ns1.Exec("ip", "route", "show", "default")
	require.NoError(t, err, out)
	require.Contains(t, out, "default via 10.20.0.1 dev eth0")

	echo.Start(t, ns2, "pod2", 8080)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	reply, err := echo.Dial(ctx, ns1, "tcp", ip2+":8080", 5*time.Second)
	require.NoError(t, err, "pod1 -> pod2\nflows:\n%s", n.podFlows())
	server, client, err := ovssandbox.ParseEchoReply(reply)
	require.NoError(t, err)
	require.Equal(t, "pod2", server)
	require.True(t, strings.HasPrefix(client, ip1+":"), "pod2 saw %s", client)

	// ADD again: same result, nothing new.
	ports, flows := n.ports(), n.podFlows()
	again := n.add("c1", ns1)
	require.Equal(t, r1.IPs[0].Address.String(), again.IPs[0].Address.String())
	require.Equal(t, r1.Interfaces[1].Mac, again.Interfaces[1].Mac)
	require.Equal(t, ports, n.ports())
	require.Equal(t, flows, n.podFlows())

	out, code := n.cni("CHECK", "c1", ns1, n.conf())
	require.Equal(t, 0, code, out)

	// Spoof guard: a packet from pod1's port with another source address is dropped.
	port1 := ofport(t, n, r1.Interfaces[0].Name)
	trace, err := n.ovs.Trace(n.bridge, "in_port="+port1+",dl_src="+r1.Interfaces[1].Mac+",ip,nw_src=10.20.0.99,nw_dst="+ip2)
	require.NoError(t, err)
	require.Contains(t, trace, "Datapath actions: drop", trace)

	// Malformed input: the right error code, and nothing changes.
	for _, tc := range []struct {
		name  string
		cmd   string
		ns    *ovssandbox.NetNS
		stdin string
		code  uint
	}{
		{"bad JSON", "ADD", ns1, `{"cniVersion":`, protocol.ErrDecodingFailure},
		{"missing CNI_NETNS", "ADD", nil, n.conf(), protocol.ErrInvalidEnvironmentVariables},
		{"unknown version", "ADD", ns1, strings.Replace(n.conf(), `"1.0.0"`, `"42.0.0"`, 1), protocol.ErrIncompatibleCNIVersion},
		{"no network name", "ADD", ns1, `{"cniVersion":"1.0.0","type":"antrea-cni"}`, protocol.ErrInvalidNetworkConfig},
	} {
		out, code := n.cni(tc.cmd, "c3", tc.ns, tc.stdin)
		require.Equal(t, 1, code, "%s: %s", tc.name, out)
		var e protocol.Error
		require.NoError(t, json.Unmarshal([]byte(out), &e), "%s: %s", tc.name, out)
		require.Equal(t, tc.code, e.Code, "%s: %s", tc.name, out)
	}
	require.Equal(t, ports, n.ports())
	require.Equal(t, flows, n.podFlows())

	// DEL pod1: no port, flow, host interface, pod interface or address left.
	host1 := r1.Interfaces[0].Name
	out, code = n.cni("DEL", "c1", ns1, n.conf())
	require.Equal(t, 0, code, out)
	require.NotContains(t, n.ports(), host1)
	require.NotContains(t, n.podFlows(), "in_port="+port1+",")
	require.NotContains(t, n.podFlows(), ip1)
	require.NotContains(t, n.hostLinks(), host1)
	out, err = ns1.Exec("ip", "-o", "link", "show")
	require.NoError(t, err)
	require.NotContains(t, out, "eth0")
	require.NoFileExists(t, filepath.Join(n.opts.StateDir, "ipam", ip1))
	require.FileExists(t, filepath.Join(n.opts.StateDir, "ipam", ip2))
	out, code = n.cni("DEL", "c1", ns1, n.conf())
	require.Equal(t, 0, code, "a repeated DEL succeeds: %s", out)

	// The agent goes down; the DEL of pod2 is spooled and carried out when it comes back.
	n.stopSrv()
	out, code = n.cni("DEL", "c2", ns2, n.conf())
	require.Equal(t, 0, code, out)
	require.Contains(t, n.ports(), r2.Interfaces[0].Name, "nothing is deleted while the agent is down")
	n.startServer(2)
	require.Empty(t, n.ports())
	require.Empty(t, n.podFlows())
	require.NotContains(t, n.hostLinks(), r2.Interfaces[0].Name)
	require.NoFileExists(t, filepath.Join(n.opts.StateDir, "ipam", ip2))
	entries, err := os.ReadDir(n.spool)
	require.NoError(t, err)
	require.Empty(t, entries)
}

// TestIntegrationCNIRestart: pods keep their addresses, flows and connectivity across an agent
// restart, their flows move to the new round, and a new pod gets a fresh address.
func TestIntegrationCNIRestart(t *testing.T) {
	n := newNode(t)
	echo := ovssandbox.BuildEcho(t)
	ns1, ns2, ns3 := ovssandbox.NewNetNS(t, "pod1"), ovssandbox.NewNetNS(t, "pod2"), ovssandbox.NewNetNS(t, "pod3")
	r1 := n.add("c1", ns1)
	r2 := n.add("c2", ns2)
	echo.Start(t, ns2, "pod2", 8080)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dial := func(from *ovssandbox.NetNS, addr string) {
		t.Helper()
		reply, err := echo.Dial(ctx, from, "tcp", addr, 5*time.Second)
		require.NoError(t, err, "dial %s\nflows:\n%s", addr, n.podFlows())
		require.True(t, strings.HasPrefix(reply, "pod2 "), reply)
	}
	ip2 := r2.IPs[0].Address.IP.String()
	dial(ns1, ip2+":8080")

	n.startServer(2)
	flows := n.podFlows()
	require.NotEmpty(t, flows)
	for _, line := range strings.Split(flows, "\n") {
		require.Contains(t, line, "cookie=0x2", "every pod flow is of round 2: %s", line)
	}
	dial(ns1, ip2+":8080")
	again := n.add("c1", ns1)
	require.Equal(t, r1.IPs[0].Address.String(), again.IPs[0].Address.String())
	r3 := n.add("c3", ns3)
	require.Equal(t, "10.20.0.4", r3.IPs[0].Address.IP.String())
	dial(ns3, ip2+":8080")
}

func ofport(t *testing.T, n *node, ifName string) string {
	t.Helper()
	out, err := n.ovs.Vsctl("get", "Interface", ifName, "ofport")
	require.NoError(t, err, out)
	return strings.TrimSpace(out)
}
