package config

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

func TestValidateSingleErrors(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(c *AgentConfig)
		want   string
	}{
		{"nodeName required", func(c *AgentConfig) { c.NodeName = "" },
			"nodeName: required (set it here or via the NODE_NAME environment variable)"},
		{"nodeName invalid", func(c *AgentConfig) { c.NodeName = "Node_1" },
			`nodeName: "Node_1" is not a valid Node name: a lowercase RFC 1123 subdomain`},
		{"kubeAPIServerOverride path", func(c *AgentConfig) { c.KubeAPIServerOverride = "https://10.0.0.1:6443/api" },
			`kubeAPIServerOverride: "https://10.0.0.1:6443/api" must be the apiserver's base URL, without path, query or fragment`},
		{"kubeAPIServerOverride scheme", func(c *AgentConfig) { c.KubeAPIServerOverride = "tcp://10.0.0.1:6443" },
			`kubeAPIServerOverride: "tcp://10.0.0.1:6443": scheme must be https or http`},
		{"ovsBridge required", func(c *AgentConfig) { c.OVSBridge = "" }, "ovsBridge: required"},
		{"ovsBridge too long", func(c *AgentConfig) { c.OVSBridge = "br-0123456789abc" },
			`ovsBridge: "br-0123456789abc" is 16 characters long; interface names are limited to 15`},
		{"ovsBridge slash", func(c *AgentConfig) { c.OVSBridge = "br/0" },
			`ovsBridge: "br/0" is not a valid interface name: it must not contain '/', ':' or whitespace`},
		{"ovsBridge dotdot", func(c *AgentConfig) { c.OVSBridge = ".." },
			`ovsBridge: ".." is not a valid interface name`},
		{"ovsDatapathType", func(c *AgentConfig) { c.OVSDatapathType = "foo" },
			`ovsDatapathType: "foo" must be "system" or "netdev"`},
		{"ovsOpenFlowBackend", func(c *AgentConfig) { c.OVSOpenFlowBackend = "rpc" },
			`ovsOpenFlowBackend: "rpc" must be "native" or "ofctl"`},
		{"ovsRunDir relative", func(c *AgentConfig) { c.OVSRunDir = "run/ovs" },
			`ovsRunDir: "run/ovs" must be an absolute path`},
		{"ovsRunDir required", func(c *AgentConfig) { c.OVSRunDir = "" }, "ovsRunDir: required"},
		{"hostGateway too long", func(c *AgentConfig) { c.HostGateway = "antrea-gateway-01" },
			`hostGateway: "antrea-gateway-01" is 17 characters long; interface names are limited to 15`},
		{"hostGateway space", func(c *AgentConfig) { c.HostGateway = "gw 0" },
			`hostGateway: "gw 0" is not a valid interface name: it must not contain '/', ':' or whitespace`},
		{"hostGateway equals bridge", func(c *AgentConfig) { c.HostGateway = c.OVSBridge },
			`hostGateway: "br-int" must differ from ovsBridge`},
		{"apiSocket relative", func(c *AgentConfig) { c.APISocket = "agent.sock" },
			`apiSocket: "agent.sock" must be an absolute path`},
		{"apiSocket too long", func(c *AgentConfig) { c.APISocket = "/" + strings.Repeat("a", 107) },
			"apiSocket: path is 108 bytes long; unix socket paths are limited to 107"},
		{"apiTCPAddress not loopback", func(c *AgentConfig) { c.APITCPAddress, c.APITokenFile = "0.0.0.0:10350", "/etc/antrea/token" },
			`apiTCPAddress: "0.0.0.0:10350" must be a loopback IP address (127.0.0.0/8 or ::1)`},
		{"apiTCPAddress node IP", func(c *AgentConfig) { c.APITCPAddress, c.APITokenFile = "192.168.1.5:10350", "/etc/antrea/token" },
			`apiTCPAddress: "192.168.1.5:10350" must be a loopback IP address`},
		{"apiTCPAddress host name", func(c *AgentConfig) { c.APITCPAddress, c.APITokenFile = "localhost:10350", "/etc/antrea/token" },
			`apiTCPAddress: "localhost:10350" must be a loopback IP address`},
		{"apiTCPAddress empty host", func(c *AgentConfig) { c.APITCPAddress, c.APITokenFile = ":10350", "/etc/antrea/token" },
			`apiTCPAddress: ":10350" must be a loopback IP address`},
		{"apiTCPAddress no port", func(c *AgentConfig) { c.APITCPAddress, c.APITokenFile = "127.0.0.1", "/etc/antrea/token" },
			`apiTCPAddress: "127.0.0.1" is not an "ip:port" address`},
		{"apiTCPAddress port zero", func(c *AgentConfig) { c.APITCPAddress, c.APITokenFile = "127.0.0.1:0", "/etc/antrea/token" },
			`apiTCPAddress: "127.0.0.1:0": port must be a number from 1 to 65535`},
		{"apiTCPAddress port too big", func(c *AgentConfig) { c.APITCPAddress, c.APITokenFile = "[::1]:70000", "/etc/antrea/token" },
			`apiTCPAddress: "[::1]:70000": port must be a number from 1 to 65535`},
		{"apiTokenFile missing", func(c *AgentConfig) { c.APITCPAddress = "127.0.0.1:10350" },
			"apiTokenFile: required when apiTCPAddress is set"},
		{"apiTokenFile relative", func(c *AgentConfig) { c.APITCPAddress, c.APITokenFile = "127.0.0.1:10350", "token" },
			`apiTokenFile: "token" must be an absolute path`},
		{"nodePortAddresses", func(c *AgentConfig) {
			c.AntreaProxy.NodePortAddresses = []string{"10.0.0.0/8", "10.0.0.0/33"}
		}, `antreaProxy.nodePortAddresses[1]: "10.0.0.0/33" is not a valid CIDR`},
		{"nodePortAddresses bare IP", func(c *AgentConfig) {
			c.AntreaProxy.NodePortAddresses = []string{"10.0.0.1"}
		}, `antreaProxy.nodePortAddresses[0]: "10.0.0.1" is not a valid CIDR`},
		{"skipServices three parts", func(c *AgentConfig) { c.AntreaProxy.SkipServices = []string{"a/b/c"} },
			`antreaProxy.skipServices[0]: "a/b/c" is neither "namespace/name" nor an IP address`},
		{"skipServices bad namespace", func(c *AgentConfig) { c.AntreaProxy.SkipServices = []string{"ok/svc", "Kube_System/dns"} },
			`antreaProxy.skipServices[1]: "Kube_System/dns": namespace "Kube_System" is invalid`},
		{"minSyncInterval zero", func(c *AgentConfig) { c.AntreaProxy.MinSyncInterval = dur(0) },
			"antreaProxy.minSyncInterval: must be > 0, got 0s"},
		{"minSyncInterval negative", func(c *AgentConfig) { c.AntreaProxy.MinSyncInterval = dur(-time.Second) },
			"antreaProxy.minSyncInterval: must be > 0, got -1s"},
		{"fullSyncPeriod zero", func(c *AgentConfig) { c.AntreaProxy.FullSyncPeriod = dur(0) },
			"antreaProxy.fullSyncPeriod: must be > 0, got 0s"},
		{"fullSyncPeriod below minSyncInterval", func(c *AgentConfig) {
			c.AntreaProxy.MinSyncInterval = dur(10 * time.Second)
			c.AntreaProxy.FullSyncPeriod = dur(5 * time.Second)
		}, "antreaProxy.fullSyncPeriod: 5s must be >= minSyncInterval (10s)"},
		{"loadBalancerClass without domain", func(c *AgentConfig) { c.AntreaProxy.LoadBalancerClass = "lb" },
			`antreaProxy.loadBalancerClass: "lb" must be prefixed with a domain`},
		{"loadBalancerClass invalid", func(c *AgentConfig) { c.AntreaProxy.LoadBalancerClass = "a/b/c" },
			`antreaProxy.loadBalancerClass: "a/b/c" is not a valid class`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			tt.mutate(c)
			lines := errorLines(c.Validate())
			require.Len(t, lines, 1, "errors: %q", lines)
			require.True(t, strings.HasPrefix(lines[0], tt.want), "got %q, want prefix %q", lines[0], tt.want)
		})
	}
}

