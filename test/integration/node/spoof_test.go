package node

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

const (
	gwIP  = "10.20.0.1"
	gwDev = "antrea-gw0"
)

// TestIntegrationARPSpoofGuard: pod a, on a node with pods b and c added by the real antrea-cni
// binary, claims with ARP the gateway's address (to c and to everyone) and b's address (to the
// gateway and to everyone), and impersonates b's MAC (checkARPClaimsIgnored). Afterwards ARP
// resolution between the pods and with the gateway still works.
func TestIntegrationARPSpoofGuard(t *testing.T) {
	t.Parallel()
	w := newWorld(t, makeNode("n1", "10.20.0.0/24", underlay+".1"))
	n := w.addNode("n1", 1)
	a, b, c := n.addPod("pa"), n.addPod("pb"), n.addPod("pc")
	gwMAC := n.dp.Gateway().MAC
	w.echo.Start(t, b.ns, "pb", 8080)
	w.echo.Start(t, n.host, "host", 9000)
	checkARPClaimsIgnored(w, n, a, b, c)

	// Resolution from scratch still works: between pods, to and from the gateway.
	for _, ns := range []*pod{a, b, c} {
		w.must(ns.ns, "ip", "neigh", "flush", "all")
	}
	w.must(n.host, "ip", "neigh", "flush", "dev", gwDev)
	s, cl := w.dial(a.ns, b.ip+":8080", n.diag)
	require.Equal(t, "pb", s)
	require.Equal(t, a.ip, host(cl))
	s, _ = w.dial(a.ns, gwIP+":9000", n.diag)
	require.Equal(t, "host", s)
	s, _ = w.dial(n.host, b.ip+":8080", n.diag)
	require.Equal(t, "pb", s)
	require.Equal(t, gwMAC.String(), neighMAC(a.ns, "eth0", gwIP))
	require.Equal(t, b.mac().String(), neighMAC(a.ns, "eth0", b.ip))
	require.Equal(t, b.mac().String(), neighMAC(n.host, gwDev, b.ip))
}

// checkARPClaimsIgnored has a claim b's and the gateway's addresses and impersonate b. Each claim
// is an ARP request about the receiver's own address, whose sender a Linux receiver learns at
// once, overriding what it knew. Right after the claims, a asks c and the gateway about their
// addresses for itself; once both learned a's own address (it is let through, and it left a's
// port after the claims), neither may map the claimed addresses to a's MAC.
func checkARPClaimsIgnored(w *world, n *node, a, b, c *pod) {
	t := w.t
	t.Helper()
	gwMAC := n.dp.Gateway().MAC
	// c knows the gateway and the host knows b, from real traffic.
	w.dial(c.ns, gwIP+":9000", n.diag)
	w.dial(n.host, b.ip+":8080", n.diag)
	require.Equal(t, gwMAC.String(), neighMAC(c.ns, "eth0", gwIP))
	require.Equal(t, b.mac().String(), neighMAC(n.host, gwDev, b.ip))

	aMAC, bMAC, cMAC := a.mac(), b.mac(), c.mac()
	claims := frames(
		// b's address and MAC throughout, sent from a's port: a impersonates b.
		arpMsg{op: arpRequest, ethDst: gwMAC, ethSrc: bMAC, sha: bMAC, spa: b.ip, tha: zeroMAC, tpa: gwIP},
		// To c: "who has c's address? the gateway's address is at a's MAC".
		arpMsg{op: arpRequest, ethDst: cMAC, ethSrc: aMAC, sha: aMAC, spa: gwIP, tha: zeroMAC, tpa: c.ip},
		// To the gateway: "who has the gateway's address? b's address is at a's MAC".
		arpMsg{op: arpRequest, ethDst: gwMAC, ethSrc: aMAC, sha: aMAC, spa: b.ip, tha: zeroMAC, tpa: gwIP},
		// Gratuitous claims to everyone, as request and as reply.
		arpMsg{op: arpRequest, ethDst: broadcastMAC, ethSrc: aMAC, sha: aMAC, spa: gwIP, tha: zeroMAC, tpa: gwIP},
		arpMsg{op: arpReply, ethDst: broadcastMAC, ethSrc: aMAC, sha: aMAC, spa: b.ip, tha: broadcastMAC, tpa: b.ip},
		// a's own address with b's MAC as sender hardware address.
		arpMsg{op: arpRequest, ethDst: cMAC, ethSrc: aMAC, sha: bMAC, spa: a.ip, tha: zeroMAC, tpa: c.ip},
	)
	own := frames(
		arpMsg{op: arpRequest, ethDst: cMAC, ethSrc: aMAC, sha: aMAC, spa: a.ip, tha: zeroMAC, tpa: c.ip},
		arpMsg{op: arpRequest, ethDst: gwMAC, ethSrc: aMAC, sha: aMAC, spa: a.ip, tha: zeroMAC, tpa: gwIP},
	)
	w.must(c.ns, "ip", "neigh", "flush", "dev", "eth0", "to", a.ip)
	w.must(n.host, "ip", "neigh", "flush", "dev", gwDev, "to", a.ip)
	require.NoError(t, a.ns.SendFrames("eth0", append(claims, own...)...))
	waitFor(t, 10*time.Second, "c and the gateway learn a's own address from a's ARP", func() bool {
		return neighMAC(c.ns, "eth0", a.ip) == aMAC.String() && neighMAC(n.host, gwDev, a.ip) == aMAC.String()
	})
	diag := func() string {
		return fmt.Sprintf("c's neighbours:\n%s\nhost's neighbours:\n%s\n%s",
			w.must(c.ns, "ip", "neigh", "show"), w.must(n.host, "ip", "neigh", "show"), n.diag())
	}
	require.Equal(t, gwMAC.String(), neighMAC(c.ns, "eth0", gwIP), "c maps the gateway's address to a's claim\n%s", diag())
	require.Equal(t, bMAC.String(), neighMAC(n.host, gwDev, b.ip), "the gateway maps b's address to a's claim\n%s", diag())
}

