package framework

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"
)

// This file holds the background traffic prober of the self-healing tests
// (test/e2e/selfheal_test.go): a client that opens a new TCP connection to a Service address at a
// fixed rate whatever happens to earlier ones, and the summary of what it saw.

// ProberOptions tune StartProber.
type ProberOptions struct {
	// Interval between the starts of two connection attempts; default 50ms (20 connections/s).
	Interval time.Duration
	// Timeout bounds one attempt (connect and read the echo server's reply); default 2s.
	Timeout time.Duration
}

// ProbeAttempt is one connection of a Prober.
type ProbeAttempt struct {
	Start, End time.Time
	// Server is the echo server that answered ("" when the attempt failed).
	Server string
	// Err is why the attempt failed; nil for a success.
	Err error
}

// OK reports whether the attempt was answered.
func (a ProbeAttempt) OK() bool { return a.Err == nil }

// Prober opens a new TCP connection from a namespace (a pod) to an echo server address every
// Interval, each in its own goroutine, so that an outage does not slow the rate down, and records
// the time and outcome of every attempt.
type Prober struct {
	// from names where the connections come from; echo makes one attempt.
	from     string
	echo     func(ctx context.Context, addr string, timeout time.Duration) (EchoReply, error)
	addr     string
	opts     ProberOptions
	started  time.Time
	mu       sync.Mutex
	attempts []ProbeAttempt
	stop     chan struct{}
	stopOnce sync.Once
	loopDone chan struct{}
	inFlight sync.WaitGroup
}

// StartProber starts probing addr from ns; Stop ends it.
func StartProber(ns *NetNS, addr string, opts ProberOptions) *Prober {
	echo := func(ctx context.Context, addr string, timeout time.Duration) (EchoReply, error) {
		return ns.Echo(ctx, "tcp", addr, timeout)
	}
	return startProber("netns "+ns.Name, echo, addr, opts)
}

func startProber(from string, echo func(context.Context, string, time.Duration) (EchoReply, error), addr string, opts ProberOptions) *Prober {
	if opts.Interval <= 0 {
		opts.Interval = 50 * time.Millisecond
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Second
	}
	p := &Prober{from: from, echo: echo, addr: addr, opts: opts, started: time.Now(), stop: make(chan struct{}), loopDone: make(chan struct{})}
	go p.loop()
	return p
}

func (p *Prober) loop() {
	defer close(p.loopDone)
	ticker := time.NewTicker(p.opts.Interval)
	defer ticker.Stop()
	for {
		p.inFlight.Add(1)
		go p.attempt()
		select {
		case <-p.stop:
			return
		case <-ticker.C:
		}
	}
}

func (p *Prober) attempt() {
	defer p.inFlight.Done()
	start := time.Now()
	r, err := p.echo(context.Background(), p.addr, p.opts.Timeout)
	a := ProbeAttempt{Start: start, End: time.Now(), Server: r.Server, Err: err}
	p.mu.Lock()
	p.attempts = append(p.attempts, a)
	p.mu.Unlock()
}

// Addr is the address the prober connects to.
func (p *Prober) Addr() string { return p.addr }

// Attempts returns the attempts completed so far, by start time.
func (p *Prober) Attempts() []ProbeAttempt {
	p.mu.Lock()
	out := append([]ProbeAttempt(nil), p.attempts...)
	p.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out
}

// Stop ends probing, waits for the attempts in flight and returns every attempt. It is safe to
// call more than once.
func (p *Prober) Stop() []ProbeAttempt {
	p.stopOnce.Do(func() { close(p.stop) })
	<-p.loopDone
	p.inFlight.Wait()
	return p.Attempts()
}

