package node

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

// TestIntegrationNodeRestart: after an agent restart, the pods keep their addresses and
// connectivity (pod→pod, pod→ClusterIP, pod→outside, external→NodePort), the gateway keeps its
// MAC and address, its flows move to the new round, the host routes and nftables rules are still
// there, and a new pod gets a fresh address.
func TestIntegrationNodeRestart(t *testing.T) {
	t.Parallel()
	w := newWorld(t, makeNode("n1", "10.20.0.0/24", underlay+".1"), makeNode("n2", "10.20.1.0/24", underlay+".2"))
	n := w.addNode("n1", 1)
	p1, p2 := n.addPod("p1"), n.addPod("p2")
	w.echo.Start(t, p2.ns, "p2", 8080)
	w.echo.Start(t, w.ext, "ext", 7000)
	w.addService(svcSpec{name: "web", clusterIP: "10.96.0.10", nodePort: 30080}, map[string]string{p2.ip: "n1"})
	n.waitServices(1)
	check := func(when string) {
		t.Helper()
		for _, tc := range []struct {
			from         string
			addr         string
			server, seen string
		}{
			{"p1", p2.ip + ":8080", "p2", p1.ip},
			{"p1", "10.96.0.10:80", "p2", p1.ip},
			{"p1", extIP + ":7000", "ext", n.ip},
			{"ext", n.ip + ":30080", "p2", "169.254.0.253"},
		} {
			ns := p1.ns
			if tc.from == "ext" {
				ns = w.ext
			}
			s, c := w.dial(ns, tc.addr, n.diag)
			require.Equal(t, tc.server, s, "%s: %s -> %s", when, tc.from, tc.addr)
			require.Equal(t, tc.seen, host(c), "%s: %s -> %s", when, tc.from, tc.addr)
		}
	}
	check("before restart")
	mac := n.dp.Gateway().MAC
	routes := n.routes()
	require.Contains(t, routes, "10.20.1.0/24 via 192.168.50.2")

	n.restart()
	require.Equal(t, uint16(2), n.dp.Round())
	require.Equal(t, mac, n.dp.Gateway().MAC, "the gateway keeps its MAC")
	require.Contains(t, w.must(n.host, "ip", "-o", "addr", "show", "dev", "antrea-gw0"), "inet 10.20.0.1/24")
	require.Contains(t, w.must(p1.ns, "ip", "-o", "addr", "show", "dev", "eth0"), "inet "+p1.ip+"/24")
	require.Equal(t, routes, n.routes(), "host routes unchanged")
	n.waitServices(1)
	check("after restart")
	gw := n.flows(pipeline.CategoryGateway)
	lines := strings.Split(strings.TrimSpace(gw), "\n")
	// IPv4: forwarding to the host, two hairpins, the NodePort virtual IP, and the classification
	// of the gateway's address with the drop of other podCIDR sources from the gateway, and the
	// exemption from SNAT of the node's own Service connections to local pods.
	require.Len(t, lines, 7, gw)
	for _, l := range lines {
		require.Contains(t, l, "cookie=0x2050000000000", "every gateway flow is of round 2: %s", l)
	}
	p3 := n.addPod("p3")
	require.Equal(t, "10.20.0.4", p3.ip, "a new pod gets a fresh address")
	s, c := w.dial(p3.ns, "10.96.0.10:80", n.diag)
	require.Equal(t, "p2", s)
	require.Equal(t, p3.ip, host(c))
}
