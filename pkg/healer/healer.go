package healer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// Owner is one writer of the bridge whose flows and groups the Healer keeps installed.
type Owner interface {
	// Name identifies the owner in logs and metrics ("reject-limits", "gateway", "bridge").
	Name() string
	// Verify compares what OVS holds (counted through c, cheap) with what the owner believes it
	// installed; false = mismatch, replay needed. It must not report a mismatch because an Apply of
	// its own is in flight (exclude that internally).
	Verify(ctx context.Context, c openflow.FlowCounter) (bool, error)
	// Replay reinstalls everything the owner has installed (flows and groups) in one bundle,
	// idempotently, whatever OVS holds now (empty after a vswitchd restart; groups left but flows
	// gone after `del-flows`).
	Replay(ctx context.Context) error
}

// Trigger says why owners were replayed; it is the "trigger" label of the replay metrics.
type Trigger string

const (
	// TriggerReset is a replay of every owner after the OpenFlow connection came back.
	TriggerReset Trigger = "reset"
	// TriggerMismatch is a replay of one owner whose Verify reported a mismatch.
	TriggerMismatch Trigger = "mismatch"
	// TriggerStartup is a replay of every owner asked for with ReplayAll.
	TriggerStartup Trigger = "startup"
)

// Defaults of Options.
const (
	// DefaultCheckInterval bounds how long flows deleted behind the agent's back stay missing
	// (plus the replay). A table statistics check costs ovs-vswitchd about 0.15 ms of CPU at
	// 110,000 flows (BenchmarkCheck10k), so it runs every second (it was 5 s when every check
	// counted each owner's flows, 160 ms of ovs-vswitchd CPU at that size).
	DefaultCheckInterval = time.Second
	// DefaultWatchedCheckInterval is the period of the check while a ChangeFeed reports the
	// changes: a safety net, as each reported change is checked within DefaultCheckInterval.
	DefaultWatchedCheckInterval = 30 * time.Second
	// DefaultFullCheckInterval makes a check at least 10 minutes after the last full one a full
	// one, which also catches a loss and a gain in one table between two checks.
	DefaultFullCheckInterval = 10 * time.Minute
	DefaultRetryInitial      = 200 * time.Millisecond
	DefaultRetryMax          = 30 * time.Second
)

// Counter is what the healer reads of the bridge: flow counts and table statistics. Both
// OpenFlow backends implement it.
type Counter interface {
	openflow.FlowCounter
	openflow.TableCounter
}

// Options configures a Healer.
type Options struct {
	// Counter counts the flows on the bridge (passed to every Owner's Verify) and reads its
	// table statistics (the cheap periodic check). Nil disables the periodic check.
	Counter Counter
	// Owners are replayed in this order (the reject meters, the gateway's host side, the
	// bridge's reconciler).
	Owners []Owner
	// Tables are the writers that say what they installed per table (the bridge's
	// reconciler): a check compares their sum, plus what the last full check found beyond it,
	// with OVS's table statistics. Writers that do not say (the reject meters' flows, a CNI
	// server's) are counted in that surplus.
	Tables []TableCounts
	// Resets receives a value every time the OpenFlow connection to ovs-vswitchd is back after
	// a loss (the connection monitor). Nil means no resets.
	Resets <-chan struct{}
	// CheckInterval is how often owners are checked while Changes is not watching, and the
	// least time between two checks after changes were reported; 0 means DefaultCheckInterval.
	// A check is one table statistics request compared with what the Tables installed, and
	// every owner's Verify runs only when that differs from the last full check.
	CheckInterval time.Duration
	// Changes, when set, reports the changes of the bridge's flows made by other writers; a
	// report is checked at once (at most once per CheckInterval), and while it is watching the
	// periodic check runs only every WatchedCheckInterval. Nil means checking every
	// CheckInterval.
	Changes ChangeFeed
	// WatchedCheckInterval is the period of the check while Changes is watching; 0 means
	// DefaultWatchedCheckInterval.
	WatchedCheckInterval time.Duration
	// FullCheckInterval makes the first check at least this long after the last full one
	// verify every owner anyway; 0 means DefaultFullCheckInterval, a negative value never.
	FullCheckInterval time.Duration
	// RetryInitial and RetryMax bound the backoff between retries of failed owners (doubling);
	// 0 means DefaultRetryInitial, resp. DefaultRetryMax.
	RetryInitial, RetryMax time.Duration
	// AfterReplayAll runs after every owner has been replayed successfully (reset or ReplayAll);
	// it is retried with the same backoff while it fails. Nil means nothing.
	AfterReplayAll func(ctx context.Context) error
	// Clock is the clock of tickers, backoff and durations; nil means the real clock.
	Clock clock.WithTicker
}

// Healer replays owners after resets and mismatches. Create it with New and start Run.
type Healer struct {
	opts  Options
	stats *statsStore
	// opMu serializes passes over owners (Run's and ReplayAll's): an owner is never replayed or
	// verified by two callers at once. It guards tables.
	opMu   sync.Mutex
	tables tableCheck
}

