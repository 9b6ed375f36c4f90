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

	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/metrics"
)

// DefaultBindAddress is where kube-proxy serves /healthz and /livez by default.
const DefaultBindAddress = "0.0.0.0:10256"

// ToBeDeletedTaint is the taint the cluster autoscaler puts on a Node it is about to remove.
const ToBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"

// ProxyHealth tracks whether the proxier keeps the data plane up to date, with kube-proxy's
// semantics: QueuedUpdate marks the oldest change not yet synced, Updated (a successful sync)
// clears it. The proxier is healthy when nothing is pending or the oldest pending change is
// younger than the timeout (2×fullSyncPeriod).
type ProxyHealth struct {
	clock   clock.PassiveClock
	timeout time.Duration

	mu sync.RWMutex
	// lastUpdated is the last successful sync; oldestPending the first change queued after it
	// (zero when none is pending).
	lastUpdated   time.Time
	oldestPending time.Time
	// nodeEligible is false while the Node is being deleted or tainted for deletion.
	nodeEligible bool
}

var _ metrics.Observer = (*ProxyHealth)(nil)

// NewProxyHealth returns a ProxyHealth that reports stale data after 2×fullSyncPeriod. clk nil
// means the real clock. It starts healthy and node-eligible, like kube-proxy's.
func NewProxyHealth(fullSyncPeriod time.Duration, clk clock.PassiveClock) *ProxyHealth {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &ProxyHealth{clock: clk, timeout: 2 * fullSyncPeriod, nodeEligible: true}
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
	healthy, _, _ := h.state()
	return healthy
}

// NodeEligible reports whether the Node may receive load-balanced traffic.
func (h *ProxyHealth) NodeEligible() bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.nodeEligible
}

func (h *ProxyHealth) state() (healthy bool, lastUpdated, now time.Time) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	now = h.clock.Now()
	healthy = h.oldestPending.IsZero() || now.Sub(h.oldestPending) < h.timeout
	return healthy, h.lastUpdated, now
}

// NodeUpdated implements metrics.Observer.
func (h *ProxyHealth) NodeUpdated(node *v1.Node) { h.SyncNode(node) }

// SyncDone implements metrics.Observer: a successful sync is an update.
func (h *ProxyHealth) SyncDone(r metrics.SyncResult) {
	if r.Err == nil {
		h.Updated()
	}
}

// healthResponse is the body of /healthz and /livez (kube-proxy's fields).
type healthResponse struct {
	LastUpdated  time.Time `json:"lastUpdated"`
	CurrentTime  time.Time `json:"currentTime"`
	NodeEligible *bool     `json:"nodeEligible,omitempty"`
}

// HealthzHandler serves /healthz: 200 when the proxier is healthy and the Node is eligible,
// 503 otherwise.
func (h *ProxyHealth) HealthzHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		healthy, last, now := h.state()
		eligible := h.NodeEligible()
		h.respond(w, healthy && eligible, healthResponse{LastUpdated: last, CurrentTime: now, NodeEligible: &eligible})
	})
}

// LivezHandler serves /livez: 200 when the proxier is healthy, whatever the Node's state.
func (h *ProxyHealth) LivezHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		healthy, last, now := h.state()
		h.respond(w, healthy, healthResponse{LastUpdated: last, CurrentTime: now})
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

// Serve listens on addr (e.g. DefaultBindAddress) and serves /healthz and /livez until ctx is
// done.
func (h *ProxyHealth) Serve(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("health server: listening on %s: %w", addr, err)
	}
	return metrics.ServeListener(ctx, ln, h.Mux())
}
