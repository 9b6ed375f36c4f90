package agent

import (
	"context"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	utilptr "k8s.io/utils/ptr"

	"github.com/antrea-proxy/antrea-proxy/pkg/config"
	"github.com/antrea-proxy/antrea-proxy/pkg/lbapi"
)

// AnnouncerLease renews this node's announcer Lease (lbapi.AnnouncerLeaseName) while the agent
// is healthy, so that antrea-controller lets the node announce VIP-mode addresses, and moves
// them within the Lease's duration after the renewals stop (the agent, its node or its
// connection to the API server died, or the health check failed). The announcer announces only
// while the last successful renewal is younger than the duration it wrote (valid), so a node cut
// off from the API server withdraws about when the controller moves its addresses. At shutdown
// the Lease is released (no holder): the controller moves the addresses at once.
//
// A node that announces nothing (idle) renews only every idle interval, with a Lease duration of
// twice that: it stays eligible for new addresses at a tenth of the renewals (each one is an
// update through the API server, the largest part of an idle agent's CPU), and losing it costs
// no traffic. Once the announcer assigns it an address (SetBusy) it renews at once and then
// every renew interval with the short duration, so the failover bound of an address in use is
// the short duration.
type AnnouncerLease struct {
	leases   coordinationclient.LeaseInterface
	node     string
	duration time.Duration
	renew    time.Duration
	// idleRenew and idleDuration apply while the node announces nothing; idleRenew 0 renews
	// every renew interval with the short duration, busy or not.
	idleRenew, idleDuration time.Duration
	healthy                 func() bool
	clock                   clock.WithTicker
	// busyKick wakes Run when the node becomes busy.
	busyKick chan struct{}

	mu        sync.Mutex
	lastRenew time.Time // of the last successful renewal; zero when none or released
	// lastDuration is the duration the last successful renewal wrote.
	lastDuration time.Duration
	released     bool
	busy         bool

	// writeMu serializes writes (renewals and the release at shutdown); last is the Lease as
	// the last write left it, so that a renewal is one update, not a get and an update.
	writeMu sync.Mutex
	last    *coordinationv1.Lease
}

func NewAnnouncerLease(leases coordinationclient.LeaseInterface, node string, cfg config.AnnouncerConfig, healthy func() bool, clk clock.WithTicker) *AnnouncerLease {
	return &AnnouncerLease{leases: leases, node: node, duration: cfg.LeaseDuration.Duration, renew: cfg.RenewInterval.Duration,
		idleRenew: cfg.IdleRenew(), idleDuration: cfg.IdleLeaseDuration(), healthy: healthy, clock: clk, busyKick: make(chan struct{}, 1)}
}

// valid reports whether the node may announce: the Lease was renewed within the duration that
// renewal wrote.
func (l *AnnouncerLease) Valid() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.lastRenew.IsZero() && l.clock.Since(l.lastRenew) < l.lastDuration
}

// SetBusy says whether the node announces addresses (or was assigned some): a node that
// becomes busy renews at once with the short duration.
func (l *AnnouncerLease) SetBusy(busy bool) {
	l.mu.Lock()
	was := l.busy
	l.busy = busy
	l.mu.Unlock()
	if busy && !was {
		select {
		case l.busyKick <- struct{}{}:
		default:
		}
	}
}

// due reports whether a renewal is due now: always when busy (or without an idle interval), and
// when idle once the idle interval passed since the last renewal.
func (l *AnnouncerLease) due() bool {
	return l.untilDue() <= 0
}

// untilDue is how long until the next renewal is due: none while busy (or without an idle
// interval, or before the first idle renewal), what is left of the idle interval while idle.
func (l *AnnouncerLease) untilDue() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.busy || l.idleRenew == 0 || l.lastRenew.IsZero() || l.lastDuration != l.idleDuration {
		return 0
	}
	return l.idleRenew - l.clock.Since(l.lastRenew)
}

// nextWake is how long Run sleeps after a pass: the renew interval while renewals are due at
// every pass (busy, or a failed or skipped renewal to retry), else until the idle renewal is due.
// An idle node thus wakes once per idle interval, not at every renew interval.
func (l *AnnouncerLease) nextWake() time.Duration {
	if d := l.untilDue(); d > 0 {
		return d
	}
	return l.renew
}

// Run renews the Lease while healthy, until ctx is done: every renew interval while busy,
// every idle interval while idle.
func (l *AnnouncerLease) Run(ctx context.Context) {
	var lastErr string
	for {
		if l.healthy() && l.due() {
			err := l.write(ctx, true)
			switch {
			case err != nil && err.Error() != lastErr && ctx.Err() == nil:
				klog.ErrorS(err, "Renewing the announcer Lease failed; retrying", "node", l.node)
				lastErr = err.Error()
			case err == nil:
				lastErr = ""
			}
		}
		t := l.clock.NewTimer(l.nextWake())
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		case <-l.busyKick:
			t.Stop()
		}
	}
}

