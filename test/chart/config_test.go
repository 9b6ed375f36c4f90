package chart

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/config"
)

// nodeEnv is the environment of an agent Pod: NODE_NAME from the downward API.
var nodeEnv = config.Env{Getenv: func(k string) string {
	if k == config.NodeNameEnv {
		return "node-a"
	}
	return ""
}}

func ptr[T any](v T) *T { return &v }

// defaultAgentConfig is what antrea-agent runs with for the chart's default values.
func defaultAgentConfig() *config.AgentConfig {
	return &config.AgentConfig{
		NodeName:           "node-a",
		OVSBridge:          "br-int",
		OVSDatapathType:    "system",
		OVSRunDir:          "/var/run/openvswitch",
		OVSOpenFlowBackend: "native",
		HostGateway:        "antrea-gw0",
		APISocket:          "/var/run/antrea/antrea-agent.sock",
		APITCPAddress:      "127.0.0.1:10350",
		APITokenFile:       "/var/run/antrea-api/token",
		AntreaProxy: config.AntreaProxyConfig{
			Enable:               ptr(true),
			NodePortAddresses:    []string{},
			ExternalIPCIDRs:      []string{},
			SkipServices:         []string{},
			ProxyLoadBalancerIPs: ptr(true),
			MinSyncInterval:      config.Duration{Duration: time.Second},
			FullSyncPeriod:       config.Duration{Duration: 30 * time.Second},
			HealthzBindAddress:   config.DefaultHealthzBindAddress,
			MetricsBindAddress:   config.DefaultMetricsBindAddress,
			LoadBalancerClass:    config.DefaultLoadBalancerClass,
			MaxFlowsPerService:   config.DefaultMaxFlowsPerService,
			MaxFlows:             config.DefaultMaxFlows,
			FlowRestoreTimeout:   config.Duration{Duration: config.DefaultFlowRestoreTimeout},
			RateLimits:           config.RateLimitConfig{}.WithDefaults(),
		},
		Announcer: config.AnnouncerConfig{EnableLease: ptr(true), LeaseNamespace: Namespace,
			LeaseDuration: config.Duration{Duration: 2 * time.Second}, RenewInterval: config.Duration{Duration: 500 * time.Millisecond},
			IdleRenewInterval: &config.Duration{Duration: 5 * time.Second},
			HandoverTimeout:   &config.Duration{Duration: 5 * time.Second}, GratuitousInterval: &config.Duration{Duration: 30 * time.Second}},
	}
}

// everyOptionValues sets every antreaProxy option (and the OVS ones) to a non-default value.
const everyOptionValues = `
kubeAPIServerOverride: "https://192.168.77.10:6443"
antreaProxy:
  enable: false
  proxyAll: true
  nodePortAddresses: ["192.168.0.0/16", "fd00:10::/64"]
  externalIPCIDRs: ["192.0.2.0/24"]
  skipServices: ["kube-system/kube-dns", "10.96.0.10"]
  proxyLoadBalancerIPs: false
  serviceProxyName: antrea-proxy
  minSyncInterval: 500ms
  fullSyncPeriod: 1m
  maxFlowsPerService: 20000
  maxFlows: 300000
  flowRestoreTimeout: 45s
  healthzBindAddress: "0.0.0.0:10266"
  metricsBindAddress: "off"
  rateLimits: {rejectMeterRate: 640, rejectMeterBurst: 64, rejectMeters: 64, rejectRate: 300, rejectBurst: 30,
    rejectSourceRate: 20, rejectSourceBurst: 5, rejectSources: 512, affinityFlowsPerService: 50, affinityFlowsTotal: 500}
ovs:
  bridge: br-test
  datapathType: netdev
  hostGateway: gw-test
  openFlowBackend: ofctl
agent:
  apiPort: 10444
controller:
  loadBalancerClass: example.com/lb
announcer:
  enableLease: false
  leaseDuration: 3s
  renewInterval: 1s
  idleRenewInterval: 10s
  handoverTimeout: 0s
  gratuitousInterval: 1m
`

