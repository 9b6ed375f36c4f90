package ofctl

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Default deadlines of ovs-ofctl runs (see WithTimeouts). A wedged ovs-vswitchd never answers,
// and ovs-ofctl then waits forever: every run is killed at its deadline instead.
const (
	// DefaultCallTimeout bounds a dump, a count or a conntrack flush.
	DefaultCallTimeout = 10 * time.Second
	// DefaultBundleTimeout is the fixed part of an Apply's deadline.
	DefaultBundleTimeout = 30 * time.Second
	// DefaultBundleOpTimeout is added to an Apply's deadline for every op of the batch.
	DefaultBundleOpTimeout = 50 * time.Microsecond
)

// timeouts are the deadlines of one Bridge's ovs-ofctl runs.
type timeouts struct {
	call, bundle, perOp time.Duration
}

// forBundle is the deadline of an Apply of n ops.
func (t timeouts) forBundle(n int) time.Duration {
	return t.bundle + time.Duration(n)*t.perOp
}

// WithTimeouts sets the deadlines of ovs-ofctl runs: call for dumps, counts and conntrack
// flushes, bundleBase + perOp × len(ops) for an Apply. A zero or negative value keeps the
// default (DefaultCallTimeout, DefaultBundleTimeout, DefaultBundleOpTimeout). The caller's
// context still applies when it ends sooner.
func WithTimeouts(call, bundleBase, perOp time.Duration) Option {
	return func(b *Bridge) {
		if call > 0 {
			b.timeouts.call = call
		}
		if bundleBase > 0 {
			b.timeouts.bundle = bundleBase
		}
		if perOp > 0 {
			b.timeouts.perOp = perOp
		}
	}
}

// TimeoutError is returned when an ovs-ofctl run did not finish within its deadline (the
// process was killed), typically because ovs-vswitchd is wedged or overloaded. It matches
// context.DeadlineExceeded with errors.Is. For Apply, whether the bundle was committed is
// unknown.
type TimeoutError struct {
	// Command is the ovs-ofctl command, e.g. "bundle" or "dump-flows".
	Command string
	// Target is the OpenFlow endpoint.
	Target string
	// After is the deadline that passed.
	After time.Duration
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("ovs-ofctl %s %s timed out after %v (is ovs-vswitchd responsive?)", e.Command, e.Target, e.After)
}

// Unwrap makes errors.Is(err, context.DeadlineExceeded) true.
func (e *TimeoutError) Unwrap() error { return context.DeadlineExceeded }

// Timeout reports true, like net.Error.
func (e *TimeoutError) Timeout() bool { return true }

// runWithin runs ovs-ofctl command cmd under a deadline of d (within ctx). When the deadline,
// rather than ctx, ended the run, the error is a *TimeoutError; when ctx ended it, the error
// wraps ctx.Err().
func (b *Bridge) runWithin(ctx context.Context, cmd string, d time.Duration, run func(context.Context) error) error {
	rctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	err := run(rctx)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("ovs-ofctl %s %s: %w", cmd, b.target, ctx.Err())
	case rctx.Err() != nil:
		return &TimeoutError{Command: cmd, Target: b.target, After: d}
	}
	return err
}

// interrupted reports whether err is runWithin's report of a deadline or of ctx ending the run.
func interrupted(ctx context.Context, err error) bool {
	var te *TimeoutError
	return errors.As(err, &te) || (err != nil && ctx.Err() != nil)
}
