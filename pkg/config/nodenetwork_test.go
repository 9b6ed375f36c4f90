package config

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNodeNetworkDefaults(t *testing.T) {
	c, err := ParseWithEnv(nil, fakeEnv("node-1", ""))
	require.NoError(t, err)
	n := c.NodeNetwork
	require.True(t, n.Enabled())
	require.Equal(t, "/var/run/antrea/cni.sock", n.CNISocketPath())
	require.Equal(t, "/var/lib/antrea-proxy/cni", n.CNIStatePath())
	require.Equal(t, "/var/run/antrea/cni-del-spool", n.CNIDelSpoolPath())
	np, svc := n.VirtualIPs()
	require.Equal(t, []netip.Addr{netip.MustParseAddr("169.254.0.252"), netip.MustParseAddr("fc01::aabb:ccdd:eefe")}, np)
	require.Equal(t, []netip.Addr{netip.MustParseAddr("169.254.0.253"), netip.MustParseAddr("fc01::aabb:ccdd:eeff")}, svc)
	require.Empty(t, n.ClusterPrefixes())
	out, err := c.Marshal()
	require.NoError(t, err)
	require.NotContains(t, string(out), "nodeNetwork", "an all-default section is not rendered")
}

func TestNodeNetworkValues(t *testing.T) {
	c, err := ParseWithEnv([]byte(`
nodeNetwork:
  enable: false
  trafficEncapMode: noEncap
  cniSocket: /run/cni.sock
  cniStateDir: /var/lib/x
  mtu: 1450
  clusterCIDRs: ["10.20.0.0/16", "fd00:20::/48"]
  nodePortVirtualIP: 169.254.10.1
  serviceVirtualIP: 169.254.10.2
`), fakeEnv("node-1", ""))
	require.NoError(t, err)
	n := c.NodeNetwork
	require.False(t, n.Enabled())
	require.Equal(t, "/run/cni.sock", n.CNISocketPath())
	require.Equal(t, 1450, n.MTU)
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16"), netip.MustParsePrefix("fd00:20::/48")}, n.ClusterPrefixes())
	np, svc := n.VirtualIPs()
	require.Equal(t, "169.254.10.1", np[0].String())
	require.Equal(t, "169.254.10.2", svc[0].String())
	out, err := c.Marshal()
	require.NoError(t, err)
	again, err := ParseWithEnv(out, fakeEnv("node-1", ""))
	require.NoError(t, err, "%s", out)
	require.Equal(t, c.NodeNetwork, again.NodeNetwork)
}

func TestNodeNetworkErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"encap", "nodeNetwork: {trafficEncapMode: geneve}", `nodeNetwork.trafficEncapMode: "geneve" is not supported`},
		{"relative socket", "nodeNetwork: {cniSocket: cni.sock}", `nodeNetwork.cniSocket: "cni.sock" must be an absolute path`},
		{"mtu type", `nodeNetwork: {mtu: "1500"}`, "nodeNetwork.mtu: expected an integer"},
		{"mtu fraction", `nodeNetwork: {mtu: 1500.5}`, "nodeNetwork.mtu: expected an integer"},
		{"mtu range", "nodeNetwork: {mtu: 100}", "nodeNetwork.mtu: 100 is outside 576-65535"},
		{"cidr", "nodeNetwork: {clusterCIDRs: [10.0.0.0/33]}", `nodeNetwork.clusterCIDRs[0]: "10.0.0.0/33" is not a valid CIDR`},
		{"family", "nodeNetwork: {nodePortVirtualIP: 'fc01::1'}", `nodeNetwork.nodePortVirtualIP: "fc01::1" is of the wrong IP family`},
		{"not an IP", "nodeNetwork: {serviceVirtualIPv6: nope}", `nodeNetwork.serviceVirtualIPv6: "nope" is not an IP address`},
		{"same VIPs", "nodeNetwork: {nodePortVirtualIP: 169.254.1.1, serviceVirtualIP: 169.254.1.1}", "must differ from nodePortVirtualIP"},
		{"unknown key", "nodeNetwork: {mtus: 1}", `unknown field "nodeNetwork.mtus"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseWithEnv([]byte(tc.yaml), fakeEnv("node-1", ""))
			require.ErrorContains(t, err, tc.want)
		})
	}
}