// TestAgentConfParsesStrictly renders antrea-agent.conf and loads it with the agent's own strict
// loader and validator (pkg/config): unknown keys, wrong types and invalid values all fail.
func TestAgentConfParsesStrictly(t *testing.T) {
	h := NewHelm(t)
	valuesFile := filepath.Join(t.TempDir(), "every-option.yaml")
	require.NoError(t, os.WriteFile(valuesFile, []byte(everyOptionValues), 0o644))

	noLBIPs := defaultAgentConfig()
	noLBIPs.AntreaProxy.ProxyLoadBalancerIPs = ptr(false)
	every := &config.AgentConfig{
		KubeAPIServerOverride: "https://192.168.77.10:6443",
		NodeName:              "node-a", OVSBridge: "br-test", OVSDatapathType: "netdev", OVSRunDir: "/var/run/openvswitch",
		OVSOpenFlowBackend: "ofctl", HostGateway: "gw-test", APISocket: "/var/run/antrea/antrea-agent.sock",
		APITCPAddress: "127.0.0.1:10444", APITokenFile: "/var/run/antrea-api/token",
		AntreaProxy: config.AntreaProxyConfig{
			Enable:               ptr(false),
			ProxyAll:             true,
			NodePortAddresses:    []string{"192.168.0.0/16", "fd00:10::/64"},
			ExternalIPCIDRs:      []string{"192.0.2.0/24"},
			SkipServices:         []string{"kube-system/kube-dns", "10.96.0.10"},
			ProxyLoadBalancerIPs: ptr(false),
			ServiceProxyName:     "antrea-proxy",
			MinSyncInterval:      config.Duration{Duration: 500 * time.Millisecond},
			FullSyncPeriod:       config.Duration{Duration: time.Minute},
			HealthzBindAddress:   "0.0.0.0:10266",
			MetricsBindAddress:   "off",
			LoadBalancerClass:    "example.com/lb",
			MaxFlowsPerService:   20000,
			MaxFlows:             300000,
			FlowRestoreTimeout:   config.Duration{Duration: 45 * time.Second},
			RateLimits: config.RateLimitConfig{RejectMeterRate: 640, RejectMeterBurst: 64, RejectMeters: 64, RejectRate: 300, RejectBurst: 30,
				RejectSourceRate: 20, RejectSourceBurst: 5, RejectSources: 512, AffinityFlowsPerService: 50, AffinityFlowsTotal: 500},
		},
		Announcer: config.AnnouncerConfig{EnableLease: ptr(false), LeaseNamespace: Namespace,
			LeaseDuration: config.Duration{Duration: 3 * time.Second}, RenewInterval: config.Duration{Duration: time.Second},
			IdleRenewInterval: &config.Duration{Duration: 10 * time.Second},
			HandoverTimeout:   &config.Duration{}, GratuitousInterval: &config.Duration{Duration: time.Minute}},
	}
	for _, tc := range []struct {
		name string
		args []string
		want *config.AgentConfig
	}{
		{"Defaults", nil, defaultAgentConfig()},
		{"ProxyLoadBalancerIPsFalse", []string{"--set", "antreaProxy.proxyLoadBalancerIPs=false"}, noLBIPs},
		{"EveryOption", []string{"--values", valuesFile}, every},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conf := dataKey(t, render(t, h, tc.args...).configMap(t), "antrea-agent.conf")
			got, err := config.ParseWithEnv([]byte(conf), nodeEnv)
			require.NoError(t, err, "antrea-agent.conf rendered by the chart:\n%s", conf)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("antrea-agent.conf loads as (-want +got):\n%s\nfile:\n%s", diff, conf)
			}
		})
	}
}

