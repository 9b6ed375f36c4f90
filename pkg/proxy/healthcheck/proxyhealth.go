package healthcheck

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/antrea-proxy/antrea-proxy/pkg/httpserver"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/observe"
)

// DefaultBindAddress is where kube-proxy serves /healthz and /livez by default.
const DefaultBindAddress = "0.0.0.0:10256"

// ToBeDeletedTaint is the taint the cluster autoscaler puts on a Node it is about to remove.
const ToBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"

// DefaultOVSDisconnectGrace is how long the OpenFlow connection to OVS may stay down before
// ProxyHealth reports the agent unhealthy.
const DefaultOVSDisconnectGrace = 60 * time.Second

// ProxyHealth tracks whether the proxier keeps the data plane up to date, with kube-proxy's
// semantics: QueuedUpdate marks the oldest change not yet synced, Updated (a successful sync)
// clears it. The proxier is healthy when nothing is pending or the oldest pending change is
// younger than the timeout (2×fullSyncPeriod), and the OpenFlow connection to OVS (reported with
// WatchOVS) has not been down for longer than the grace period.
type ProxyHealth struct {
	clock   clock.PassiveClock
	timeout time.Duration
	// ovsGrace is how long OVS may be disconnected while the proxier stays healthy.
	ovsGrace time.Duration

	mu sync.RWMutex
	// lastUpdated is the last successful sync; oldestPending the first change queued after it
	// (zero when none is pending).
	lastUpdated   time.Time
	oldestPending time.Time
	// nodeEligible is false while the Node is being deleted or tainted for deletion.
	nodeEligible bool
	// ovs is the OpenFlow connection to OVS (WatchOVS); nil counts as connected.
	ovs OVSConnection
}

// Option configures a ProxyHealth.
type Option func(*ProxyHealth)

// WithOVSDisconnectGrace sets how long the OpenFlow connection to OVS may stay down before the
// proxier is reported unhealthy; 0 or less keeps DefaultOVSDisconnectGrace.
func WithOVSDisconnectGrace(d time.Duration) Option {
	return func(h *ProxyHealth) {
		if d > 0 {
			h.ovsGrace = d
		}
	}
}

var _ observe.Observer = (*ProxyHealth)(nil)

// NewProxyHealth returns a ProxyHealth that reports stale data after 2×fullSyncPeriod. clk nil
// means the real clock. It starts healthy, node-eligible (like kube-proxy's) and connected to OVS.
func NewProxyHealth(fullSyncPeriod time.Duration, clk clock.PassiveClock, opts ...Option) *ProxyHealth {
	if clk == nil {
		clk = clock.RealClock{}
	}
	h := &ProxyHealth{clock: clk, timeout: 2 * fullSyncPeriod, ovsGrace: DefaultOVSDisconnectGrace, nodeEligible: true}
	for _, o := range opts {
		o(h)
	}
	return h
}

// OVSConnection is the OpenFlow connection to OVS as ProxyHealth reads it (the agent's
// connection monitor): whether it is up, and since when it has been in that state (when it was
// lost, while it is down; never the zero time: ofconn.Monitor counts from its creation until
// its first connection).
type OVSConnection interface {
	Connected() (bool, time.Time)
}

// WatchOVS makes the health read the OpenFlow connection's state from c whenever it is asked,
// so that nothing has to poll the connection to keep the health current. Until it is called,
// and with nil, OVS counts as connected.
func (h *ProxyHealth) WatchOVS(c OVSConnection) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ovs = c
}

// ovsDownSince is when the OpenFlow connection was lost; zero while it is up (or not watched).
func (h *ProxyHealth) ovsDownSince() time.Time {
	h.mu.RLock()
	c := h.ovs
	h.mu.RUnlock()
	if c == nil {
		return time.Time{}
	}
	if up, since := c.Connected(); !up {
		return since
	}
	return time.Time{}
}

// QueuedUpdate records that a change waits for a sync; only the oldest pending one counts.
func (h *ProxyHealth) QueuedUpdate() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.oldestPending.IsZero() {
		h.oldestPending = h.clock.Now()
	}
}

// Updated records a successful sync: nothing is pending any more.
func (h *ProxyHealth) Updated() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.oldestPending = time.Time{}
	h.lastUpdated = h.clock.Now()
}

