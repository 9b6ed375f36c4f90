// Package apiv1 holds the JSON schema of version 1 of the antrea-agent API (served under /v1/ on
// the agent's unix socket) that antctl consumes. The schema is stable: fields may be added, never
// renamed or removed, and every field is always present (empty lists are [], not null). It is
// documented in docs/antctl.md.
package apiv1

// APIVersion is the value of every object's apiVersion.
const APIVersion = "v1"

// Paths of the API.
const (
	PathServiceMap = "/v1/servicemap"
	PathOVSFlows   = "/v1/ovsflows"
	PathAgentInfo  = "/v1/agentinfo"
	PathVersion    = "/v1/version"
	PathHealthz    = "/healthz"
	// PathLivez is the agent's liveness (KEP-3836 /livez semantics): the kubelet's liveness probe.
	PathLivez = "/livez"
)

// Query parameters.
const (
	// QueryNamespace selects one namespace of /v1/servicemap ("default" when empty).
	QueryNamespace = "namespace"
	// QueryName selects one Service of /v1/servicemap.
	QueryName = "name"
	// QueryAll ("true") selects every namespace of /v1/servicemap.
	QueryAll = "all"
	// QueryService ("namespace/name") selects one Service of /v1/ovsflows.
	QueryService = "service"
	// QueryNames ("false") makes /v1/ovsflows show tables and registers by number, as
	// ovs-ofctl --no-names does; by default they show by name.
	QueryNames = "names"
)

// ServiceMap is the answer of /v1/servicemap: one item per Service port and IP family that the
// agent programmed.
type ServiceMap struct {
	Kind       string        `json:"kind"` // "ServiceMap"
	APIVersion string        `json:"apiVersion"`
	Items      []ServicePort `json:"items"`
}

// ServicePort is one port of one Service in one IP family, as programmed.
type ServicePort struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// PortName is the port's name ("" for a single unnamed port).
	PortName string `json:"portName"`
	Port     uint16 `json:"port"`
	Protocol string `json:"protocol"` // TCP, UDP or SCTP
	IPFamily string `json:"ipFamily"` // IPv4 or IPv6
	// ClusterIPs are the Service's cluster IPs of this family.
	ClusterIPs []string `json:"clusterIPs"`
	NodePort   uint16   `json:"nodePort"` // 0: none
	// ExternalIPs are spec.externalIPs of this family (every one, when no row has their family).
	ExternalIPs []string `json:"externalIPs"`
	// LoadBalancerIngress are the status.loadBalancer.ingress entries with the agent's decision.
	LoadBalancerIngress   []LBIngress     `json:"loadBalancerIngress"`
	ExternalTrafficPolicy string          `json:"externalTrafficPolicy"` // Cluster or Local
	InternalTrafficPolicy string          `json:"internalTrafficPolicy"` // Cluster or Local
	SessionAffinity       SessionAffinity `json:"sessionAffinity"`
	Endpoints             EndpointCounts  `json:"endpoints"`
	// GroupID is the OVS select group of this port; 0 when it has no usable endpoint.
	GroupID uint32 `json:"groupID"`
	// Buckets is the number of endpoints in the group (those that receive new connections).
	Buckets int `json:"buckets"`
	// Flows is the number of flows carrying Cookie: the port's ClusterIP, ExternalIP, LB and
	// NodePort flows. `ovs-ofctl dump-flows <bridge> cookie=<cookie>/<cookieMask>` lists them.
	Flows int `json:"flows"`
	// EndpointFlows is the number of endpoint DNAT flows the port uses; they are shared with
	// every other Service port that selects the same endpoints.
	EndpointFlows int `json:"endpointFlows"`
	// Cookie is the cookie of the port's flows, in hex ("0x0" when it has none).
	Cookie string `json:"cookie"`
	// CookieMask selects the port's flows of any agent run.
	CookieMask string `json:"cookieMask"`
	// LastSync is when the Service was last programmed (RFC 3339).
	LastSync string `json:"lastSync"`
	// Problem is why the Service is not programmed as it asks (null when it is): OVS rejected
	// its flows (it keeps what it had and is retried with backoff) or another Service owns a
	// match it needs. Every port row of the Service shows the same Problem.
	Problem *Problem `json:"problem"`
}

// Problem reasons (proxy.ProblemOVSRejected, proxy.ProblemFlowConflict,
// proxy.ProblemAddressRefused and proxy.ProblemTooManyFlows).
const (
	ProblemOVSRejected    = "OVSRejected"
	ProblemFlowConflict   = "FlowConflict"
	ProblemAddressRefused = "AddressRefused"
	ProblemTooManyFlows   = "TooManyFlows"
)