// guardFlows returns the neighbour guard flows (Classifier, priorities 225 and 230) of the pod
// on ofport, as OVS dumps them.
func (n *node) guardFlows(ofport string) []string {
	var out []string
	for _, l := range strings.Split(n.flows(pipeline.CategoryPod), "\n") {
		onPort := strings.Contains(l, "in_port="+ofport+",") || strings.Contains(l, "in_port="+ofport+" ")
		if onPort && (strings.Contains(l, "priority=225,") || strings.Contains(l, "priority=230,")) {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return out
}

// TestIntegrationARPSpoofGuardLifecycle: a pod's guard comes with its ADD, agrees with the
// bridge reconciler's verification (the healer's check of the pod flows), is put back by its replay after
// the pod flows were lost and still holds then, and goes with the pod's DEL.
func TestIntegrationARPSpoofGuardLifecycle(t *testing.T) {
	t.Parallel()
	w := newWorld(t, makeNode("n1", "10.20.0.0/24", underlay+".1"))
	n := w.addNode("n1", 1)
	a, b, c := n.addPod("pa"), n.addPod("pb"), n.addPod("pc")
	w.echo.Start(t, b.ns, "pb", 8080)
	w.echo.Start(t, n.host, "host", 9000)
	port := strings.TrimSpace(must(n.ovs.Vsctl("get", "Interface", a.res.Interfaces[0].Name, "ofport")))
	guard := n.guardFlows(port)
	// ARP: own address, probe, the drop; ND: the drops of RA, NS, NA and redirect.
	require.Len(t, guard, 7, n.flows(pipeline.CategoryPod))
	require.Contains(t, strings.Join(guard, "\n"), fmt.Sprintf("arp,in_port=%s,dl_src=%s,arp_spa=%s,arp_sha=%s actions=NORMAL", port, a.mac(), a.ip, a.mac()))
	ctx := context.Background()
	bridgeState := n.dp.Reconciler()
	ok, err := bridgeState.Verify(ctx, n.of)
	require.NoError(t, err)
	require.True(t, ok, "the reconciler's verification counts the guard")

	// What the healer meets after ovs-vswitchd lost the flows or after an external del-flows:
	// the pod flows are gone, the verification notices, the replay installs them again.
	_, err = n.ovs.Ofctl("del-flows", bridge, fmt.Sprintf("cookie=%#x/%#x", pipeline.Cookie(0, pipeline.CategoryPod, 0), pipeline.CategoryMask))
	require.NoError(t, err)
	require.Empty(t, n.guardFlows(port))
	ok, err = bridgeState.Verify(ctx, n.of)
	require.NoError(t, err)
	require.False(t, ok, "the verification notices the lost guard")
	require.NoError(t, bridgeState.Replay(ctx))
	require.Equal(t, guard, n.guardFlows(port), "the replay puts the guard back")
	ok, err = bridgeState.Verify(ctx, n.of)
	require.NoError(t, err)
	require.True(t, ok)
	checkARPClaimsIgnored(w, n, a, b, c)

	out, code := n.cni("DEL", "pa", a.ns)
	require.Equal(t, 0, code, out)
	require.Empty(t, n.guardFlows(port), "DEL removes the guard")
}
