package loadbalancer

import (
	"context"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationinformers "k8s.io/client-go/informers/coordination/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/antrea-proxy/antrea-proxy/pkg/lbapi"
)

// liveness tracks the announcer Leases the agents renew (lbapi.LabelAnnouncer): a node may
// announce addresses only while its Lease is held and renewed. Expiry is measured on the
// controller's own clock, from the moment it saw the last renewal (a new renewTime) plus the
// Lease's duration, as client-go's leader election does, so the nodes' clocks do not matter.
// When a node's state flips, onChange runs (the controller queues its VIP-mode Services).
type liveness struct {
	clock    clock.WithTicker
	onChange func()

	mu sync.Mutex
	// leases holds what was seen of each node's Lease.
	leases map[string]seenLease
	// alive is the state last reported through onChange.
	alive map[string]bool
	kick  chan struct{}
}

// seenLease is one node's Lease as the controller last saw it.
type seenLease struct {
	renew    string        // the renewTime it carried (a change is a renewal)
	observed time.Time     // when the controller saw that renewal
	duration time.Duration // its leaseDurationSeconds
	held     bool          // it has a holder
}

func newLiveness(clk clock.WithTicker, onChange func()) *liveness {
	return &liveness{clock: clk, onChange: onChange, leases: map[string]seenLease{}, alive: map[string]bool{}, kick: make(chan struct{}, 1)}
}

// watch adds the handlers of an informer of announcer Leases.
func (l *liveness) watch(inf cache.SharedIndexInformer) error {
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    l.observe,
		UpdateFunc: func(_, obj any) { l.observe(obj) },
		DeleteFunc: l.forget,
	})
	return err
}

// newLeaseInformer watches the announcer Leases of namespace.
func newLeaseInformer(client kubernetes.Interface, namespace string) cache.SharedIndexInformer {
	return coordinationinformers.NewFilteredLeaseInformer(client, namespace, 0, cache.Indexers{},
		func(o *metav1.ListOptions) { o.LabelSelector = lbapi.LabelAnnouncer })
}

func leaseNode(obj any) (string, *coordinationv1.Lease) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	lease, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return "", nil
	}
	node := lease.Labels[lbapi.LabelAnnouncer]
	if node == "" || lease.Name != lbapi.AnnouncerLeaseName(node) {
		return "", nil // not an announcer Lease, or one claiming another node's name
	}
	return node, lease
}

func (l *liveness) observe(obj any) {
	node, lease := leaseNode(obj)
	if lease == nil {
		return
	}
	s := seenLease{held: lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity == node}
	if lease.Spec.RenewTime != nil {
		s.renew = lease.Spec.RenewTime.UTC().Format(time.RFC3339Nano)
	}
	if lease.Spec.LeaseDurationSeconds != nil {
		s.duration = time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second
	}
	l.mu.Lock()
	old, had := l.leases[node]
	s.observed = old.observed
	if !had || old.renew != s.renew {
		s.observed = l.clock.Now()
	}
	l.leases[node] = s
	l.mu.Unlock()
	l.wake()
}

func (l *liveness) forget(obj any) {
	node, lease := leaseNode(obj)
	if lease == nil {
		return
	}
	l.mu.Lock()
	delete(l.leases, node)
	l.mu.Unlock()
	l.wake()
}

func (l *liveness) wake() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// isAlive reports whether node's Lease is held and was renewed within its duration.
func (l *liveness) isAlive(node string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	ok, _ := l.aliveLocked(node, l.clock.Now())
	return ok
}

// aliveLocked reports node's state at now and, when alive, when that ends.
func (l *liveness) aliveLocked(node string, now time.Time) (bool, time.Time) {
	s, ok := l.leases[node]
	if !ok || !s.held || s.duration <= 0 {
		return false, time.Time{}
	}
	until := s.observed.Add(s.duration)
	return now.Before(until), until
}

// run reports flips through onChange until ctx is done: at every Lease event and at the next
// expiry.
func (l *liveness) run(ctx context.Context) {
	for {
		next := l.check()
		var timer clock.Timer
		var fire <-chan time.Time
		if !next.IsZero() {
			timer = l.clock.NewTimer(next.Sub(l.clock.Now()))
			fire = timer.C()
		}
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return
		case <-l.kick:
		case <-fire:
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// check compares every node's state with the last reported one, reports a change and returns
// the earliest expiry ahead.
func (l *liveness) check() time.Time {
	now := l.clock.Now()
	l.mu.Lock()
	changed := false
	var next time.Time
	state := map[string]bool{}
	for node := range l.leases {
		ok, until := l.aliveLocked(node, now)
		state[node] = ok
		if ok && (next.IsZero() || until.Before(next)) {
			next = until
		}
	}
	for node, ok := range state {
		if l.alive[node] != ok {
			changed = true
			klog.InfoS("Announcer Lease", "node", node, "alive", ok)
		}
	}
	for node, ok := range l.alive {
		if _, still := state[node]; !still && ok {
			changed = true
			klog.InfoS("Announcer Lease gone", "node", node)
		}
	}
	l.alive = state
	l.mu.Unlock()
	if changed {
		l.onChange()
	}
	return next
}
