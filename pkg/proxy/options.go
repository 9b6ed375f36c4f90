package proxy

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/antrea-proxy/antrea-proxy/pkg/config"
	"github.com/antrea-proxy/antrea-proxy/pkg/model"
	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/observe"
	"github.com/antrea-proxy/antrea-proxy/pkg/reconciler"
)

// Bridge is what the proxier needs of the OpenFlow backend: Apply and dumps, flow counts (to
// verify what it installed and to see that OVS lost it) and table statistics (a cheap first look
// at each full resync). Both backends and the fake implement it.
type Bridge interface {
	of.Bridge
	of.FlowCounter
	of.TableCounter
}

// EventSink receives the Warning events the proxier raises about a Service (quarantined after
// OVS rejected its ops, losing a contested flow); pkg/agent turns them into Kubernetes Events.
type EventSink interface {
	Warning(svc types.NamespacedName, reason, message string)
}

// Options configure a Proxier.
type Options struct {
	// Round is this run's flow round (cookie bits 48-63), required and non-zero. The caller
	// saves it before New, so that a failed save can never make a later run reuse it.
	Round uint16
	// Events receives Warning events about Services; nil means none.
	Events EventSink
	// NodeName is this node; endpoints on it are local and its addresses serve NodePorts.
	NodeName string
	// ProxyLoadBalancerIPs is antreaProxy.proxyLoadBalancerIPs (KEP-1860 Option 1).
	ProxyLoadBalancerIPs bool
	// ServiceProxyName is antreaProxy.serviceProxyName.
	ServiceProxyName string
	// Skip is antreaProxy.skipServices.
	Skip model.SkipSet
	// NodePortAddresses restricts NodePorts to node addresses inside these prefixes; empty means
	// every node address.
	NodePortAddresses []netip.Prefix
	// NodePortVirtualIPs and ServiceVirtualIPs are the agent's virtual addresses of both
	// families (config.NodeNetworkConfig.VirtualIPs): no ExternalIP or LB IP may be one. When
	// both are nil, the configuration's defaults.
	NodePortVirtualIPs, ServiceVirtualIPs []netip.Addr
	// ExternalIPCIDRs is antreaProxy.externalIPCIDRs: when not empty, ExternalIPs outside them
	// are refused (model.AddrPolicy).
	ExternalIPCIDRs []netip.Prefix
	// Families are the IP families served; when neither is set, they follow this Node's
	// podCIDRs (else its InternalIPs).
	Families model.Families
	// GatewayOFPort and the gateway addresses feed the pipeline (see pipeline.NodeConfig).
	GatewayOFPort            uint32
	GatewayIPv4, GatewayIPv6 netip.Addr
	// RejectMeters and AffinityFlowsPerService feed the pipeline's rate limits (see
	// pipeline.NodeConfig); 0 disables each. The agent creates the meters and the reject groups
	// (pipeline.RejectLimit) before the first sync.
	RejectMeters, AffinityFlowsPerService uint32
	// MinSyncInterval and FullSyncPeriod drive the sync loop; 0 means the configuration's
	// default (config.DefaultMinSyncInterval, config.DefaultFullSyncPeriod: one source).
	MinSyncInterval time.Duration
	FullSyncPeriod  time.Duration
	// Clock is the time source; nil means the real clock.
	Clock clock.WithTicker
	// Observer is told about queued changes, node updates and every sync (metrics, health
	// checks); nil means none.
	Observer observe.Observer
	// Conntrack is ovs-vswitchd's connection tracker, which the UDP conntrack reconciler keeps
	// free of entries that no longer match what the Services serve (conntrack.go); nil means
	// no reconciliation.
	Conntrack ConntrackTable
	// MaxFlowsPerService and MaxFlows are antreaProxy.maxFlowsPerService and
	// antreaProxy.maxFlows, the flow budgets (budget.go): the most OpenFlow entries (flows and
	// group buckets, estimated before anything is built) one Service, and all the Services
	// admitted together, may cost; 0 means the configuration's default.
	MaxFlowsPerService, MaxFlows int
	// Reconciler is the bridge's reconciler (one per bridge, shared with the gateway and the
	// CNI server), of round Round; the proxier adds its writers (Writers) to it. Nil means one
	// of the proxier's own over the bridge given to New.
	Reconciler *reconciler.Reconciler
}

func (o *Options) defaults() {
	if o.MinSyncInterval == 0 {
		o.MinSyncInterval = config.DefaultMinSyncInterval
	}
	if o.FullSyncPeriod == 0 {
		o.FullSyncPeriod = config.DefaultFullSyncPeriod
	}
	if o.NodePortVirtualIPs == nil && o.ServiceVirtualIPs == nil {
		o.NodePortVirtualIPs, o.ServiceVirtualIPs = config.NodeNetworkConfig{}.VirtualIPs()
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.MaxFlowsPerService == 0 {
		o.MaxFlowsPerService = config.DefaultMaxFlowsPerService
	}
	if o.MaxFlows == 0 {
		o.MaxFlows = config.DefaultMaxFlows
	}
}

func (o *Options) validate() error {
	var errs []error
	if o.NodeName == "" {
		errs = append(errs, errors.New("proxy: NodeName is required"))
	}
	if o.Round == 0 {
		errs = append(errs, errors.New("proxy: Round is required (non-zero)"))
	}
	if o.FullSyncPeriod < o.MinSyncInterval {
		errs = append(errs, fmt.Errorf("proxy: FullSyncPeriod %v is shorter than MinSyncInterval %v", o.FullSyncPeriod, o.MinSyncInterval))
	}
	if o.MaxFlowsPerService < 0 || o.MaxFlows < 0 {
		errs = append(errs, fmt.Errorf("proxy: MaxFlowsPerService %d and MaxFlows %d must not be negative", o.MaxFlowsPerService, o.MaxFlows))
	}
	return errors.Join(errs...)
}