// New returns a Healer; it does nothing until Run (or ReplayAll) is called.
func New(opts Options) *Healer {
	if opts.CheckInterval <= 0 {
		opts.CheckInterval = DefaultCheckInterval
	}
	if opts.RetryInitial <= 0 {
		opts.RetryInitial = DefaultRetryInitial
	}
	if opts.RetryMax <= 0 {
		opts.RetryMax = DefaultRetryMax
	}
	if opts.RetryMax < opts.RetryInitial {
		opts.RetryMax = opts.RetryInitial
	}
	if opts.WatchedCheckInterval <= 0 {
		opts.WatchedCheckInterval = DefaultWatchedCheckInterval
	}
	if opts.FullCheckInterval == 0 {
		opts.FullCheckInterval = DefaultFullCheckInterval
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Healer{opts: opts, stats: newStatsStore()}
}

// Run watches Resets and checks the owners (see schedule) until ctx is done. A reset replays
// every owner in order, retries the failed ones with backoff until all succeed (a new reset
// meanwhile starts over with every owner) and then runs AfterReplayAll.
func (h *Healer) Run(ctx context.Context) {
	s := newSchedule(h.opts.Clock, h.opts.Changes, h.opts.CheckInterval, h.opts.WatchedCheckInterval)
	defer s.stop()
	check := func() { s.checked(h.check(ctx)) }
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.opts.Resets:
			klog.InfoS("OpenFlow connection to OVS is back: replaying every owner")
			if err := h.replayAll(ctx, TriggerReset); err != nil {
				return // ctx done
			}
		case <-s.changes():
			h.stats.changeReported()
			if s.changed() {
				check()
			}
		case <-s.pending():
			check()
		case <-s.tick():
			check()
		}
	}
}

// ReplayAll replays every owner in order, retrying the failed ones with backoff until all
// succeed, then runs AfterReplayAll. It returns only when that is done (nil) or ctx is done
// (ctx's error). The agent calls it once its owners have installed their start-up state (the
// reconciler's Replay installs only the node-level flows before the proxier's first sync), for
// example to clear flow-restore-wait.
func (h *Healer) ReplayAll(ctx context.Context) error {
	return h.replayAll(ctx, TriggerStartup)
}

// replayAll is ReplayAll's loop; while it waits for a retry a reset starts over with every owner.
func (h *Healer) replayAll(ctx context.Context, trigger Trigger) error {
	pending := h.opts.Owners
	afterDone := false
	delay := h.opts.RetryInitial
	start := h.opts.Clock.Now()
	for {
		var err error
		pending, err = h.replayPass(ctx, pending, trigger)
		if err == nil && !afterDone {
			err = h.afterReplayAll(ctx)
			afterDone = err == nil
		}
		if err == nil {
			klog.InfoS("Replayed every owner", "trigger", trigger, "duration", h.opts.Clock.Since(start))
			return nil
		}
		klog.ErrorS(err, "Replay incomplete, retrying", "trigger", trigger, "retryIn", delay)
		timer := h.opts.Clock.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-h.opts.Resets:
			timer.Stop()
			klog.InfoS("OpenFlow connection reset again during a replay: starting over")
			pending, afterDone, delay = h.opts.Owners, false, h.opts.RetryInitial
			trigger = TriggerReset
			continue
		case <-timer.C():
		}
		delay = min(2*delay, h.opts.RetryMax)
	}
}

// replayPass replays owners once, in order, and returns the ones that failed and their errors.
func (h *Healer) replayPass(ctx context.Context, owners []Owner, trigger Trigger) ([]Owner, error) {
	h.opMu.Lock()
	defer h.opMu.Unlock()
	h.forgetBaseline()
	var failed []Owner
	var errs []error
	for _, o := range owners {
		if err := h.replayOne(ctx, o, trigger); err != nil {
			failed = append(failed, o)
			errs = append(errs, fmt.Errorf("%s: %w", o.Name(), err))
		}
	}
	return failed, errors.Join(errs...)
}

func (h *Healer) afterReplayAll(ctx context.Context) error {
	if h.opts.AfterReplayAll == nil {
		return nil
	}
	if err := h.opts.AfterReplayAll(ctx); err != nil {
		return fmt.Errorf("after replaying every owner: %w", err)
	}
	return nil
}

// replayOne replays o, logging and recording how it went.
func (h *Healer) replayOne(ctx context.Context, o Owner, trigger Trigger) error {
	start := h.opts.Clock.Now()
	err := o.Replay(ctx)
	d := h.opts.Clock.Since(start)
	h.stats.replayed(o.Name(), trigger, d, err)
	if err != nil {
		klog.ErrorS(err, "Replay failed", "owner", o.Name(), "trigger", trigger, "duration", d)
		return err
	}
	klog.InfoS("Replayed owner", "owner", o.Name(), "trigger", trigger, "duration", d)
	return nil
}

// verifyAllLocked verifies every owner and replays those that mismatch; it runs with opMu held
// and reports whether every owner matched. A Verify error is logged and counted but replays
// nothing: the next check tries again.
func (h *Healer) verifyAllLocked(ctx context.Context) bool {
	h.stats.fullChecked()
	allOK := true
	for _, o := range h.opts.Owners {
		if ctx.Err() != nil {
			return false
		}
		ok, err := o.Verify(ctx, h.opts.Counter)
		h.stats.verified(o.Name(), ok, err)
		if err != nil {
			klog.ErrorS(err, "Verifying the flows in OVS failed", "owner", o.Name())
			allOK = false
			continue
		}
		if ok {
			continue
		}
		allOK = false
		klog.InfoS("Flows in OVS differ from what the owner installed: replaying", "owner", o.Name(), "reason", "mismatch")
		_ = h.replayOne(ctx, o, TriggerMismatch) // logged; the next check retries
	}
	return allOK
}
