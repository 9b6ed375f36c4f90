package agent

import (
	"context"
	"sync"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/antrea-proxy/antrea-proxy/pkg/healer"
)

// flowRestorePoll is how often the start-up wait for flow-restore-wait looks at the proxier.
const flowRestorePoll = 100 * time.Millisecond

// proxierStart is what the start-up wait needs of the proxier (proxy.Proxier): its syncs, and
// the node-level flows every packet needs, installed without any Service.
type proxierStart interface {
	SyncState() (last time.Time, syncs int, err error)
	InstallBaseFlows(ctx context.Context) error
}

// flowRestoreDB reads and clears flow-restore-wait (ovsdb.Client).
type flowRestoreDB interface {
	FlowRestoreWait(ctx context.Context) (bool, error)
	SetFlowRestoreWait(ctx context.Context, on bool) error
}

// flowRestoreGate clears flow-restore-wait at start-up. Call run once the gateway and pod
// flows are in (after the data path started): it clears it as soon as the proxier has synced
// once, or when timeout has passed without that (the proxier failing or blocked: a node must
// forward pod-to-pod traffic whatever its Services do), after the proxier installed its
// node-level flows without Services (proxy.Proxier.InstallBaseFlows). It retries both until
// they succeed.
type flowRestoreGate struct {
	clock   clock.WithTicker
	proxier proxierStart // nil: the proxy is disabled, nothing to wait for
	db      flowRestoreDB
	timeout time.Duration
}

// run waits as described on flowRestoreGate, until flow-restore-wait is clear or ctx is done.
func (g flowRestoreGate) run(ctx context.Context) {
	start := g.clock.Now()
	tick := g.clock.NewTicker(flowRestorePoll)
	defer tick.Stop()
	warned := false
	for {
		ready := g.proxier == nil
		if !ready {
			_, syncs, err := g.proxier.SyncState()
			ready = syncs > 0
			if !ready && g.clock.Since(start) >= g.timeout {
				if !warned {
					warned = true
					klog.InfoS("The proxier has not synced within flowRestoreTimeout: clearing flow-restore-wait so that pod traffic flows; Services follow when it syncs",
						"timeout", g.timeout, "lastError", err)
				}
				err := g.proxier.InstallBaseFlows(ctx)
				ready = err == nil
				if err != nil && ctx.Err() == nil {
					klog.ErrorS(err, "Installing the node-level flows failed; retrying")
				}
			}
		}
		if ready {
			err := clearFlowRestoreWait(ctx, g.db)
			if err == nil {
				return
			}
			if ctx.Err() == nil {
				klog.ErrorS(err, "Clearing flow-restore-wait failed; retrying")
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
		}
	}
}

// boundedReplay is the bridge's reconciler as the healer's owner, with a bound on how long a
// replay after an OpenFlow reset holds up flow-restore-wait (the healer clears it after every
// owner has replayed): a replay that fails, or waits behind a long sync, for longer than
// timeout is given up on (reported as done), so the healer clears flow-restore-wait; the
// reconciler replays the gateway's and the pods' flows before the Services'. A replay given up
// on is not lost: one still running finishes on its own, and one that failed leaves the
// reconciler owing a replay, which the next batch of any writer does first.
type boundedReplay struct {
	healer.Owner
	clock   clock.WithTicker
	timeout time.Duration

	mu sync.Mutex
	// inflight is the result of the replay running, nil when none is; since is when the
	// replays not yet succeeded or given up on started (zero: none).
	inflight chan error
	since    time.Time
}

func newBoundedReplay(o healer.Owner, c clock.WithTicker, timeout time.Duration) *boundedReplay {
	return &boundedReplay{Owner: o, clock: c, timeout: timeout}
}

// Replay implements healer.Owner: the owner's Replay, at most until timeout has passed since
// the first attempt that has not succeeded.
func (b *boundedReplay) Replay(ctx context.Context) error {
	b.mu.Lock()
	if b.since.IsZero() {
		b.since = b.clock.Now()
	}
	if b.inflight == nil {
		ch := make(chan error, 1)
		b.inflight = ch
		// The replay outlives this call when it is given up on: it must not be cancelled then.
		rctx := context.WithoutCancel(ctx)
		go func() { ch <- b.Owner.Replay(rctx) }()
	}
	ch, wait := b.inflight, b.timeout-b.clock.Since(b.since)
	b.mu.Unlock()
	expired, stop := b.expiry(wait)
	defer stop()
	select {
	case err := <-ch:
		b.mu.Lock()
		defer b.mu.Unlock()
		b.inflight = nil
		if err == nil {
			b.since = time.Time{}
			return nil
		}
		if b.clock.Since(b.since) < b.timeout {
			return err
		}
		b.since = time.Time{}
		klog.ErrorS(err, "The proxier's replay keeps failing; not holding up flow-restore-wait any longer (its next sync replays first)",
			"timeout", b.timeout)
		return nil
	case <-expired:
		b.mu.Lock()
		defer b.mu.Unlock()
		b.since = time.Time{}
		klog.InfoS("The proxier's replay has not finished within flowRestoreTimeout; not holding up flow-restore-wait any longer (it finishes on its own)",
			"timeout", b.timeout)
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// expiry fires after wait, at once when wait is not positive; stop releases its timer.
func (b *boundedReplay) expiry(wait time.Duration) (<-chan time.Time, func()) {
	if wait > 0 {
		t := b.clock.NewTimer(wait)
		return t.C(), func() { t.Stop() }
	}
	c := make(chan time.Time, 1)
	c <- b.clock.Now()
	return c, func() {}
}
