package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

func TestParseEmptyYieldsDefaults(t *testing.T) {
	want := validConfig()
	for _, in := range []string{"", "\n", "# only a comment\n", "---\n", "{}", "antreaProxy: null\nkubeconfig:\n"} {
		c, err := ParseWithEnv([]byte(in), fakeEnv("node-1", "host"))
		require.NoError(t, err, "input %q", in)
		require.Empty(t, cmp.Diff(want, c), "input %q", in)
	}
}

func TestParseValues(t *testing.T) {
	in := `
kubeconfig: /etc/antrea/kubeconfig
nodeName: worker-3
ovsBridge: br0
ovsDatapathType: netdev
ovsRunDir: /run/openvswitch
hostGateway: gw0
apiSocket: /run/antrea/agent.sock
apiTCPAddress: 127.0.0.1:10350
apiTokenFile: /etc/antrea/api-token
enablePprof: true
antreaProxy:
  enable: false
  proxyAll: true
  nodePortAddresses: ["192.168.0.0/16", "fd00:10::/64"]
  externalIPCIDRs: ["192.0.2.0/24", "2001:db8::/64"]
  skipServices:
  - kube-system/kube-dns
  - 10.96.0.10
  proxyLoadBalancerIPs: false
  serviceProxyName: my-proxy
  minSyncInterval: 250ms
  fullSyncPeriod: 1m
  maxFlowsPerService: 20000
  maxFlows: 400000
  flowRestoreTimeout: 45s
ovsOpenFlowBackend: ofctl
`
	want := &AgentConfig{
		Kubeconfig:         "/etc/antrea/kubeconfig",
		NodeName:           "worker-3",
		OVSBridge:          "br0",
		OVSDatapathType:    "netdev",
		OVSRunDir:          "/run/openvswitch",
		OVSOpenFlowBackend: "ofctl",
		HostGateway:        "gw0",
		APISocket:          "/run/antrea/agent.sock",
		APITCPAddress:      "127.0.0.1:10350",
		APITokenFile:       "/etc/antrea/api-token",
		EnablePprof:        true,
		AntreaProxy: AntreaProxyConfig{
			Enable:               ptr(false),
			ProxyAll:             true,
			NodePortAddresses:    []string{"192.168.0.0/16", "fd00:10::/64"},
			ExternalIPCIDRs:      []string{"192.0.2.0/24", "2001:db8::/64"},
			SkipServices:         []string{"kube-system/kube-dns", "10.96.0.10"},
			ProxyLoadBalancerIPs: ptr(false),
			ServiceProxyName:     "my-proxy",
			MinSyncInterval:      dur(250 * time.Millisecond),
			FullSyncPeriod:       dur(time.Minute),
			HealthzBindAddress:   DefaultHealthzBindAddress,
			MetricsBindAddress:   DefaultMetricsBindAddress,
			LoadBalancerClass:    DefaultLoadBalancerClass,
			MaxFlowsPerService:   20000,
			MaxFlows:             400000,
			FlowRestoreTimeout:   dur(45 * time.Second),
		},
		Announcer: AnnouncerConfig{EnableLease: ptr(true), LeaseNamespace: "kube-system", LeaseDuration: dur(2 * time.Second),
			RenewInterval: dur(500 * time.Millisecond), IdleRenewInterval: &Duration{Duration: 5 * time.Second}, HandoverTimeout: &Duration{Duration: 5 * time.Second}, GratuitousInterval: &Duration{Duration: 30 * time.Second}},
	}
	c, err := ParseWithEnv([]byte(in), fakeEnv("from-env", "host"))
	require.NoError(t, err)
	require.Empty(t, cmp.Diff(want, c))
}

func TestParseNodeNameFromEnv(t *testing.T) {
	c, err := ParseWithEnv([]byte("ovsBridge: br0\n"), fakeEnv("env-node", "host"))
	require.NoError(t, err)
	require.Equal(t, "env-node", c.NodeName)

	c, err = ParseWithEnv([]byte("nodeName: file-node\n"), fakeEnv("env-node", "host"))
	require.NoError(t, err)
	require.Equal(t, "file-node", c.NodeName)

	_, err = ParseWithEnv(nil, fakeEnv("", ""))
	require.EqualError(t, err, "nodeName: required (set it here or via the NODE_NAME environment variable)")
}

func TestParseDecodeErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{
			name: "unknown top-level key",
			in:   "nodeName: node-1\nfoo: 1\n",
			want: []string{`unknown field "foo"`},
		},
		{
			name: "unknown nested key with suggestion",
			in:   "antreaProxy:\n  proxyLoadBalancerIP: false\n",
			want: []string{`unknown field "antreaProxy.proxyLoadBalancerIP" (did you mean "proxyLoadBalancerIPs"?)`},
		},
		{
			name: "keys are case-sensitive",
			in:   "NodeName: n\nantreaProxy:\n  proxyall: true\n",
			want: []string{
				`unknown field "NodeName" (did you mean "nodeName"?)`,
				`unknown field "antreaProxy.proxyall" (did you mean "proxyAll"?)`,
			},
		},
		{
			name: "several unknown keys, sorted per level",
			in:   "zzz: 1\nantreaProxy:\n  b: 1\n  a: 2\naaa: 3\n",
			want: []string{
				`unknown field "aaa"`,
				`unknown field "antreaProxy.a"`,
				`unknown field "antreaProxy.b"`,
				`unknown field "zzz"`,
			},
		},
		{
			name: "bool field given a string",
			in:   "antreaProxy:\n  proxyAll: maybe\n",
			want: []string{`antreaProxy.proxyAll: expected a boolean (true or false), got string "maybe"`},
		},
		{
			name: "pointer bool field given a number",
			in:   "antreaProxy:\n  enable: 1\n",
			want: []string{`antreaProxy.enable: expected a boolean (true or false), got number 1`},
		},
		{
			name: "string field given a number",
			in:   "nodeName: 1234\n",
			want: []string{`nodeName: expected a string (quote the value), got number 1234`},
		},
		{
			name: "string field given a YAML 1.1 boolean",
			in:   "antreaProxy:\n  serviceProxyName: yes\n",
			want: []string{`antreaProxy.serviceProxyName: expected a string (quote the value: unquoted yes/no/on/off/y/n are YAML booleans), got boolean true`},
		},
		{
			name: "unquoted n is a YAML 1.1 boolean",
			in:   "nodeName: n\n",
			want: []string{`nodeName: expected a string (quote the value: unquoted yes/no/on/off/y/n are YAML booleans), got boolean false`},
		},
		{
			name: "list field given a string",
			in:   "antreaProxy:\n  nodePortAddresses: 10.0.0.0/8\n",
			want: []string{`antreaProxy.nodePortAddresses: expected a list, got string "10.0.0.0/8"`},
		},
		{
			name: "list element of the wrong type",
			in:   "antreaProxy:\n  skipServices: [ns/a, {x: 1}]\n",
			want: []string{`antreaProxy.skipServices[1]: expected a string (quote the value), got a mapping`},
		},
		{
			name: "section given a scalar",
			in:   "antreaProxy: true\n",
			want: []string{`antreaProxy: expected a mapping, got boolean true`},
		},
		{
			name: "duration given a number",
			in:   "antreaProxy:\n  minSyncInterval: 5\n",
			want: []string{`antreaProxy.minSyncInterval: expected a duration string such as "1s", got number 5`},
		},
		{
			name: "duration unparsable",
			in:   "antreaProxy:\n  fullSyncPeriod: 30 seconds\n",
			want: []string{`antreaProxy.fullSyncPeriod: "30 seconds" is not a valid duration (e.g. "500ms", "30s")`},
		},
		{
			name: "top level is a list",
			in:   "- a\n- b\n",
			want: []string{`(top level): expected a mapping, got a list`},
		},
		{
			name: "unknown and type errors together",
			in:   "ovsBridge: [x]\nbogus: 1\nantreaProxy:\n  proxyAll: 3\n  extra: {}\n",
			want: []string{
				`antreaProxy.extra`,
				`antreaProxy.proxyAll: expected a boolean (true or false), got number 3`,
				`unknown field "bogus"`,
				`ovsBridge: expected a string (quote the value), got a list`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseWithEnv([]byte(tt.in), fakeEnv("node-1", ""))
			require.Nil(t, c)
			lines := errorLines(err)
			require.Len(t, lines, len(tt.want), "errors: %q", lines)
			for i := range tt.want {
				require.Contains(t, lines[i], tt.want[i])
			}
		})
	}
}