// Problem is what keeps a Service from being programmed as it asks.
type Problem struct {
	// Reason is one of the Problem reasons, the reason of the Warning Event on the Service.
	Reason string `json:"reason"`
	// Message is the OVS error, or which Service the contested match is programmed for.
	Message string `json:"message"`
	// Since is when the problem started (RFC 3339).
	Since string `json:"since"`
	// Retries counts the attempts since then; NextRetry is when the next one is due (RFC 3339,
	// "" when none is scheduled).
	Retries   int    `json:"retries"`
	NextRetry string `json:"nextRetry"`
}

// LBIngress is one status.loadBalancer.ingress entry and whether the agent programs it.
type LBIngress struct {
	IP       string `json:"ip"`       // "" for a hostname-only ingress
	Hostname string `json:"hostname"` // "" when unset
	IPMode   string `json:"ipMode"`   // "VIP", "Proxy" or "" (unset)
	// Programmed and Reason are the decision of KEP-1860 Option 1, as the flows use it.
	Programmed bool   `json:"programmed"`
	Reason     string `json:"reason"`
}

// SessionAffinity is spec.sessionAffinity.
type SessionAffinity struct {
	Type           string `json:"type"`           // None or ClientIP
	TimeoutSeconds int32  `json:"timeoutSeconds"` // 0 with None
}

// EndpointCounts counts the port's endpoints of this family.
type EndpointCounts struct {
	Total       int `json:"total"`
	Local       int `json:"local"`
	Ready       int `json:"ready"`
	Serving     int `json:"serving"`
	Terminating int `json:"terminating"`
}

// OVSFlows is the answer of /v1/ovsflows.
type OVSFlows struct {
	Kind       string         `json:"kind"` // "OVSFlows"
	APIVersion string         `json:"apiVersion"`
	Items      []ServiceFlows `json:"items"`
}

// ServiceFlows are the flows and groups installed for one Service, in ovs-ofctl syntax with the
// pipeline's table and register names (or numbers, with QueryNames=false).
type ServiceFlows struct {
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	Flows     []string `json:"flows"`
	Groups    []string `json:"groups"`
}

// AgentInfo is the answer of /v1/agentinfo.
type AgentInfo struct {
	Kind            string      `json:"kind"` // "AgentInfo"
	APIVersion      string      `json:"apiVersion"`
	Version         string      `json:"version"`
	NodeName        string      `json:"nodeName"`
	OVSBridge       string      `json:"ovsBridge"`
	OVSDatapathType string      `json:"ovsDatapathType"`
	APISocket       string      `json:"apiSocket"`
	APITCPAddress   string      `json:"apiTCPAddress"`
	AntreaProxy     ProxyConfig `json:"antreaProxy"`
	OVS             OVSStatus   `json:"ovs"`
	Sync            SyncStatus  `json:"sync"`
	// Services and ServicePorts count what is programmed.
	Services     int `json:"services"`
	ServicePorts int `json:"servicePorts"`
}

// ProxyConfig is the antreaProxy configuration in effect.
type ProxyConfig struct {
	Enabled              bool     `json:"enabled"`
	ProxyAll             bool     `json:"proxyAll"`
	ProxyLoadBalancerIPs bool     `json:"proxyLoadBalancerIPs"`
	NodePortAddresses    []string `json:"nodePortAddresses"`
	SkipServices         []string `json:"skipServices"`
	ServiceProxyName     string   `json:"serviceProxyName"`
	MinSyncInterval      string   `json:"minSyncInterval"`
	FullSyncPeriod       string   `json:"fullSyncPeriod"`
}

// OVSStatus is what the agent knows of Open vSwitch.
type OVSStatus struct {
	Version   string `json:"version"` // "" when OVSDB does not record it
	Connected bool   `json:"connected"`
}

// SyncStatus is the state of the proxier's sync loop.
type SyncStatus struct {
	LastSync  string `json:"lastSync"`  // RFC 3339; "" before the first sync
	LastError string `json:"lastError"` // "" after a successful sync
	Syncs     int    `json:"syncs"`
	Round     uint16 `json:"round"`
}

// Version is the answer of /v1/version.
type Version struct {
	Kind       string `json:"kind"` // "Version"
	APIVersion string `json:"apiVersion"`
	Version    string `json:"version"`
	GoVersion  string `json:"goVersion"`
}

// Error is the body of every error answer.
type Error struct {
	Kind       string `json:"kind"` // "Error"
	APIVersion string `json:"apiVersion"`
	Code       int    `json:"code"`   // the HTTP status code
	Reason     string `json:"reason"` // e.g. NotFound, Forbidden, Unauthorized, BadRequest
	Message    string `json:"message"`
}
