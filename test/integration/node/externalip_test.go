package node

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestIntegrationExternalIPClaimsOnlyItsPort: a Service whose author names the underlay's
// router (the node's default gateway) as an ExternalIP takes only the Service's port into OVS.
// The node itself and its pods still reach the router's other ports (here the echo server on
// 7000), while the Service's port is load-balanced by OVS from both.
func TestIntegrationExternalIPClaimsOnlyItsPort(t *testing.T) {
	t.Parallel()
	w := newWorld(t, makeNode("n1", "10.20.0.0/24", underlay+".1"))
	n := w.addNode("n1", 1)
	p1, p2 := n.addPod("p1"), n.addPod("p2")
	w.echo.Start(t, p2.ns, "p2", 8080)
	w.echo.Start(t, w.ext, "ext", 7000)
	w.addService(svcSpec{name: "claim", clusterIP: "10.96.0.20", externalIPs: []string{extIP}}, map[string]string{p2.ip: "n1"})
	n.waitServices(1)
	waitFor(t, 10*time.Second, "the ExternalIP's Service port in the nftables table", func() bool {
		return strings.Contains(n.nft(), extIP+" . tcp . 80")
	})

	s, c := w.dial(n.host, extIP+":7000", n.diag)
	require.Equal(t, "ext", s, "host→another port of the ExternalIP reaches the machine that owns it")
	require.Equal(t, n.ip, host(c))
	s, c = w.dial(p1.ns, extIP+":7000", n.diag)
	require.Equal(t, "ext", s, "pod→another port of the ExternalIP reaches the machine that owns it")
	require.Equal(t, n.ip, host(c), "masqueraded like any pod traffic leaving the node")
	s, c = w.dial(n.host, extIP+":80", n.diag)
	require.Equal(t, "p2", s, "host→the Service's port is load-balanced by OVS")
	require.Equal(t, "10.20.0.1", host(c))
	s, c = w.dial(p1.ns, extIP+":80", n.diag)
	require.Equal(t, "p2", s, "pod→the Service's port is load-balanced by OVS")
	require.Equal(t, p1.ip, host(c))
}