// release gives the Lease up (no holder) and stops renewals: the controller moves this node's
// addresses at once.
func (l *AnnouncerLease) Release(ctx context.Context) error {
	l.mu.Lock()
	l.released = true
	l.lastRenew = time.Time{}
	l.mu.Unlock()
	return l.write(ctx, false)
}

// write creates or updates the Lease, held (renewed now) or released.
func (l *AnnouncerLease) write(ctx context.Context, held bool) error {
	l.mu.Lock()
	if held && l.released {
		l.mu.Unlock()
		return nil
	}
	duration := l.duration
	if !l.busy && l.idleRenew != 0 {
		duration = l.idleDuration
	}
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, l.duration)
	defer cancel()
	now := l.clock.Now()
	spec := coordinationv1.LeaseSpec{LeaseDurationSeconds: utilptr.To(int32(duration / time.Second)), RenewTime: &metav1.MicroTime{Time: now}}
	if held {
		spec.HolderIdentity = utilptr.To(l.node)
	}
	if err := l.put(ctx, spec); err != nil {
		return err
	}
	if held {
		l.mu.Lock()
		if !l.released {
			l.lastRenew, l.lastDuration = now, duration
		}
		l.mu.Unlock()
	}
	return nil
}

// put writes spec to the Lease: an update of the Lease as the last write left it, or, without
// one or when that update conflicts or finds no Lease, a get and an update (or a create).
func (l *AnnouncerLease) put(ctx context.Context, spec coordinationv1.LeaseSpec) error {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	l.mu.Lock()
	released := l.released
	l.mu.Unlock()
	if released && spec.HolderIdentity != nil {
		return nil // a renewal that lost the race with the release writes nothing
	}
	if l.last != nil {
		cur := l.last.DeepCopy()
		cur.Spec = spec
		updated, err := l.leases.Update(ctx, cur, metav1.UpdateOptions{})
		if err == nil {
			l.last = updated
			return nil
		}
		l.last = nil
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return err
		}
	}
	name := lbapi.AnnouncerLeaseName(l.node)
	cur, err := l.leases.Get(ctx, name, metav1.GetOptions{})
	var written *coordinationv1.Lease
	switch {
	case apierrors.IsNotFound(err):
		written, err = l.leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{lbapi.LabelAnnouncer: l.node}}, Spec: spec}, metav1.CreateOptions{})
	case err == nil:
		cur.Spec = spec
		if cur.Labels == nil {
			cur.Labels = map[string]string{}
		}
		cur.Labels[lbapi.LabelAnnouncer] = l.node
		written, err = l.leases.Update(ctx, cur, metav1.UpdateOptions{})
	}
	if err != nil {
		return err
	}
	l.last = written
	return nil
}

// HandOver waits, at most timeout, until no Service names this node as the announcer of an
// address any more (the controller moved them after release), listing Services every 100 ms.
// It returns how long it waited and whether every address moved.
func HandOver(services corev1client.ServiceInterface, node string, timeout time.Duration, clk clock.WithTicker) (time.Duration, bool) {
	start := clk.Now()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	t := clk.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		list, err := services.List(ctx, metav1.ListOptions{LabelSelector: labels.Everything().String()})
		if err == nil && !namesNode(list.Items, node) {
			return clk.Since(start), true
		}
		select {
		case <-ctx.Done():
			return clk.Since(start), false
		case <-t.C():
		}
	}
}

// namesNode reports whether a Service's announcing-node annotation assigns an address to node.
func namesNode(svcs []v1.Service, node string) bool {
	for i := range svcs {
		as, _ := lbapi.ParseAnnouncingNodes(svcs[i].Annotations[lbapi.AnnotationAnnouncingNode])
		for _, a := range as {
			if a.Node == node {
				return true
			}
		}
	}
	return false
}

// setUpAnnouncerLease gives the data path this node's announcer Lease when it is enabled.
func (c *Components) setUpAnnouncerLease(cfg *config.AgentConfig, client kubernetes.Interface) {
	a := cfg.Announcer
	if c.DataPath == nil || client == nil || !a.LeaseEnabled() || !cfg.AntreaProxy.Enabled() {
		return
	}
	health := c.observers.health
	c.DataPath.lease = NewAnnouncerLease(client.CoordinationV1().Leases(a.LeaseNamespace), cfg.NodeName, a,
		func() bool { return health.IsHealthy() && health.NodeEligible() }, clock.RealClock{})
	c.DataPath.handoverSvcs = client.CoreV1().Services(metav1.NamespaceAll)
	c.DataPath.handoverTimeout = a.Handover()
}

// waitDataPath stops the data path (cancel) and waits for its goroutines.
func (c *Components) waitDataPath(cancel context.CancelFunc) {
	cancel()
	if c.DataPath == nil {
		return
	}
	if err := c.DataPath.Wait(); err != nil {
		klog.ErrorS(err, "The node data path stopped with an error")
	}
}
