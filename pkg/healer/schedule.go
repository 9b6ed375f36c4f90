package healer

import (
	"time"

	"k8s.io/utils/clock"
)

// ChangeFeed reports the changes of the bridge's flows that the agent's owners did not make:
// an OpenFlow flow monitor on the agent's own connection (native.FlowWatch), for which the
// switch abbreviates the agent's own changes.
type ChangeFeed interface {
	// Changes receives a value after the switch reported such a change, and whenever Watching
	// changes. Sends coalesce.
	Changes() <-chan struct{}
	// Watching reports whether changes are being reported now (false without a connection,
	// or when the switch refused the monitor).
	Watching() bool
}

// schedule decides when the periodic check runs: every CheckInterval while no ChangeFeed is
// watching; while one is, every WatchedCheckInterval, and after each change it reports, at most
// once per CheckInterval. At rest a watched bridge then costs two table statistics requests a
// minute instead of sixty, and a foreign change is checked as soon as it is reported instead of
// at the next tick.
type schedule struct {
	clk        clock.WithTicker
	feed       ChangeFeed
	fast, slow time.Duration

	ticker clock.Ticker
	period time.Duration
	// timer is the check pending after a change report, nil when none is.
	timer clock.Timer
	// last is when the last check ran (zero before the first).
	last time.Time
}

func newSchedule(clk clock.WithTicker, feed ChangeFeed, fast, slow time.Duration) *schedule {
	s := &schedule{clk: clk, feed: feed, fast: fast, slow: slow}
	s.retune()
	return s
}

// tick fires at the current period.
func (s *schedule) tick() <-chan time.Time { return s.ticker.C() }

// changes receives the feed's reports; nil without a feed.
func (s *schedule) changes() <-chan struct{} {
	if s.feed == nil {
		return nil
	}
	return s.feed.Changes()
}

// pending fires when the check pending after a change report is due; nil when none is.
func (s *schedule) pending() <-chan time.Time {
	if s.timer == nil {
		return nil
	}
	return s.timer.C()
}

// changed takes a change report: it says whether to check now (no check ran for CheckInterval);
// otherwise a check is pending.
func (s *schedule) changed() bool {
	s.retune()
	wait := s.fast - s.clk.Since(s.last)
	if s.last.IsZero() || wait <= 0 {
		return true
	}
	if s.timer == nil {
		s.timer = s.clk.NewTimer(wait)
	}
	return false
}

// checked records a check that just ran. Unless it settled (found OVS as installed), the next
// one is due in CheckInterval: after a replay, to confirm it (the replay's own changes are not
// reported), and after a check that could not tell.
func (s *schedule) checked(settled bool) {
	s.last = s.clk.Now()
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	s.retune()
	if !settled && s.period != s.fast {
		s.timer = s.clk.NewTimer(s.fast)
	}
}

// retune sets the ticker's period from whether the feed is watching.
func (s *schedule) retune() {
	p := s.fast
	if s.feed != nil && s.feed.Watching() {
		p = s.slow
	}
	if p == s.period {
		return
	}
	if s.ticker != nil {
		s.ticker.Stop()
	}
	s.ticker, s.period = s.clk.NewTicker(p), p
}

func (s *schedule) stop() {
	s.ticker.Stop()
	if s.timer != nil {
		s.timer.Stop()
	}
}
