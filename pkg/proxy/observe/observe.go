package observe

import (
	"net/netip"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
)

// Observer is told what the proxier does. The proxier calls it from its own goroutines; an
// implementation must be safe for concurrent use and must not block.
type Observer interface {
	// QueuedUpdate is called when a Service, EndpointSlice or Node change that needs a sync was
	// recorded.
	QueuedUpdate()
	// NodeUpdated is called with this node's latest object.
	NodeUpdated(node *v1.Node)
	// SyncDone is called after every sync attempt, successful or not.
	SyncDone(r SyncResult)
}

// SyncResult is what one sync did.
type SyncResult struct {
	// Start is when the sync started and Duration how long it took.
	Start    time.Time
	Duration time.Duration
	// Err is nil when the flows were installed. After a failure nothing below describes a
	// change: the same Services are retried by the next sync.
	Err error
	// Full is true for a full resync (start-up and the periodic one).
	Full bool
	// ServiceChanges and EndpointChanges count the Services with a drained Service change and
	// those whose EndpointSlices changed.
	ServiceChanges, EndpointChanges int
	// TriggerTimes are the endpoints' last-change-trigger-time per changed Service (from the
	// tracker's Drain).
	TriggerTimes map[types.NamespacedName]time.Time
	// Services holds a summary for every Service this sync recomputed; nil means the Service is
	// no longer installed. Services not in the map are unchanged.
	Services map[types.NamespacedName]*ServiceSummary
	// Flows and Groups are the totals installed after the sync.
	Flows, Groups int
	// NodeAddresses are the node addresses that serve NodePorts (health check NodePorts listen
	// on them).
	NodeAddresses []netip.Addr
	// Conntrack is what the UDP conntrack reconciler did after this sync (zero when it did not
	// run).
	Conntrack ConntrackResult
}

// ConntrackResult is one run of the UDP conntrack reconciler.
type ConntrackResult struct {
	// Removed counts the stale entries deleted, by reason (proxy.StaleEndpointGone, ...).
	Removed map[string]int
	// Failures counts the dumps and deletions that failed (retried by the next run).
	Failures int
}

// ServiceSummary is what one Service has installed, as needed by metrics and health checks.
type ServiceSummary struct {
	// Ports counts the installed Service ports, once per IP family.
	Ports int
	// Endpoints counts endpoints over Ports (an endpoint used by two ports counts twice).
	Endpoints int
	// NoLocalInternal and NoLocalExternal count the Ports with internalTrafficPolicy=Local,
	// resp. externalTrafficPolicy=Local, and no usable local endpoint (ready, or serving and
	// terminating when none is ready, as KEP-1669 falls back).
	NoLocalInternal, NoLocalExternal int
	// HealthCheckNodePort is the Service's healthCheckNodePort when it has
	// externalTrafficPolicy=Local; 0 otherwise.
	HealthCheckNodePort uint16
	// LocalReady is the number of ready endpoints on this node: distinct addresses over all
	// ports, taking the larger family count so that a dual-stack pod counts once.
	LocalReady int
}

// PortEndpoints is one Service port in one family together with its endpoints; the input of
// Summarize. Endpoints of the other family are ignored.
type PortEndpoints struct {
	Port      model.ServicePort
	IPv6      bool
	Endpoints []model.Endpoint
}

// Summarize returns the summary of one Service from its installed ports, or nil when ports is
// empty (the Service is not installed).
func Summarize(ports []PortEndpoints) *ServiceSummary {
	if len(ports) == 0 {
		return nil
	}
	s := &ServiceSummary{}
	localReady := [2]map[netip.Addr]bool{{}, {}}
	for _, p := range ports {
		s.Ports++
		if p.Port.ExternalPolicyLocal && p.Port.HealthCheckNodePort != 0 {
			s.HealthCheckNodePort = p.Port.HealthCheckNodePort
		}
		usableLocal := false
		for _, ep := range p.Endpoints {
			if ep.IP.Is6() != p.IPv6 {
				continue
			}
			s.Endpoints++
			if !ep.Local {
				continue
			}
			if ep.Ready || (ep.Serving && ep.Terminating) {
				usableLocal = true
			}
			if ep.Ready {
				localReady[family(ep.IP)][ep.IP] = true
			}
		}
		if !usableLocal && p.Port.InternalPolicyLocal {
			s.NoLocalInternal++
		}
		if !usableLocal && p.Port.ExternalPolicyLocal {
			s.NoLocalExternal++
		}
	}
	s.LocalReady = max(len(localReady[0]), len(localReady[1]))
	return s
}

func family(ip netip.Addr) int {
	if ip.Is6() {
		return 1
	}
	return 0
}

// Observers calls each of its Observers in order.
type Observers []Observer

var _ Observer = Observers(nil)

// QueuedUpdate implements Observer.
func (o Observers) QueuedUpdate() {
	for _, x := range o {
		x.QueuedUpdate()
	}
}

// NodeUpdated implements Observer.
func (o Observers) NodeUpdated(node *v1.Node) {
	for _, x := range o {
		x.NodeUpdated(node)
	}
}

// SyncDone implements Observer.
func (o Observers) SyncDone(r SyncResult) {
	for _, x := range o {
		x.SyncDone(r)
	}
}
