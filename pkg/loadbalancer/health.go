package loadbalancer

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// DefaultStallTimeout is how long one Service sync may run before
// /healthz reports the workers wedged.
const DefaultStallTimeout = 2 * time.Minute

// Ready reports whether the controller has synced its informer caches
// and rebuilt its allocations, so it serves Services.
func (c *Controller) Ready() bool { return c.ready.Load() }

// Stalled returns an error naming the oldest sync that has been running
// for longer than the stall timeout, or nil.
func (c *Controller) Stalled() error {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	var oldest types.NamespacedName
	var since time.Time
	for k, t := range c.inflight {
		if since.IsZero() || t.Before(since) {
			oldest, since = k, t
		}
	}
	if !since.IsZero() && now.Sub(since) > c.stallTimeout {
		return fmt.Errorf("the sync of Service %s has been running for %v (limit %v)", oldest, now.Sub(since).Round(time.Second), c.stallTimeout)
	}
	return nil
}

func (c *Controller) syncStarted(key types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inflight[key] = c.clock.Now()
}

func (c *Controller) syncEnded(key types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.inflight, key)
}

// HTTPOptions configures NewHTTPHandler.
type HTTPOptions struct {
	// Controller is checked by /healthz (workers) and /readyz (informer
	// sync). Required.
	Controller *Controller
	// Metrics is served on /metrics. Required.
	Metrics *Metrics
	// Leading reports whether this replica holds the leader Lease; nil
	// means leader election is disabled (the replica always writes).
	Leading func() bool
	// LeaderCheck, when set, fails while this replica leads but has not
	// renewed its Lease in time (client-go's leaderelection.HealthzAdaptor).
	LeaderCheck func(*http.Request) error
}

type check struct {
	name string
	run  func(*http.Request) error
}

// NewHTTPHandler serves /healthz, /readyz and /metrics.
//
//   - /healthz: the process is alive: "ping", "workers" (no Service sync
//     runs longer than the stall timeout) and "leader-election" (a leader
//     that cannot renew its Lease).
//   - /readyz: "informer-sync": the caches are synced and the allocations
//     rebuilt; a standby replica (leader election on, Lease held by
//     another replica) is ready, as Kubernetes controllers' standbys are.
//   - /readyz/leader: 200 only on the replica that writes; it is not part
//     of /readyz.
//
// Each check is also served alone at /healthz/<name> or /readyz/<name>.
// Bodies are "ok", or one line per check ("[+]name ok", "[-]name failed:
// reason") with ?verbose or on failure (status 500).
func NewHTTPHandler(o HTTPOptions) http.Handler {
	leading := o.Leading
	if leading == nil {
		leading = func() bool { return true }
	}
	health := []check{
		{"ping", func(*http.Request) error { return nil }},
		{"workers", func(*http.Request) error { return o.Controller.Stalled() }},
	}
	if o.LeaderCheck != nil {
		health = append(health, check{"leader-election", o.LeaderCheck})
	}
	ready := []check{{"informer-sync", func(*http.Request) error {
		if !leading() || o.Controller.Ready() {
			return nil
		}
		return fmt.Errorf("informer caches not synced or allocations not yet rebuilt")
	}}}
	leader := check{"leader", func(*http.Request) error {
		if leading() {
			return nil
		}
		return fmt.Errorf("standby: another replica holds the Lease")
	}}
	mux := http.NewServeMux()
	mux.Handle("/metrics", o.Metrics.Handler())
	mux.Handle("/healthz", checksHandler(health))
	mux.Handle("/readyz", checksHandler(ready))
	for _, c := range health {
		mux.Handle("/healthz/"+c.name, checksHandler([]check{c}))
	}
	for _, c := range append(ready, leader) {
		mux.Handle("/readyz/"+c.name, checksHandler([]check{c}))
	}
	return mux
}

func checksHandler(checks []check) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		failed := false
		for _, c := range checks {
			if err := c.run(r); err != nil {
				failed = true
				fmt.Fprintf(&b, "[-]%s failed: %v\n", c.name, err)
			} else {
				fmt.Fprintf(&b, "[+]%s ok\n", c.name)
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		switch {
		case failed:
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, "%shealth check failed\n", b.String())
		case r.URL.Query().Has("verbose"):
			fmt.Fprintf(w, "%shealth check passed\n", b.String())
		default:
			fmt.Fprint(w, "ok")
		}
	})
}
