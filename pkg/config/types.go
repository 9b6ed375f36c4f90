package config

import (
	"encoding/json"
	"fmt"
	"time"
)

// Default values applied by AgentConfig.Defaults.
const (
	DefaultOVSBridge       = "br-int"
	DefaultOVSDatapathType = DatapathSystem
	DefaultOVSRunDir       = "/var/run/openvswitch"
	// DefaultOVSOpenFlowBackend is ovsOpenFlowBackend when unset.
	DefaultOVSOpenFlowBackend = OpenFlowBackendNative
	DefaultHostGateway        = "antrea-gw0"
	DefaultAPISocket          = "/var/run/antrea/antrea-agent.sock"
	DefaultMinSyncInterval    = time.Second
	// DefaultHealthzBindAddress and DefaultMetricsBindAddress are kube-proxy's.
	DefaultHealthzBindAddress = "0.0.0.0:10256"
	DefaultMetricsBindAddress = "127.0.0.1:10249"
	DefaultFullSyncPeriod     = 30 * time.Second
	// DefaultProxyLoadBalancerIPs is antreaProxy.proxyLoadBalancerIPs when unset.
	DefaultProxyLoadBalancerIPs = true

	// NodeNameEnv is the environment variable that supplies the node name
	// when nodeName is not set in the file.
	NodeNameEnv = "NODE_NAME"
)

// Supported values of ovsOpenFlowBackend.
const (
	// OpenFlowBackendNative programs flows over one persistent OpenFlow 1.5 connection
	// (pkg/ovs/openflow/native); dumps, counts and conntrack flushes still run ovs-ofctl.
	OpenFlowBackendNative = "native"
	// OpenFlowBackendOfctl runs one ovs-ofctl bundle per change (pkg/ovs/openflow/ofctl).
	OpenFlowBackendOfctl = "ofctl"
)

// Supported values of ovsDatapathType.
const (
	DatapathSystem = "system"
	DatapathNetdev = "netdev"
)

// AgentConfig is the content of antrea-agent.conf.
type AgentConfig struct {
	// Kubeconfig is the path of a kubeconfig file; "" means in-cluster config.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// KubeAPIServerOverride, when set, is the kube-apiserver to talk to instead of the server of
	// the kubeconfig or of the in-cluster configuration (the kubernetes Service's ClusterIP):
	// "https://host:port", or host or host:port (https). Needed where no kube-proxy runs,
	// since the ClusterIP works only once an agent programmed it. Default "".
	KubeAPIServerOverride string `json:"kubeAPIServerOverride,omitempty"`
	// NodeName is the Kubernetes Node this agent runs on. Default: the
	// NODE_NAME environment variable, else the lower-cased host name.
	NodeName string `json:"nodeName,omitempty"`
	// OVSBridge is the OVS bridge the proxy programs. Default "br-int".
	OVSBridge string `json:"ovsBridge,omitempty"`
	// OVSDatapathType is "system" (default) or "netdev".
	OVSDatapathType string `json:"ovsDatapathType,omitempty"`
	// OVSRunDir holds db.sock and <bridge>.mgmt. Default "/var/run/openvswitch".
	OVSRunDir string `json:"ovsRunDir,omitempty"`
	// OVSOpenFlowBackend is how flows are programmed: "native" (default: one persistent
	// OpenFlow 1.5 connection) or "ofctl" (one ovs-ofctl process per change).
	OVSOpenFlowBackend string `json:"ovsOpenFlowBackend,omitempty"`
	// HostGateway is the name of the host gateway interface. Default "antrea-gw0".
	HostGateway string `json:"hostGateway,omitempty"`
	// APISocket is the unix socket of the agent API (used by antctl).
	// Default "/var/run/antrea/antrea-agent.sock".
	APISocket string `json:"apiSocket,omitempty"`
	// APITCPAddress, when set, also serves the agent API over TCP at this
	// "ip:port", which must be a loopback address (127.0.0.0/8 or ::1).
	// Requests on it need "Authorization: Bearer <token>" with the token of
	// APITokenFile. Default "": no TCP listener.
	APITCPAddress string `json:"apiTCPAddress,omitempty"`
	// APITokenFile is the file holding the bearer token of the TCP listener.
	// It must be owned by the agent's user and not accessible to group or
	// others (mode 0600 or stricter). Required with APITCPAddress.
	APITokenFile string `json:"apiTokenFile,omitempty"`
	// EnablePprof serves Go's runtime profiles (net/http/pprof) under /debug/pprof/ on the
	// agent API's listeners, with their access rules (root on the unix socket, the bearer
	// token over TCP), for profiling the agent where it runs. Default false (the zero value,
	// which Defaults keeps and Marshal omits).
	EnablePprof bool `json:"enablePprof,omitempty"`
	// AntreaProxy configures the service proxy.
	AntreaProxy AntreaProxyConfig `json:"antreaProxy"`
	// NodeNetwork configures the node data path (see NodeNetworkConfig); omitted means all
	// defaults.
	NodeNetwork NodeNetworkConfig `json:"nodeNetwork,omitzero"`
	// Announcer configures how this node holds the LoadBalancer IPs it announces (see
	// AnnouncerConfig); omitted means all defaults.
	Announcer AnnouncerConfig `json:"announcer"`
}

