package framework

import (
	"encoding/json"
	"testing"
	"time"

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
	b, err := n.kubeProxyConfig("/k/kubeconfig", KubeProxyOptions{})
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

// TestKubeProxyConfigSyncPeriods: v1alpha1 holds the sync periods per mode, so they must be in
// "nftables" (at the top level kube-proxy ignores them), defaulted or as given.
func TestKubeProxyConfigSyncPeriods(t *testing.T) {
	n := &Node{Name: "node2", s: &Sandbox{CP: &ControlPlane{ClusterCIDR: "10.244.0.0/16"}}}
	for _, tc := range []struct {
		opts          KubeProxyOptions
		sync, minSync string
	}{
		{KubeProxyOptions{}, "30s", "200ms"},
		{KubeProxyOptions{SyncPeriod: time.Minute, MinSyncPeriod: time.Second}, "1m0s", "1s"},
	} {
		b, err := n.kubeProxyConfig("/k/kubeconfig", tc.opts)
		require.NoError(t, err)
		var cfg map[string]any
		require.NoError(t, json.Unmarshal(b, &cfg))
		require.NotContains(t, cfg, "syncPeriod")
		require.NotContains(t, cfg, "minSyncPeriod")
		require.Equal(t, map[string]any{"syncPeriod": tc.sync, "minSyncPeriod": tc.minSync}, cfg["nftables"])
	}
}

// TestCheckKubeProxyLog: the lenient-decoding warning kube-proxy logs for an unknown field
// fails the start; an ordinary log does not.
func TestCheckKubeProxyLog(t *testing.T) {
	ok := "I1201 13:00:00.000000 1 server.go:1] \"Using iptables Proxier\"\nI1201 13:00:01 1 proxier.go:1] \"SyncProxyRules complete\"\n"
	require.NoError(t, checkKubeProxyLog([]byte(ok)))
	bad := ok + `I1201 13:00:00.1 1 options.go:502] "Using lenient decoding as strict decoding failed" err="strict decoding error: unknown field \"syncPeriod\""` + "\n"
	err := checkKubeProxyLog([]byte(bad))
	require.ErrorContains(t, err, `unknown field \"syncPeriod\"`)
}

// TestKubeProxySyncsFrom: v1.37 labels the gauges by IP family; the pair of the family furthest
// behind is returned, and unlabelled series (older releases) still read.
func TestKubeProxySyncsFrom(t *testing.T) {
	labelled := `# HELP kubeproxy_sync_proxy_rules_last_timestamp_seconds [ALPHA] The last time proxy rules were successfully synced
# TYPE kubeproxy_sync_proxy_rules_last_timestamp_seconds gauge
kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"} 1.7648e+09
kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds{ip_family="IPv4"} 1.7647e+09
kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv6"} 1.7649e+09
kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds{ip_family="IPv6"} 1.76495e+09
kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family="IPv4"} 3
`
	sync, queued, ok := syncsFrom([]byte(labelled), KubeProxyMetricsPrefix)
	require.True(t, ok)
	require.Equal(t, 1.7649e9, sync, "IPv6 has a change queued after its last sync")
	require.Equal(t, 1.76495e9, queued)

	sync, queued, ok = syncsFrom([]byte("kubeproxy_sync_proxy_rules_last_timestamp_seconds 20\nkubeproxy_sync_proxy_rules_last_queued_timestamp_seconds 10\n"), KubeProxyMetricsPrefix)
	require.True(t, ok)
	require.Equal(t, [2]float64{20, 10}, [2]float64{sync, queued})

	_, _, ok = syncsFrom([]byte("kubeproxy_sync_proxy_rules_duration_seconds_count 1\n"), KubeProxyMetricsPrefix)
	require.False(t, ok)

	// antrea-agent's gauges, read by their own prefix and not taken for kube-proxy's.
	agent := "antrea_proxy_sync_proxy_rules_last_timestamp_seconds 30\nantrea_proxy_sync_proxy_rules_last_queued_timestamp_seconds 25\n"
	sync, queued, ok = syncsFrom([]byte(agent), AntreaProxyMetricsPrefix)
	require.True(t, ok)
	require.Equal(t, [2]float64{30, 25}, [2]float64{sync, queued})
	_, _, ok = syncsFrom([]byte(agent), KubeProxyMetricsPrefix)
	require.False(t, ok)
}
