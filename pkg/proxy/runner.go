package proxy

import (
	"context"
	"time"

	"k8s.io/utils/clock"
)

// runner calls a sync function no more often than minInterval, at least every fullPeriod, and
// after a failure retries with exponential backoff (from minInterval, capped at maxBackoff).
// Requests that arrive while a sync runs or during the minimum interval coalesce into one sync.
// The minimum interval paces requested syncs only: a periodic full resync does not delay the
// request that follows it (it is cheap when nothing changed and no change triggered it).
type runner struct {
	sync        func(ctx context.Context, full bool) error
	minInterval time.Duration
	fullPeriod  time.Duration
	maxBackoff  time.Duration
	clock       clock.WithTicker
	kick        chan struct{}
}

func newRunner(sync func(ctx context.Context, full bool) error, minInterval, fullPeriod time.Duration, clk clock.WithTicker) *runner {
	maxBackoff := 30 * time.Second
	if maxBackoff < minInterval {
		maxBackoff = minInterval
	}
	return &runner{sync: sync, minInterval: minInterval, fullPeriod: fullPeriod, maxBackoff: maxBackoff, clock: clk, kick: make(chan struct{}, 1)}
}

// Request asks for a sync soon; it never blocks.
func (r *runner) Request() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Run loops until ctx is done. The first sync is a full one and runs at once.
func (r *runner) Run(ctx context.Context) {
	full := true
	backoff := time.Duration(0)
	// lastRun is the last sync's start (backoff), lastPaced that of the last sync not started
	// by the full-period timer alone (minimum interval).
	var lastRun, lastPaced, lastFull time.Time
	pending, periodic := true, false
	for {
		if pending {
			wait := r.minInterval - r.clock.Since(lastPaced)
			if backoff > 0 {
				wait = backoff - r.clock.Since(lastRun)
			}
			if !lastRun.IsZero() && wait > 0 {
				t := r.clock.NewTimer(wait)
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C():
				}
			}
			// Drain a kick that arrived while waiting: this sync covers it.
			select {
			case <-r.kick:
				periodic = false
			default:
			}
			lastRun = r.clock.Now()
			if !periodic {
				lastPaced = lastRun
			}
			if err := r.sync(ctx, full); err != nil {
				if backoff == 0 {
					backoff = r.minInterval
				} else {
					backoff *= 2
				}
				if backoff > r.maxBackoff {
					backoff = r.maxBackoff
				}
				pending = true
				continue
			}
			if full {
				lastFull = lastRun
			}
			backoff, full, pending, periodic = 0, false, false, false
		}
		untilFull := r.fullPeriod - r.clock.Since(lastFull)
		if untilFull < 0 {
			untilFull = 0
		}
		t := r.clock.NewTimer(untilFull)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-r.kick:
			t.Stop()
			pending = true
		case <-t.C():
			pending, full, periodic = true, true, true
		}
	}
}
