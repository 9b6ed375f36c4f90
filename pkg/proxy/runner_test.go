package proxy

import (
	"context"
	"errors"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

type syncCall struct {
	full bool
	at   time.Time
}

// runnerHarness drives a runner on a fake clock. Each sync reports on calls and returns the next
// of the results given to newRunnerHarness (nil once they are used up).
type runnerHarness struct {
	t       *testing.T
	clock   *clocktesting.FakeClock
	r       *runner
	calls   chan syncCall
	results chan error
}

func newRunnerHarness(t *testing.T, results ...error) *runnerHarness {
	h := &runnerHarness{t: t, clock: clocktesting.NewFakeClock(time.Unix(1000, 0)), calls: make(chan syncCall, 16), results: make(chan error, 16)}
	// Queued before the runner starts: its first sync runs at once.
	for _, err := range results {
		h.results <- err
	}
	h.r = newRunner(func(_ context.Context, full bool) error {
		h.calls <- syncCall{full: full, at: h.clock.Now()}
		select {
		case err := <-h.results:
			return err
		default:
			return nil
		}
	}, time.Second, 30*time.Second, h.clock)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.r.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return h
}

func (h *runnerHarness) expectCall(full bool) syncCall {
	h.t.Helper()
	select {
	case c := <-h.calls:
		if c.full != full {
			h.t.Fatalf("sync at %v: full=%v, want %v", c.at, c.full, full)
		}
		return c
	case <-time.After(5 * time.Second):
		h.t.Fatalf("no sync (full=%v) happened", full)
	}
	return syncCall{}
}

func (h *runnerHarness) expectNoCall() {
	h.t.Helper()
	select {
	case c := <-h.calls:
		h.t.Fatalf("unexpected sync at %v (full=%v)", c.at, c.full)
	case <-time.After(50 * time.Millisecond):
	}
}

// waitTimer blocks until the runner is waiting on a timer, then advances the clock by d.
func (h *runnerHarness) step(d time.Duration) {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !h.clock.HasWaiters() {
		if time.Now().After(deadline) {
			h.t.Fatal("the runner never waited on a timer")
		}
		time.Sleep(time.Millisecond)
	}
	h.clock.Step(d)
}

func TestRunnerFirstSyncIsFullAndImmediate(t *testing.T) {
	h := newRunnerHarness(t)
	c := h.expectCall(true)
	if !c.at.Equal(time.Unix(1000, 0)) {
		t.Fatalf("first sync at %v, want at once", c.at)
	}
}

func TestRunnerCoalescesRequestsWithinMinInterval(t *testing.T) {
	h := newRunnerHarness(t)
	h.expectCall(true)
	h.step(100 * time.Millisecond) // let the runner settle on its full-period timer
	h.r.Request()
	h.r.Request()
	h.r.Request()
	h.expectNoCall() // still inside the 1s minimum interval
	h.step(900 * time.Millisecond)
	c := h.expectCall(false)
	if got := c.at.Sub(time.Unix(1000, 0)); got != time.Second {
		t.Fatalf("incremental sync at +%v, want +1s (the minimum interval)", got)
	}
	h.expectNoCall() // three requests, one sync
}

func TestRunnerBacksOffAfterFailure(t *testing.T) {
	h := newRunnerHarness(t, errors.New("ovs down"), errors.New("ovs still down"))
	h.expectCall(true)
	h.step(time.Second)
	c := h.expectCall(true) // a failed full sync is retried as a full sync
	if got := c.at.Sub(time.Unix(1000, 0)); got != time.Second {
		t.Fatalf("first retry at +%v, want +1s", got)
	}
	h.step(time.Second)
	h.expectNoCall() // backoff doubled to 2s
	h.step(time.Second)
	c = h.expectCall(true)
	if got := c.at.Sub(time.Unix(1000, 0)); got != 3*time.Second {
		t.Fatalf("second retry at +%v, want +3s (1s, then 2s backoff)", got)
	}
}

func TestRunnerPeriodicFullSync(t *testing.T) {
	h := newRunnerHarness(t)
	h.expectCall(true)
	h.step(30 * time.Second)
	c := h.expectCall(true)
	if got := c.at.Sub(time.Unix(1000, 0)); got != 30*time.Second {
		t.Fatalf("periodic full sync at +%v, want +30s", got)
	}
}

// TestRunnerPeriodicFullSyncDoesNotDelayChanges: a request right after a periodic full resync
// runs at once (the minimum interval paces requested syncs only), and the minimum interval
// still paces the requests after it.
func TestRunnerPeriodicFullSyncDoesNotDelayChanges(t *testing.T) {
	h := newRunnerHarness(t)
	h.expectCall(true)
	h.step(30 * time.Second)
	h.expectCall(true)
	h.r.Request()
	c := h.expectCall(false)
	if got := c.at.Sub(time.Unix(1000, 0)); got != 30*time.Second {
		t.Fatalf("the request after the periodic full sync ran at +%v, want +30s (at once)", got)
	}
	h.r.Request()
	h.expectNoCall() // inside the minimum interval of the requested sync
	h.step(time.Second)
	c = h.expectCall(false)
	if got := c.at.Sub(time.Unix(1000, 0)); got != 31*time.Second {
		t.Fatalf("the next request ran at +%v, want +31s", got)
	}
}