// AntreaProxyConfig is the antreaProxy section of antrea-agent.conf.
type AntreaProxyConfig struct {
	// Enable turns the proxy on. Default true; see Enabled.
	Enable *bool `json:"enable,omitempty"`
	// ProxyAll makes the proxy also handle NodePort traffic and ClusterIP
	// traffic from the host network. Default false.
	ProxyAll bool `json:"proxyAll"`
	// NodePortAddresses lists the CIDRs whose node IPs serve NodePorts;
	// empty means all node IPs. See NodePortPrefixes.
	NodePortAddresses []string `json:"nodePortAddresses"`
	// ExternalIPCIDRs, when not empty, lists the CIDRs Service externalIPs may come from:
	// an externalIP outside all of them is refused (never programmed, reported as the
	// Service's AddressRefused problem). Empty (the default) allows any externalIP that is not
	// refused otherwise. See ExternalIPPrefixes.
	ExternalIPCIDRs []string `json:"externalIPCIDRs"`
	// SkipServices lists Services the proxy ignores, each "namespace/name"
	// or a ClusterIP (IPv4 or IPv6). See ParseSkipServices.
	SkipServices []string `json:"skipServices"`
	// ProxyLoadBalancerIPs makes the proxy handle traffic to LoadBalancer
	// ingress IPs. Default true; see ProxyLoadBalancerIPsEnabled.
	ProxyLoadBalancerIPs *bool `json:"proxyLoadBalancerIPs,omitempty"`
	// ServiceProxyName, when set, restricts the proxy to Services labelled
	// service.kubernetes.io/service-proxy-name=<value>; when "", Services
	// carrying that label are ignored.
	ServiceProxyName string `json:"serviceProxyName"`
	// MinSyncInterval is the minimum time between two syncs. 0 (or
	// omitted) means the default, 1s.
	MinSyncInterval Duration `json:"minSyncInterval"`
	// FullSyncPeriod is the period of full resyncs. 0 (or omitted) means
	// the default, 30s.
	FullSyncPeriod Duration `json:"fullSyncPeriod"`
	// HealthzBindAddress is where /healthz and /livez (KEP-3836) are served,
	// host:port. Default "0.0.0.0:10256", kube-proxy's; "off" disables them.
	HealthzBindAddress string `json:"healthzBindAddress"`
	// MetricsBindAddress is where Prometheus /metrics is served, host:port.
	// Default "127.0.0.1:10249", kube-proxy's; "off" disables it.
	MetricsBindAddress string `json:"metricsBindAddress"`
	// LoadBalancerClass is the spec.loadBalancerClass antrea-controller serves (its own
	// loadBalancerClass). The agent announces (answers ARP/NDP for) a LoadBalancer IP only for
	// Services of this class or without a class, as the controller serves both. Default
	// "antrea-proxy.io/lb".
	LoadBalancerClass string `json:"loadBalancerClass"`
	// MaxFlowsPerService, MaxFlows and FlowRestoreTimeout bound what one Service, and all
	// Services, may cost and how long flow-restore-wait waits for Services (budget.go).
	MaxFlowsPerService int      `json:"maxFlowsPerService"`
	MaxFlows           int      `json:"maxFlows"`
	FlowRestoreTimeout Duration `json:"flowRestoreTimeout"`
	// RateLimits bounds the reject responder and session affinity (see RateLimitConfig);
	// omitted means all defaults, which its accessor WithDefaults applies.
	RateLimits RateLimitConfig `json:"rateLimits,omitzero"`
}

// Off disables a bind address.
const Off = "off"

// Enabled reports whether the proxy is enabled (default true).
func (p AntreaProxyConfig) Enabled() bool { return boolOr(p.Enable, true) }

// ProxyLoadBalancerIPsEnabled reports whether LoadBalancer ingress IPs are
// proxied (default DefaultProxyLoadBalancerIPs).
func (p AntreaProxyConfig) ProxyLoadBalancerIPsEnabled() bool {
	return boolOr(p.ProxyLoadBalancerIPs, DefaultProxyLoadBalancerIPs)
}

func boolOr(b *bool, def bool) bool {
	if b == nil {
		return def
	}
	return *b
}

// Duration is a time.Duration that (un)marshals as a Go duration string
// such as "500ms" or "30s".
type Duration struct {
	time.Duration
}

// MarshalJSON encodes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(d.Duration.String())
}

// UnmarshalJSON decodes a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"1s\", got %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a valid duration (e.g. \"500ms\", \"30s\")", s)
	}
	d.Duration = v
	return nil
}