// WaitHealthy waits until every attempt started during the last window (of those old enough to
// have finished, i.e. started more than Timeout ago) succeeded, and that window began at or after
// since. It fails after timeout, saying what the attempts since since looked like.
func (p *Prober) WaitHealthy(ctx context.Context, since time.Time, window, timeout time.Duration) error {
	what := fmt.Sprintf("connections from %s to %s to succeed for %v in a row (after %s)",
		p.from, p.addr, window, since.Format("15:04:05.000"))
	minAttempts := int(window/p.opts.Interval) / 2
	return Poll(ctx, timeout, what, func(context.Context) (bool, string, error) {
		end := time.Now().Add(-p.opts.Timeout)
		begin := end.Add(-window)
		if begin.Before(since) {
			return false, "waiting for the window to pass", nil
		}
		n := 0
		for _, a := range p.Attempts() {
			if a.Start.Before(begin) || a.Start.After(end) {
				continue
			}
			if !a.OK() {
				return false, fmt.Sprintf("the attempt started at %s failed: %v", a.Start.Format("15:04:05.000"), a.Err), nil
			}
			n++
		}
		if n < minAttempts {
			return false, fmt.Sprintf("only %d attempts finished in the window, want %d", n, minAttempts), nil
		}
		return true, "", nil
	})
}

// ProbeSummary is what a prober saw.
type ProbeSummary struct {
	Attempts, Failed int
	// LongestOutage runs from the start of the first failed attempt of a run of failures to the
	// end of the next successful attempt (the first answer again); an outage that never ended
	// runs to the end of the last attempt and sets OutageOngoing.
	LongestOutage time.Duration
	OutageOngoing bool
	// Recovered is false when the last attempt failed. Recovery is the time from the instant
	// given to Summarize until the end of the first successful attempt after which no attempt
	// failed (0 when nothing failed after that instant).
	Recovered bool
	Recovery  time.Duration
	// FirstFailure and LastFailure are the start times of the first and last failed attempts;
	// LastError is the error of the last one.
	FirstFailure, LastFailure time.Time
	LastError                 string
	// Span is from the start of the first attempt to the end of the last.
	Span time.Duration
}

// Summarize computes the summary of attempts (any order); since is the instant Recovery is
// measured from, e.g. when ovs-vswitchd accepted connections again.
func Summarize(attempts []ProbeAttempt, since time.Time) ProbeSummary {
	as := append([]ProbeAttempt(nil), attempts...)
	sort.Slice(as, func(i, j int) bool { return as[i].Start.Before(as[j].Start) })
	s := ProbeSummary{Attempts: len(as)}
	if len(as) == 0 {
		return s
	}
	var lastEnd time.Time
	for _, a := range as {
		if a.End.After(lastEnd) {
			lastEnd = a.End
		}
	}
	s.Span = lastEnd.Sub(as[0].Start)
	var outageStart time.Time
	lastFail := -1
	for i, a := range as {
		if !a.OK() {
			s.Failed++
			if s.FirstFailure.IsZero() {
				s.FirstFailure = a.Start
			}
			s.LastFailure, s.LastError, lastFail = a.Start, a.Err.Error(), i
			if outageStart.IsZero() {
				outageStart = a.Start
			}
			continue
		}
		if !outageStart.IsZero() {
			s.LongestOutage = max(s.LongestOutage, a.End.Sub(outageStart))
			outageStart = time.Time{}
		}
	}
	if !outageStart.IsZero() {
		s.OutageOngoing = true
		s.LongestOutage = max(s.LongestOutage, lastEnd.Sub(outageStart))
	}
	if lastFail == len(as)-1 {
		return s
	}
	s.Recovered = true
	if lastFail >= 0 {
		s.Recovery = max(0, as[lastFail+1].End.Sub(since))
	}
	return s
}

// String is a one-line report of the summary.
func (s ProbeSummary) String() string {
	out := fmt.Sprintf("%d of %d connections failed over %v, longest outage %v",
		s.Failed, s.Attempts, s.Span.Round(time.Millisecond), s.LongestOutage.Round(time.Millisecond))
	if s.OutageOngoing {
		out += " (still ongoing at the last attempt)"
	}
	if s.Recovered {
		out += fmt.Sprintf(", recovered %v after the reference instant", s.Recovery.Round(time.Millisecond))
	} else {
		out += ", never recovered"
	}
	if s.Failed > 0 {
		out += fmt.Sprintf("; failures from %s to %s, last error: %s",
			s.FirstFailure.Format("15:04:05.000"), s.LastFailure.Format("15:04:05.000"), s.LastError)
	}
	return out
}
