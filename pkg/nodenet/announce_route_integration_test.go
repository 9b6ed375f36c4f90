package nodenet

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestAnnouncedAddressRoutedForARP: the node answers ARP for an announced LB IP only with a
// route to it through another interface than the uplink. The Service's port alone (marked,
// policy-routed) gives the ARP lookup no such route, so the reconciler routes the addresses
// the announcer announces (SetAnnounced) into the gateway, and only those.
func TestAnnouncedAddressRoutedForARP(t *testing.T) {
	vip := netip.MustParseAddr("10.99.1.5")
	lan := newAnnounceLAN(t)
	node, h := lan.member("arnode", "10.99.0.1")
	client, hostC := lan.member("arcli", "10.99.0.3")
	mustExec(t, client, []string{"ip", "route", "add", "10.99.1.0/24", "dev", "eth0"})
	mustExec(t, node, []string{"ip", "link", "add", "gw0", "type", "veth", "peer", "name", "gw0p"},
		[]string{"ip", "link", "set", "gw0", "up"}, []string{"ip", "link", "set", "gw0p", "up"})
	require.NoError(t, h.EnableForwarding(false))
	nft, err := NewNFT(h, "apx-announce-route")
	require.NoError(t, err)
	r := NewReconciler(Config{Host: h, LocalNode: "n1", Gateway: "gw0", IPv4: true, ProxyAll: true,
		NodePortVirtualIPs: npVIP[:1], ServiceVirtualIPs: svVIP[:1], VirtualMAC: vMAC}, nft)
	r.SetExposure(Exposure{Ports: []AddrPortProto{{vip, "tcp", 80}}})
	ctx := context.Background()
	require.NoError(t, r.Sync(ctx))

	ann := NewAnnouncer(HostAnnounceOps{Host: h}, 1)
	t.Cleanup(func() { _ = ann.Withdraw() })
	require.NoError(t, ann.Sync("eth0", []netip.Addr{vip}))
	nodeMAC := eth0MAC(t, h)
	resolved := func(d time.Duration) bool {
		deadline := time.Now().Add(d)
		for {
			poke(t, hostC, vip)
			if neighMAC(t, hostC, vip) == nodeMAC {
				return true
			}
			if time.Now().After(deadline) {
				return false
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	mustExec(t, client, []string{"ip", "neigh", "flush", "dev", "eth0"})
	require.False(t, resolved(2*time.Second), "without a route through another interface the proxy entry is not answered")

	r.SetAnnounced(ann.Announced())
	require.NoError(t, r.Sync(ctx))
	require.Contains(t, execOut(t, node, "ip", "route", "show", "proto", "97"), "10.99.1.5 via 169.254.0.253 dev gw0 onlink")
	mustExec(t, client, []string{"ip", "neigh", "flush", "dev", "eth0"})
	require.True(t, resolved(5*time.Second), "the announced address resolves to the node")

	r.SetAnnounced(nil)
	require.NoError(t, r.Sync(ctx))
	require.NotContains(t, execOut(t, node, "ip", "route", "show", "proto", "97"), "10.99.1.5")
}
