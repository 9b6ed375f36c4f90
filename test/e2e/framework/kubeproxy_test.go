package framework

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBridgeGateway(t *testing.T) {
	gw, err := bridgeGateway("10.244.1.0/24")
	require.NoError(t, err)
	require.Equal(t, "10.244.1.1/24", gw.String())
	_, err = bridgeGateway("fd00::/64")
	require.Error(t, err, "the bridge pod network is IPv4 only")
}

// TestKubeProxyConfig: nftables mode, the Node's name, the cluster CIDR, and kube-proxy's own
// default for nodePortAddresses (not set); the conntrack settings leave the host's values alone.
func TestKubeProxyConfig(t *testing.T) {
	n := &Node{Name: "node2", s: &Sandbox{CP: &ControlPlane{ClusterCIDR: "10.244.0.0/16"}}}
	b, err := n.kubeProxyConfig("/k/kubeconfig")
	require.NoError(t, err)
	var cfg map[string]any
	require.NoError(t, json.Unmarshal(b, &cfg))
	require.Equal(t, "KubeProxyConfiguration", cfg["kind"])
	require.Equal(t, "nftables", cfg["mode"])
	require.Equal(t, "node2", cfg["hostnameOverride"])
	require.Equal(t, "10.244.0.0/16", cfg["clusterCIDR"])
	require.NotContains(t, cfg, "nodePortAddresses")
	require.Equal(t, map[string]any{"kubeconfig": "/k/kubeconfig"}, cfg["clientConnection"])
	ct := cfg["conntrack"].(map[string]any)
	require.EqualValues(t, 0, ct["maxPerCore"])
}