// TestTyposFail checks that a mistake anywhere between the user and the agent is caught: a
// misspelt or mistyped value by the chart's schema, an invalid value by the agent's validator,
// and a misspelt key in the chart's template by the agent's strict loader (which is what
// TestAgentConfParsesStrictly relies on).
func TestTyposFail(t *testing.T) {
	h := NewHelm(t)
	t.Run("MisspeltValueKey", func(t *testing.T) {
		_, err := h.Template("", "--set", "antreaProxy.proxyLoadBalancerIP=false")
		require.ErrorContains(t, err, "additional properties 'proxyLoadBalancerIP' not allowed")
	})
	t.Run("MistypedValue", func(t *testing.T) {
		_, err := h.Template("", "--set-string", "antreaProxy.proxyLoadBalancerIPs=flase")
		require.ErrorContains(t, err, "/antreaProxy/proxyLoadBalancerIPs")
	})
	t.Run("APIServerOverrideWithPath", func(t *testing.T) {
		_, err := h.Template("", "--set", "kubeAPIServerOverride=https://10.0.0.1:6443/api")
		require.ErrorContains(t, err, "/kubeAPIServerOverride")
	})
	t.Run("MisspeltEnumValue", func(t *testing.T) {
		_, err := h.Template("", "--set", "ovs.datapathType=sytem")
		require.ErrorContains(t, err, "/ovs/datapathType")
	})
	t.Run("InvalidValueRejectedByAgent", func(t *testing.T) {
		// The schema only knows these are strings; the agent's validator knows CIDRs.
		conf := dataKey(t, render(t, h, "--set", "antreaProxy.nodePortAddresses={10.0.0.0/33}").configMap(t), "antrea-agent.conf")
		_, err := config.ParseWithEnv([]byte(conf), nodeEnv)
		var fe *config.FieldError
		require.ErrorAs(t, err, &fe)
		require.Equal(t, "antreaProxy.nodePortAddresses[0]", fe.Path)
	})
	t.Run("MisspeltTemplateKey", func(t *testing.T) {
		dir := copyChart(t, h.ChartDir())
		helpers := filepath.Join(dir, "templates", "_helpers.tpl")
		b, err := os.ReadFile(helpers)
		require.NoError(t, err)
		typo := strings.Replace(string(b), "  proxyLoadBalancerIPs: {{", "  proxyLoadBalancerIP: {{", 1)
		require.NotEqual(t, string(b), typo, "the template no longer renders proxyLoadBalancerIPs as expected")
		require.NoError(t, os.WriteFile(helpers, []byte(typo), 0o644))
		out, err := h.Template(dir)
		require.NoError(t, err)
		objs, err := Decode(out)
		require.NoError(t, err)
		conf := dataKey(t, rendering{raw: out, objs: objs}.configMap(t), "antrea-agent.conf")
		_, err = config.ParseWithEnv([]byte(conf), nodeEnv)
		var ue *config.UnknownFieldError
		require.True(t, errors.As(err, &ue), "a misspelt key in the template must fail the strict loader, got %v", err)
		require.Equal(t, "antreaProxy.proxyLoadBalancerIP", ue.Path)
	})
}

