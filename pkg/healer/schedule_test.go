package healer

import (
	"sync/atomic"
	"testing"
	"time"
)

// fakeFeed is a ChangeFeed the test drives.
type fakeFeed struct {
	ch       chan struct{}
	watching atomic.Bool
}

func newFakeFeed(watching bool) *fakeFeed {
	f := &fakeFeed{ch: make(chan struct{}, 1)}
	f.watching.Store(watching)
	return f
}

func (f *fakeFeed) Changes() <-chan struct{} { return f.ch }
func (f *fakeFeed) Watching() bool           { return f.watching.Load() }
func (f *fakeFeed) report()                  { f.ch <- struct{}{} }

func (o *tableOwner) setVerify(ok bool) {
	o.mu.Lock()
	o.verifyOK = ok
	o.mu.Unlock()
}

// newWatchedFixture is a table fixture (checks every 5 s when not watching) whose healer takes
// feed's reports and checks every 30 s while it watches.
func newWatchedFixture(t *testing.T, feed *fakeFeed) *tableFixture {
	return newTableFixture(t, -1, func(o *Options) { o.Changes, o.WatchedCheckInterval = feed, 30*time.Second })
}

// settle waits for the check under way (started by a report or a due timer) to be done: it
// read the table statistics n times in all and released opMu.
func (f *tableFixture) settle(t *testing.T, n int) {
	t.Helper()
	f.waitFor(t, "the table statistics", func() bool { return f.j.count("tables") == n })
	f.h.opMu.Lock()
	//lint:ignore SA2001 taking the lock is the wait: the check holds it until it is done
	f.h.opMu.Unlock()
}

// TestWatchedChecksOnReportsAndEvery30s: while the feed watches, the periodic check runs every
// 30 s; a report is checked at once when no check ran for CheckInterval (5 s), else once that
// much passed since the last one, and several reports meanwhile make one check.
func TestWatchedChecksOnReportsAndEvery30s(t *testing.T) {
	feed := newFakeFeed(true)
	f := newWatchedFixture(t, feed)
	f.clk.Step(5 * time.Second)
	f.clk.Step(5 * time.Second)
	if n := f.j.count("tables"); n != 0 {
		t.Fatalf("%d checks in 10 s while watching, want 0", n)
	}
	feed.report() // no check ran yet: at once (the first check, a full one)
	f.settle(t, 1)
	feed.report() // 0 s after the last check: pending until 5 s after it
	f.waitFor(t, "the pending check's timer", func() bool { return f.clk.Waiters() == 2 })
	feed.report() // coalesced with the pending one
	f.clk.Step(4 * time.Second)
	if n := f.j.count("tables"); n != 1 {
		t.Fatalf("%d checks 4 s after the last, want 1", n)
	}
	f.clk.Step(time.Second)
	f.settle(t, 2)
	if st := f.h.Stats(); st.ChangeReports != 3 || st.FullChecks != 1 {
		t.Fatalf("stats %+v, want 3 change reports and 1 full check", st)
	}
	f.waitFor(t, "the ticker alone", func() bool { return f.clk.Waiters() == 1 })
	f.clk.Step(15 * time.Second) // 30 s after Run started
	f.settle(t, 3)
}

// TestWatchedCheckAfterReplayFollowsUp: a check that replayed an owner is followed by another
// CheckInterval later (the replay's own changes are not reported), which records the baseline.
func TestWatchedCheckAfterReplayFollowsUp(t *testing.T) {
	feed := newFakeFeed(true)
	f := newWatchedFixture(t, feed)
	feed.report()
	f.settle(t, 1)
	f.tables.set(14, 90) // del-flows of 10 of the proxier's flows
	f.proxy.setVerify(false)
	feed.report()
	f.waitFor(t, "the pending check's timer", func() bool { return f.clk.Waiters() == 2 })
	f.clk.Step(5 * time.Second)
	f.settle(t, 2)
	if n := f.j.count("replay proxier"); n != 1 {
		t.Fatalf("%d replays of the proxier, want 1; journal %q", n, f.j.get())
	}
	f.tables.set(14, 100) // the replay put them back
	f.proxy.setVerify(true)
	f.waitFor(t, "the follow-up's timer", func() bool { return f.clk.Waiters() == 2 })
	f.clk.Step(5 * time.Second)
	f.settle(t, 3)
	f.h.opMu.Lock()
	settled := f.h.tables.baseline != nil
	f.h.opMu.Unlock()
	if !settled {
		t.Fatalf("no baseline after the follow-up check; journal %q", f.j.get())
	}
	f.waitFor(t, "no follow-up after a settled check", func() bool { return f.clk.Waiters() == 1 })
}

// TestNotWatchingChecksEveryCheckInterval: a feed that does not watch (no connection, a
// refused monitor) leaves the check at every CheckInterval; when it starts watching, its
// report is checked and the period becomes 30 s.
func TestNotWatchingChecksEveryCheckInterval(t *testing.T) {
	feed := newFakeFeed(false)
	f := newWatchedFixture(t, feed)
	f.clk.Step(5 * time.Second)
	f.settle(t, 1)
	f.clk.Step(5 * time.Second)
	f.settle(t, 2)
	feed.watching.Store(true)
	feed.report() // 0 s after the last check: pending; the ticker now runs every 30 s
	// The fake clock keeps a stopped ticker among its waiters: the 5 s one, the 30 s one and the
	// pending check's timer.
	f.waitFor(t, "the 30 s ticker and the pending check's timer", func() bool { return f.clk.Waiters() == 3 })
	f.clk.Step(5 * time.Second)
	f.settle(t, 3)
	f.clk.Step(20 * time.Second)
	if n := f.j.count("tables"); n != 3 {
		t.Fatalf("%d checks 25 s after watching started, want 3", n)
	}
	f.clk.Step(5 * time.Second)
	f.settle(t, 4)
}