func TestParseUnknownFieldErrorType(t *testing.T) {
	_, err := ParseWithEnv([]byte("antreaProxy:\n  nodePortAddress: []\n"), fakeEnv("n", ""))
	var ufe *UnknownFieldError
	require.True(t, errors.As(err, &ufe))
	require.Equal(t, UnknownFieldError{Path: "antreaProxy.nodePortAddress", Suggestion: "nodePortAddresses"}, *ufe)
}

func TestParseYAMLErrors(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"syntax", "nodeName: [unclosed\n", "parsing antrea-agent config as YAML"},
		{"duplicate key", "nodeName: a\nnodeName: b\n", `key "nodeName" already set`},
		{"nested duplicate key", "antreaProxy:\n  proxyAll: true\n  proxyAll: false\n", `key "proxyAll" already set`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseWithEnv([]byte(tt.in), fakeEnv("n", ""))
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestParseDecodesThenValidates(t *testing.T) {
	// Decoding succeeded, so every validation problem comes back together.
	in := "ovsDatapathType: foo\nantreaProxy:\n  nodePortAddresses: [10.0.0.0/33]\n  minSyncInterval: -1s\n"
	_, err := ParseWithEnv([]byte(in), fakeEnv("", ""))
	want := []string{
		"nodeName: required (set it here or via the NODE_NAME environment variable)",
		`ovsDatapathType: "foo" must be "system" or "netdev"`,
		`antreaProxy.nodePortAddresses[0]: "10.0.0.0/33" is not a valid CIDR`,
		"antreaProxy.minSyncInterval: must be > 0, got -1s",
	}
	require.Empty(t, cmp.Diff(want, errorLines(err)))
}

func TestExampleFileLoads(t *testing.T) {
	c, err := LoadWithEnv(filepath.Join("testdata", "antrea-agent.conf"), fakeEnv("node-1", ""))
	require.NoError(t, err)
	// The example documents the defaults, so it must load to exactly them.
	require.Empty(t, cmp.Diff(validConfig(), c))

	// Every option of the schema appears in the example.
	data, err := os.ReadFile(filepath.Join("testdata", "antrea-agent.conf"))
	require.NoError(t, err)
	for _, key := range []string{"kubeconfig", "nodeName", "ovsBridge", "ovsDatapathType", "ovsRunDir", "hostGateway", "apiSocket", "apiTCPAddress", "apiTokenFile"} {
		require.Contains(t, string(data), "\n"+key+":", "top-level option %q", key)
	}
	for _, key := range []string{"enable", "proxyAll", "nodePortAddresses", "externalIPCIDRs", "skipServices", "proxyLoadBalancerIPs", "serviceProxyName", "minSyncInterval", "fullSyncPeriod"} {
		require.Contains(t, string(data), "\n  "+key+":", "antreaProxy option %q", key)
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := LoadWithEnv(filepath.Join(dir, "missing.conf"), fakeEnv("n", ""))
	require.ErrorIs(t, err, os.ErrNotExist)

	bad := filepath.Join(dir, "bad.conf")
	require.NoError(t, os.WriteFile(bad, []byte("ovsDatapathType: foo\n"), 0o600))
	_, err = LoadWithEnv(bad, fakeEnv("n", ""))
	require.ErrorContains(t, err, "loading antrea-agent config "+bad+`: ovsDatapathType: "foo" must be`)
	var fe *FieldError
	require.True(t, errors.As(err, &fe))
	require.Equal(t, "ovsDatapathType", fe.Path)
}

func TestMarshalRoundTrip(t *testing.T) {
	configs := map[string]*AgentConfig{
		"defaults": validConfig(),
		"everything set": {
			Kubeconfig:         "/etc/kube.conf",
			NodeName:           "worker-3",
			OVSBridge:          "br0",
			OVSDatapathType:    "netdev",
			OVSRunDir:          "/run/ovs",
			OVSOpenFlowBackend: "ofctl",
			HostGateway:        "gw0",
			APISocket:          "/run/a.sock",
			APITCPAddress:      "[::1]:10350",
			APITokenFile:       "/etc/antrea/api-token",
			AntreaProxy: AntreaProxyConfig{
				Enable:               ptr(false),
				ProxyAll:             true,
				NodePortAddresses:    []string{"10.0.0.0/8", "fd00::/64"},
				ExternalIPCIDRs:      []string{"198.51.100.0/24"},
				SkipServices:         []string{"kube-system/kube-dns", "10.96.0.10", "fd00::a"},
				ProxyLoadBalancerIPs: ptr(false),
				ServiceProxyName:     "yes", // must stay a string, not become a YAML boolean
				MinSyncInterval:      dur(1500 * time.Millisecond),
				FullSyncPeriod:       dur(90 * time.Minute),
				HealthzBindAddress:   DefaultHealthzBindAddress,
				MetricsBindAddress:   DefaultMetricsBindAddress,
				LoadBalancerClass:    DefaultLoadBalancerClass,
				MaxFlowsPerService:   7,
				MaxFlows:             70,
				FlowRestoreTimeout:   dur(5 * time.Second),
			},
			Announcer: AnnouncerConfig{EnableLease: ptr(false), LeaseNamespace: "antrea", LeaseDuration: dur(3 * time.Second),
				RenewInterval: dur(time.Second), IdleRenewInterval: &Duration{Duration: 5 * time.Second}, HandoverTimeout: &Duration{}, GratuitousInterval: &Duration{Duration: time.Minute}},
		},
	}
	for name, c := range configs {
		t.Run(name, func(t *testing.T) {
			out, err := c.Marshal()
			require.NoError(t, err)
			got, err := ParseWithEnv(out, fakeEnv("other-node", ""))
			require.NoError(t, err, "YAML:\n%s", out)
			require.Empty(t, cmp.Diff(c, got), "YAML:\n%s", out)
		})
	}
}

func TestMarshalOutput(t *testing.T) {
	out, err := validConfig().Marshal()
	require.NoError(t, err)
	want := `announcer:
  enableLease: true
  gratuitousInterval: 30s
  handoverTimeout: 5s
  idleRenewInterval: 5s
  leaseDuration: 2s
  leaseNamespace: kube-system
  renewInterval: 500ms
antreaProxy:
  enable: true
  externalIPCIDRs: []
  flowRestoreTimeout: 30s
  fullSyncPeriod: 30s
  healthzBindAddress: 0.0.0.0:10256
  loadBalancerClass: antrea-proxy.io/lb
  maxFlows: 1000000
  maxFlowsPerService: 100000
  metricsBindAddress: 127.0.0.1:10249
  minSyncInterval: 1s
  nodePortAddresses: []
  proxyAll: false
  proxyLoadBalancerIPs: true
  serviceProxyName: ""
  skipServices: []
apiSocket: /var/run/antrea/antrea-agent.sock
hostGateway: antrea-gw0
nodeName: node-1
ovsBridge: br-int
ovsDatapathType: system
ovsOpenFlowBackend: native
ovsRunDir: /var/run/openvswitch
`
	require.Empty(t, cmp.Diff(want, string(out)))
	require.False(t, strings.Contains(string(out), "kubeconfig"), "empty kubeconfig is omitted")
}

func TestProcessEnvNodeName(t *testing.T) {
	// Parse, Load and Defaults read the real process environment.
	t.Setenv(NodeNameEnv, "process-node")

	c, err := Parse(nil)
	require.NoError(t, err)
	require.Equal(t, "process-node", c.NodeName)

	c, err = Load(filepath.Join("testdata", "antrea-agent.conf"))
	require.NoError(t, err)
	require.Equal(t, "process-node", c.NodeName)

	c = &AgentConfig{}
	c.Defaults()
	require.Equal(t, "process-node", c.NodeName)
}

func TestDurationJSON(t *testing.T) {
	var d Duration
	require.NoError(t, d.UnmarshalJSON([]byte(`"1m30s"`)))
	require.Equal(t, 90*time.Second, d.Duration)
	require.EqualError(t, d.UnmarshalJSON([]byte(`5`)), `duration must be a string such as "1s", got 5`)
	require.EqualError(t, d.UnmarshalJSON([]byte(`"5"`)), `"5" is not a valid duration (e.g. "500ms", "30s")`)
	out, err := Duration{Duration: 1500 * time.Millisecond}.MarshalJSON()
	require.NoError(t, err)
	require.Equal(t, `"1.5s"`, string(out))
}
