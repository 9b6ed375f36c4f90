package config

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

func TestDefaults(t *testing.T) {
	want := &AgentConfig{
		NodeName:           "node-1",
		OVSBridge:          "br-int",
		OVSDatapathType:    "system",
		OVSRunDir:          "/var/run/openvswitch",
		OVSOpenFlowBackend: "native",
		HostGateway:        "antrea-gw0",
		APISocket:          "/var/run/antrea/antrea-agent.sock",
		AntreaProxy: AntreaProxyConfig{
			Enable:               ptr(true),
			NodePortAddresses:    []string{},
			ExternalIPCIDRs:      []string{},
			SkipServices:         []string{},
			ProxyLoadBalancerIPs: ptr(true),
			MinSyncInterval:      dur(time.Second),
			FullSyncPeriod:       dur(30 * time.Second),
			HealthzBindAddress:   DefaultHealthzBindAddress,
			MetricsBindAddress:   DefaultMetricsBindAddress,
			LoadBalancerClass:    DefaultLoadBalancerClass,
			MaxFlowsPerService:   DefaultMaxFlowsPerService,
			MaxFlows:             DefaultMaxFlows,
			FlowRestoreTimeout:   dur(DefaultFlowRestoreTimeout),
		},
		Announcer: AnnouncerConfig{EnableLease: ptr(true), LeaseNamespace: "kube-system", LeaseDuration: dur(2 * time.Second),
			RenewInterval: dur(500 * time.Millisecond), IdleRenewInterval: &Duration{Duration: 5 * time.Second}, HandoverTimeout: &Duration{Duration: 5 * time.Second}, GratuitousInterval: &Duration{Duration: 30 * time.Second}},
	}
	c := &AgentConfig{}
	c.DefaultsFrom(fakeEnv("node-1", "host"))
	require.Empty(t, cmp.Diff(want, c))
	require.NoError(t, c.Validate())
}

func TestDefaultsKeepSetValues(t *testing.T) {
	set := &AgentConfig{
		Kubeconfig:         "/etc/kube.conf",
		NodeName:           "explicit",
		OVSBridge:          "br0",
		OVSDatapathType:    "netdev",
		OVSRunDir:          "/run/ovs",
		OVSOpenFlowBackend: "ofctl",
		HostGateway:        "gw0",
		APISocket:          "/run/a.sock",
		AntreaProxy: AntreaProxyConfig{
			Enable:               ptr(false),
			ProxyAll:             true,
			NodePortAddresses:    []string{"10.0.0.0/8"},
			ExternalIPCIDRs:      []string{"192.0.2.0/24"},
			SkipServices:         []string{"kube-system/kube-dns"},
			ProxyLoadBalancerIPs: ptr(false),
			ServiceProxyName:     "mine",
			MinSyncInterval:      dur(2 * time.Second),
			FullSyncPeriod:       dur(time.Minute),
			HealthzBindAddress:   DefaultHealthzBindAddress,
			MetricsBindAddress:   DefaultMetricsBindAddress,
			LoadBalancerClass:    DefaultLoadBalancerClass,
			MaxFlowsPerService:   1000,
			MaxFlows:             5000,
			FlowRestoreTimeout:   dur(10 * time.Second),
		},
		Announcer: AnnouncerConfig{EnableLease: ptr(false), LeaseNamespace: "antrea", LeaseDuration: dur(3 * time.Second),
			RenewInterval: dur(time.Second), IdleRenewInterval: &Duration{Duration: 5 * time.Second}, HandoverTimeout: &Duration{}, GratuitousInterval: &Duration{Duration: time.Minute}},
	}
	c := *set
	c.DefaultsFrom(fakeEnv("from-env", "host"))
	require.Empty(t, cmp.Diff(set, &c))
	require.False(t, c.AntreaProxy.Enabled())
	require.False(t, c.AntreaProxy.ProxyLoadBalancerIPsEnabled())
}

func TestDefaultNodeName(t *testing.T) {
	tests := []struct {
		name     string
		nodeEnv  string
		hostname string
		want     string
	}{
		{name: "NODE_NAME wins", nodeEnv: "node-a", hostname: "host-b", want: "node-a"},
		{name: "NODE_NAME trimmed", nodeEnv: "  node-a\n", hostname: "host-b", want: "node-a"},
		{name: "hostname fallback, lower-cased", hostname: " Host-B ", want: "host-b"},
		{name: "blank NODE_NAME falls back", nodeEnv: "  ", hostname: "host-b", want: "host-b"},
		{name: "nothing available", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &AgentConfig{}
			c.DefaultsFrom(fakeEnv(tt.nodeEnv, tt.hostname))
			require.Equal(t, tt.want, c.NodeName)
		})
	}
}

func TestDefaultsNilEnvFuncs(t *testing.T) {
	c := &AgentConfig{}
	c.DefaultsFrom(Env{})
	require.Equal(t, "", c.NodeName)
	require.EqualError(t, c.Validate(), "nodeName: required (set it here or via the NODE_NAME environment variable)")
}

func TestAccessorsUnset(t *testing.T) {
	var p AntreaProxyConfig
	require.True(t, p.Enabled())
	require.True(t, p.ProxyLoadBalancerIPsEnabled())
	p.Enable, p.ProxyLoadBalancerIPs = ptr(false), ptr(true)
	require.False(t, p.Enabled())
	require.True(t, p.ProxyLoadBalancerIPsEnabled())
}