// SyncNode records whether node may receive traffic: not when it has a deletionTimestamp or
// the ToBeDeletedByClusterAutoscaler taint. A nil node is ignored.
func (h *ProxyHealth) SyncNode(node *v1.Node) {
	if node == nil {
		return
	}
	eligible := node.DeletionTimestamp == nil
	for _, t := range node.Spec.Taints {
		if t.Key == ToBeDeletedTaint {
			eligible = false
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if eligible != h.nodeEligible {
		klog.InfoS("Node eligibility for load-balanced traffic changed", "node", node.Name, "eligible", eligible)
	}
	h.nodeEligible = eligible
}

// IsHealthy reports the proxier's own health, ignoring the Node (what /livez reports).
func (h *ProxyHealth) IsHealthy() bool {
	st := h.state()
	return st.healthy
}

// NodeEligible reports whether the Node may receive load-balanced traffic.
func (h *ProxyHealth) NodeEligible() bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.nodeEligible
}

// healthState is the proxier's health at one instant.
type healthState struct {
	healthy          bool
	lastUpdated, now time.Time
	ovsDownSince     time.Time
	reason           string
}

func (h *ProxyHealth) state() healthState {
	down := h.ovsDownSince() // read before h.mu: the connection has its own lock
	h.mu.RLock()
	defer h.mu.RUnlock()
	st := healthState{healthy: true, lastUpdated: h.lastUpdated, now: h.clock.Now(), ovsDownSince: down}
	if !h.oldestPending.IsZero() && st.now.Sub(h.oldestPending) >= h.timeout {
		st.healthy = false
		st.reason = fmt.Sprintf("a change has waited %s for a sync (limit %s)", st.now.Sub(h.oldestPending).Round(time.Second), h.timeout)
	}
	if !down.IsZero() && st.now.Sub(down) >= h.ovsGrace {
		st.healthy = false
		if st.reason != "" {
			st.reason += "; "
		}
		st.reason += fmt.Sprintf("the OpenFlow connection to OVS has been down for %s (limit %s)",
			st.now.Sub(down).Round(time.Second), h.ovsGrace)
	}
	return st
}

// NodeUpdated implements observe.Observer.
func (h *ProxyHealth) NodeUpdated(node *v1.Node) { h.SyncNode(node) }

// SyncDone implements observe.Observer: a successful sync is an update.
func (h *ProxyHealth) SyncDone(r observe.SyncResult) {
	if r.Err == nil {
		h.Updated()
	}
}

// healthResponse is the body of /healthz and /livez: kube-proxy's fields, then the OVS
// connection and, when unhealthy, why.
type healthResponse struct {
	LastUpdated  time.Time `json:"lastUpdated"`
	CurrentTime  time.Time `json:"currentTime"`
	NodeEligible *bool     `json:"nodeEligible,omitempty"`
	// OVSConnected is false while the OpenFlow connection to OVS is down, since
	// OVSDisconnectedSince.
	OVSConnected         bool       `json:"ovsConnected"`
	OVSDisconnectedSince *time.Time `json:"ovsDisconnectedSince,omitempty"`
	// Reason says why the proxier is unhealthy ("" when healthy).
	Reason string `json:"reason,omitempty"`
}

func (st healthState) response() healthResponse {
	r := healthResponse{LastUpdated: st.lastUpdated, CurrentTime: st.now, OVSConnected: st.ovsDownSince.IsZero(), Reason: st.reason}
	if !st.ovsDownSince.IsZero() {
		since := st.ovsDownSince
		r.OVSDisconnectedSince = &since
	}
	return r
}

// HealthzHandler serves /healthz: 200 when the proxier is healthy and the Node is eligible,
// 503 otherwise.
func (h *ProxyHealth) HealthzHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		st := h.state()
		eligible := h.NodeEligible()
		body := st.response()
		body.NodeEligible = &eligible
		if !eligible {
			if body.Reason != "" {
				body.Reason += "; "
			}
			body.Reason += "the Node is being deleted or is tainted for deletion"
		}
		h.respond(w, st.healthy && eligible, body)
	})
}

// LivezHandler serves /livez (KEP-3836): 200 when the proxier is healthy, whatever the Node's
// state; 503 when a change has waited too long for a sync or the OpenFlow connection to OVS has
// been down longer than the grace period, with the reason in the body.
func (h *ProxyHealth) LivezHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		st := h.state()
		h.respond(w, st.healthy, st.response())
	})
}

func (h *ProxyHealth) respond(w http.ResponseWriter, healthy bool, body healthResponse) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	code := http.StatusServiceUnavailable
	if healthy {
		code = http.StatusOK
		// As kube-proxy: a healthy proxier reports lastUpdated as now.
		body.LastUpdated = body.CurrentTime
	}
	w.WriteHeader(code)
	if err := json.NewEncoder(w).Encode(body); err != nil {
		klog.V(4).InfoS("Writing health response failed", "err", err)
	}
}

// Mux returns a ServeMux with /healthz and /livez.
func (h *ProxyHealth) Mux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/healthz", h.HealthzHandler())
	mux.Handle("/livez", h.LivezHandler())
	return mux
}

// Serve listens on addr (e.g. DefaultBindAddress) and serves /healthz and /livez, with lim's
// timeouts and connection cap (nil: the defaults), until ctx is done.
func (h *ProxyHealth) Serve(ctx context.Context, addr string, lim *httpserver.Limiter) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("health server: listening on %s: %w", addr, err)
	}
	return httpserver.Serve(ctx, ln, h.Mux(), lim)
}