func TestValidateAcceptsEdgeValues(t *testing.T) {
	c := validConfig()
	c.OVSBridge = "br-0123456789ab" // 15 characters
	c.OVSDatapathType = DatapathNetdev
	c.AntreaProxy.NodePortAddresses = []string{"10.0.0.1/24", "fd00::/64", "0.0.0.0/0"}
	c.AntreaProxy.ExternalIPCIDRs = []string{"192.0.2.1/24", "::ffff:198.51.100.0/120"}
	c.AntreaProxy.SkipServices = []string{"kube-system/kube-dns", "10.96.0.10", "fd00::a", "::ffff:10.0.0.1"}
	c.AntreaProxy.MinSyncInterval = dur(5 * time.Second)
	c.AntreaProxy.FullSyncPeriod = dur(5 * time.Second)
	require.NoError(t, c.Validate())

	for _, addr := range []string{"127.0.0.1:10350", "127.5.6.7:1", "[::1]:65535", "[::ffff:127.0.0.1]:80"} {
		c := validConfig()
		c.APITCPAddress, c.APITokenFile = addr, "/etc/antrea/api-token"
		require.NoError(t, c.Validate(), "apiTCPAddress %q", addr)
	}
	// A token file without a TCP listener is unused but harmless.
	c = validConfig()
	c.APITokenFile = "/etc/antrea/api-token"
	require.NoError(t, c.Validate())
}

func TestValidateReportsEverything(t *testing.T) {
	c := validConfig()
	c.NodeName = ""
	c.OVSDatapathType = "foo"
	c.OVSBridge = "a-very-long-bridge"
	c.AntreaProxy.NodePortAddresses = []string{"10.0.0.0/33", "fd00::/64", "bogus"}
	c.AntreaProxy.ExternalIPCIDRs = []string{"192.0.2.0/24", "192.0.2.1", "2001:db8::/129"}
	c.AntreaProxy.SkipServices = []string{"a/b/c", "ns/name"}
	c.AntreaProxy.MinSyncInterval = dur(-1)
	err := c.Validate()
	want := []string{
		"nodeName: required (set it here or via the NODE_NAME environment variable)",
		`ovsBridge: "a-very-long-bridge" is 18 characters long; interface names are limited to 15`,
		`ovsDatapathType: "foo" must be "system" or "netdev"`,
		`antreaProxy.nodePortAddresses[0]: "10.0.0.0/33" is not a valid CIDR`,
		`antreaProxy.nodePortAddresses[2]: "bogus" is not a valid CIDR`,
		`antreaProxy.externalIPCIDRs[1]: "192.0.2.1" is not a valid CIDR`,
		`antreaProxy.externalIPCIDRs[2]: "2001:db8::/129" is not a valid CIDR`,
		`antreaProxy.skipServices[0]: "a/b/c" is neither "namespace/name" nor an IP address`,
		"antreaProxy.minSyncInterval: must be > 0, got -1ns",
	}
	require.Empty(t, cmp.Diff(want, errorLines(err)))

	// Every leaf is a *FieldError carrying its path.
	var fe *FieldError
	require.True(t, errors.As(err, &fe))
	require.Equal(t, "nodeName", fe.Path)
}
