package agent

import (
	"context"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
	"github.com/antrea-proxy/antrea-proxy/pkg/nodenet"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy"
)

type fakeRounds struct {
	round uint16
	ok    bool
}

func (f fakeRounds) LoadRound(context.Context) (uint16, bool, error) { return f.round, f.ok, nil }
func (f fakeRounds) SaveRound(context.Context, uint16) error         { return nil }

func TestNextRound(t *testing.T) {
	for _, tc := range []struct {
		store fakeRounds
		want  uint16
	}{{fakeRounds{}, 1}, {fakeRounds{4, true}, 5}, {fakeRounds{0xffff, true}, 1}} {
		got, err := nextRound(context.Background(), tc.store)
		require.NoError(t, err)
		require.Equal(t, tc.want, got, "%+v", tc.store)
	}
}

func TestNodeInfo(t *testing.T) {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Spec: v1.NodeSpec{PodCIDR: "10.20.0.0/24", PodCIDRs: []string{"10.20.0.0/24", "fd00:20::/64"}},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{
			{Type: v1.NodeInternalIP, Address: "192.168.50.1"}, {Type: v1.NodeExternalIP, Address: "203.0.113.1"},
			{Type: v1.NodeHostName, Address: "n1"}, {Type: v1.NodeInternalIP, Address: "not-an-ip"},
		}}}
	require.Equal(t, nodenet.NodeInfo{Name: "n1",
		PodCIDRs:    []netip.Prefix{netip.MustParsePrefix("10.20.0.0/24"), netip.MustParsePrefix("fd00:20::/64")},
		InternalIPs: []netip.Addr{netip.MustParseAddr("192.168.50.1")}}, nodeInfo(n))
	ipv4, ipv6 := families(model.NodePodCIDRs(n))
	require.True(t, ipv4)
	require.True(t, ipv6)

	// spec.podCIDR alone (older clusters).
	n.Spec.PodCIDRs = nil
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.20.0.0/24")}, model.NodePodCIDRs(n))
	n.Spec.PodCIDR = ""
	require.Empty(t, model.NodePodCIDRs(n))
}

func TestProxyOptionsUseServiceVirtualIPs(t *testing.T) {
	d := &DataPath{gw: &nodenet.Gateway{OFPort: 7},
		serviceVIPs: []netip.Addr{netip.MustParseAddr("169.254.0.253"), netip.MustParseAddr("fc01::aabb:ccdd:eeff")}}
	var o proxy.Options
	d.ProxyOptions(&o)
	require.Equal(t, uint32(7), o.GatewayOFPort)
	require.Equal(t, "169.254.0.253", o.GatewayIPv4.String())
	require.Equal(t, "fc01::aabb:ccdd:eeff", o.GatewayIPv6.String())
}

// TestAnnouncedAddressesReachTheReconciler: the announcer sees each programmed LB IP and
// ExternalIP address once (from the Service ports), and what it announces is routed into OVS
// whole (proxy ARP answers only for an address routed through another interface), while a
// Service port alone gets no host route.
func TestAnnouncedAddressesReachTheReconciler(t *testing.T) {
	vip, ext := netip.MustParseAddr("172.18.0.100"), netip.MustParseAddr("192.168.77.12")
	svVIP := netip.MustParseAddr("169.254.0.253")
	rec := nodenet.NewReconciler(nodenet.Config{LocalNode: "n1", Gateway: "antrea-gw0", IPv4: true, ProxyAll: true,
		ServiceVirtualIPs: []netip.Addr{svVIP}, VirtualMAC: virtualMAC}, nil)
	d := &DataPath{rec: rec, announceKick: make(chan struct{}, 1)}
	d.pushExposure(1, nodenet.Exposure{Ports: []nodenet.AddrPortProto{{Addr: vip, Protocol: "tcp", Port: 80},
		{Addr: vip, Protocol: "tcp", Port: 443}, {Addr: ext, Protocol: "tcp", Port: 9999}}})
	require.Equal(t, []netip.Addr{vip, ext}, d.exposedIPs())
	hostRoute := func(a netip.Addr) bool {
		for _, r := range rec.Desired().Routes {
			if r.Dst == netip.PrefixFrom(a, 32) {
				return true
			}
		}
		return false
	}
	require.False(t, hostRoute(vip), "a Service port alone has no host route")
	d.setAnnounced([]netip.Addr{vip})
	require.True(t, hostRoute(vip), "an announced address is routed into OVS")
	require.False(t, hostRoute(ext), "an address that is not announced is not")
	d.setAnnounced(nil)
	require.False(t, hostRoute(vip))
}