// TestControllerConfParsesStrictly loads the rendered antrea-controller.conf with
// antrea-controller's strict loader and validator.
func TestControllerConfParsesStrictly(t *testing.T) {
	h := NewHelm(t)
	t.Run("Defaults", func(t *testing.T) {
		conf := dataKey(t, render(t, h).configMap(t), "antrea-controller.conf")
		got, err := config.ParseController([]byte(conf))
		require.NoError(t, err, "antrea-controller.conf:\n%s", conf)
		want := &config.ControllerConfig{
			LoadBalancerClass: "antrea-proxy.io/lb",
			BindAddress:       config.DefaultControllerBindAddress,
			LeaderElection: config.LeaderElectionConfig{
				Enable: ptr(true), LeaseName: "antrea-controller", LeaseNamespace: Namespace,
				LeaseDuration: config.Duration{Duration: 15 * time.Second},
				RenewDeadline: config.Duration{Duration: 10 * time.Second},
				RetryPeriod:   config.Duration{Duration: 2 * time.Second},
			},
			ReleaseGracePeriod: &config.Duration{Duration: config.DefaultReleaseGracePeriod},
			AnnouncerLeases:    config.AnnouncerLeasesConfig{Enable: ptr(true), Namespace: Namespace},
			IPPools:            []config.IPPool{},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("antrea-controller.conf loads as (-want +got):\n%s", diff)
		}
	})
	t.Run("KubeAPIServerOverride", func(t *testing.T) {
		conf := dataKey(t, render(t, h, "--set", "kubeAPIServerOverride=10.0.0.1:6443").configMap(t), "antrea-controller.conf")
		got, err := config.ParseController([]byte(conf))
		require.NoError(t, err, "antrea-controller.conf:\n%s", conf)
		require.Equal(t, "10.0.0.1:6443", got.KubeAPIServerOverride)
	})
	t.Run("PoolsWithSelectorAndProxyMode", func(t *testing.T) {
		values := filepath.Join(t.TempDir(), "pools.yaml")
		require.NoError(t, os.WriteFile(values, []byte(`
lbPools:
  - name: vip
    cidrs: ["10.0.10.0/24", "fd00:10::/120"]
    nodeSelector:
      matchLabels: {"node-role.antrea-proxy.io/lb": ""}
  - name: edge
    ipMode: Proxy
    ranges: ["10.0.20.10-10.0.20.19"]
controller:
  loadBalancerClass: example.com/lb
  leaderElection: {enable: false}
`), 0o644))
		conf := dataKey(t, render(t, h, "--values", values).configMap(t), "antrea-controller.conf")
		got, err := config.ParseController([]byte(conf))
		require.NoError(t, err, "antrea-controller.conf:\n%s", conf)
		require.Equal(t, "example.com/lb", got.LoadBalancerClass)
		require.False(t, got.LeaderElection.Enabled())
		require.Len(t, got.IPPools, 2)
		require.Equal(t, map[string]string{"node-role.antrea-proxy.io/lb": ""}, got.IPPools[0].NodeSelector.MatchLabels)
		require.Equal(t, "Proxy", got.IPPools[1].IPMode)
	})
	t.Run("OverlappingPoolsRejected", func(t *testing.T) {
		conf := dataKey(t, render(t, h, "--set-json", `lbPools=[{"name":"a","cidrs":["10.0.0.0/24"]},{"name":"b","ranges":["10.0.0.5-10.0.0.6"]}]`).configMap(t), "antrea-controller.conf")
		_, err := config.ParseController([]byte(conf))
		require.ErrorContains(t, err, "overlaps")
	})
	t.Run("NoDefaultPool", func(t *testing.T) {
		// The chart ships no active pool: the controller runs without one.
		conf := dataKey(t, render(t, h).configMap(t), "antrea-controller.conf")
		require.Contains(t, conf, "\nipPools: []\n")
	})
	t.Run("PoolScopeAndGrace", func(t *testing.T) {
		conf := dataKey(t, render(t, h, "--set", "controller.releaseGracePeriod=0s", "--set-json",
			`lbPools=[{"name":"t","cidrs":["10.0.0.0/24"],"namespaces":["team-a"],"namespaceSelector":{"matchLabels":{"tier":"gold"}},`+
				`"serviceSelector":{"matchLabels":{"expose":"yes"}},"autoAssign":false,"allowCrossNamespaceSharing":true}]`).configMap(t), "antrea-controller.conf")
		got, err := config.ParseController([]byte(conf))
		require.NoError(t, err, "antrea-controller.conf:\n%s", conf)
		require.Equal(t, time.Duration(0), got.ReleaseGracePeriod.Duration)
		p := got.IPPools[0]
		require.Equal(t, []string{"team-a"}, p.Namespaces)
		require.Equal(t, map[string]string{"tier": "gold"}, p.NamespaceSelector.MatchLabels)
		require.Equal(t, map[string]string{"expose": "yes"}, p.ServiceSelector.MatchLabels)
		require.False(t, p.AutoAssigns())
		require.True(t, p.AllowCrossNamespaceSharing)
	})
	t.Run("SpecialRangeRejected", func(t *testing.T) {
		conf := dataKey(t, render(t, h, "--set-json", `lbPools=[{"name":"meta","cidrs":["169.254.169.254/32"]}]`).configMap(t), "antrea-controller.conf")
		_, err := config.ParseController([]byte(conf))
		require.ErrorContains(t, err, `pool "meta": 169.254.169.254/32 includes 169.254.0.0/16`)
	})
}

// copyChart copies the chart directory to a temporary directory so a test can modify it.
func copyChart(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "antrea-proxy")
	require.NoError(t, os.CopyFS(dst, os.DirFS(src)))
	return dst
}
