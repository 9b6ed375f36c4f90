package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	podCIDRv4 = "10.20.0.0/24"
	podCIDRv6 = "fd00:20::/64"
)

func makeDualStackNode(name, internalIP string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:   v1.NodeSpec{PodCIDR: podCIDRv4, PodCIDRs: []string{podCIDRv4, podCIDRv6}},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: internalIP}}}}
}

// TestIntegrationNDSpoofGuard: the IPv6 side of TestIntegrationARPSpoofGuard on a dual-stack
// node. Pod a claims, with neighbour advertisements (override flag) and solicitations (whose
// source address a receiver learns with the source link-layer option), the gateway's IPv6
// address to c and b's to the gateway, then solicits c and the gateway from its own address.
// Once both learned a's own address, neither may map the claimed addresses to a's MAC, and
// IPv6 resolution between the pods and with the gateway still works.
func TestIntegrationNDSpoofGuard(t *testing.T) {
	t.Parallel()
	w := newWorld(t, makeDualStackNode("n1", underlay+".1"))
	w.clusterCIDRs = append(w.clusterCIDRs, "fd00:20::/56")
	n := w.addNode("n1", 1)
	a, b, c := n.addPod("pa"), n.addPod("pb"), n.addPod("pc")
	const gw6, gwDev = "fd00:20::1", "antrea-gw0"
	gwMAC := n.dp.Gateway().MAC
	a6, b6, c6 := a.ip6(), b.ip6(), c.ip6()
	require.NotEmpty(t, a6+b6+c6)
	w.echo.Start(t, b.ns, "pb", 8080)
	w.echo.Start(t, n.host, "host", 9000)
	w.dial(c.ns, "["+gw6+"]:9000", n.diag)
	w.dial(n.host, "["+b6+"]:8080", n.diag)
	require.Equal(t, gwMAC.String(), neighMAC(c.ns, "eth0", gw6))
	require.Equal(t, b.mac().String(), neighMAC(n.host, gwDev, b6))

	aMAC, bMAC, cMAC := a.mac(), b.mac(), c.mac()
	claims := ndFrames(
		ndMsg{typ: ndAdvertisement, ethDst: cMAC, ethSrc: aMAC, src: a6, dst: c6, target: gw6, flags: ndOverride, ll: aMAC},
		ndMsg{typ: ndSolicitation, ethDst: cMAC, ethSrc: aMAC, src: gw6, dst: c6, target: c6, ll: aMAC},
		ndMsg{typ: ndAdvertisement, ethDst: gwMAC, ethSrc: aMAC, src: a6, dst: gw6, target: b6, flags: ndOverride, ll: aMAC},
		ndMsg{typ: ndSolicitation, ethDst: gwMAC, ethSrc: aMAC, src: b6, dst: gw6, target: gw6, ll: aMAC},
	)
	own := ndFrames(
		ndMsg{typ: ndSolicitation, ethDst: cMAC, ethSrc: aMAC, src: a6, dst: c6, target: c6, ll: aMAC},
		ndMsg{typ: ndSolicitation, ethDst: gwMAC, ethSrc: aMAC, src: a6, dst: gw6, target: gw6, ll: aMAC},
	)
	w.must(c.ns, "ip", "-6", "neigh", "flush", "dev", "eth0", "to", a6)
	w.must(n.host, "ip", "-6", "neigh", "flush", "dev", gwDev, "to", a6)
	require.NoError(t, a.ns.SendFrames("eth0", append(claims, own...)...))
	waitFor(t, 10*time.Second, "c and the gateway learn a's own IPv6 address from a's solicitations", func() bool {
		return neighMAC(c.ns, "eth0", a6) == aMAC.String() && neighMAC(n.host, gwDev, a6) == aMAC.String()
	})
	diag := func() string {
		return fmt.Sprintf("c's neighbours:\n%s\nhost's neighbours:\n%s\n%s",
			w.must(c.ns, "ip", "-6", "neigh", "show"), w.must(n.host, "ip", "-6", "neigh", "show"), n.diag())
	}
	require.Equal(t, gwMAC.String(), neighMAC(c.ns, "eth0", gw6), "c maps the gateway's address to a's claim\n%s", diag())
	require.Equal(t, bMAC.String(), neighMAC(n.host, gwDev, b6), "the gateway maps b's address to a's claim\n%s", diag())

	for _, p := range []*pod{a, b, c} {
		w.must(p.ns, "ip", "-6", "neigh", "flush", "all")
	}
	w.must(n.host, "ip", "-6", "neigh", "flush", "dev", gwDev)
	s, cl := w.dial(a.ns, "["+b6+"]:8080", diag)
	require.Equal(t, "pb", s)
	require.Equal(t, "["+a6+"]", host(cl))
	s, _ = w.dial(a.ns, "["+gw6+"]:9000", diag)
	require.Equal(t, "host", s)
	s, _ = w.dial(n.host, "["+b6+"]:8080", diag)
	require.Equal(t, "pb", s)
	require.Equal(t, gwMAC.String(), neighMAC(a.ns, "eth0", gw6))
	require.Equal(t, bMAC.String(), neighMAC(a.ns, "eth0", b6))
	require.Equal(t, bMAC.String(), neighMAC(n.host, gwDev, b6))
}
