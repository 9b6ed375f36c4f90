package healer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// journal records what the fakes were asked to do, in order.
type journal struct {
	mu     sync.Mutex
	events []string
}

func (j *journal) add(e string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.events = append(j.events, e)
}

func (j *journal) get() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]string(nil), j.events...)
}

func (j *journal) count(e string) int {
	n := 0
	for _, x := range j.get() {
		if x == e {
			n++
		}
	}
	return n
}

// fakeOwner replays into the journal; failReplays makes its first N replays fail.
type fakeOwner struct {
	name string
	j    *journal

	mu          sync.Mutex
	failReplays int
	verifyOK    bool
	verifyErr   error
	counter     openflow.FlowCounter
}

func (o *fakeOwner) Name() string { return o.name }

func (o *fakeOwner) Verify(_ context.Context, c openflow.FlowCounter) (bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.counter = c
	o.j.add("verify " + o.name)
	return o.verifyOK, o.verifyErr
}

func (o *fakeOwner) Replay(context.Context) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.failReplays > 0 {
		o.failReplays--
		o.j.add("replay-failed " + o.name)
		return fmt.Errorf("%s refused", o.name)
	}
	o.j.add("replay " + o.name)
	return nil
}

type fakeCounter struct{}

func (fakeCounter) CountFlows(context.Context, openflow.FlowFilter) (int, error) { return 0, nil }

// TableStats fails, so every check verifies every owner (the statistics request failed).
func (fakeCounter) TableStats(context.Context) ([]openflow.TableStats, error) {
	return nil, errors.New("no table statistics")
}

type fixture struct {
	h      *Healer
	clk    *clocktesting.FakeClock
	resets chan struct{}
	j      *journal
	owners []*fakeOwner
	cancel context.CancelFunc
	done   chan struct{}
}

const retryInitial = 100 * time.Millisecond

func newFixture(t *testing.T, checkInterval time.Duration, names ...string) *fixture {
	t.Helper()
	f := &fixture{clk: clocktesting.NewFakeClock(time.Unix(1000, 0)), resets: make(chan struct{}), j: &journal{}, done: make(chan struct{})}
	var owners []Owner
	for _, n := range names {
		o := &fakeOwner{name: n, j: f.j, verifyOK: true}
		f.owners = append(f.owners, o)
		owners = append(owners, o)
	}
	f.h = New(Options{
		Counter: fakeCounter{}, Owners: owners, Resets: f.resets, CheckInterval: checkInterval,
		RetryInitial: retryInitial, RetryMax: time.Second, Clock: f.clk,
		AfterReplayAll: func(context.Context) error { f.j.add("after"); return nil },
	})
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	go func() { defer close(f.done); f.h.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-f.done })
	f.waitFor(t, "Run's ticker", func() bool { return f.clk.Waiters() == 1 })
	return f
}

// waitFor polls cond until it holds or a deadline passes.
func (f *fixture) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; journal: %q", what, f.j.get())
		}
		time.Sleep(time.Millisecond)
	}
}

func TestResetReplaysOwnersInOrderThenAfterReplayAll(t *testing.T) {
	f := newFixture(t, time.Hour, "gateway", "pods", "proxier")
	f.resets <- struct{}{}
	f.waitFor(t, "AfterReplayAll", func() bool { return f.j.count("after") == 1 })
	want := []string{"replay gateway", "replay pods", "replay proxier", "after"}
	if got := f.j.get(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("journal = %q, want %q", got, want)
	}
	// A second reset replays everything again.
	f.resets <- struct{}{}
	f.waitFor(t, "second AfterReplayAll", func() bool { return f.j.count("after") == 2 })
	if n := f.j.count("replay pods"); n != 2 {
		t.Fatalf("pods replayed %d times after two resets, want 2", n)
	}
	st := f.h.Stats().Owners["proxier"]
	if st.Replays[TriggerReset] != 2 {
		t.Fatalf("proxier reset replays = %d, want 2", st.Replays[TriggerReset])
	}
}

func TestFailingOwnerIsRetriedAndAfterReplayAllWaits(t *testing.T) {
	f := newFixture(t, time.Hour, "gateway", "pods", "proxier")
	f.owners[1].failReplays = 2
	f.resets <- struct{}{}
	// First pass: pods fails, the others succeed; a retry timer is pending.
	f.waitFor(t, "first retry timer", func() bool { return f.clk.Waiters() == 2 })
	if f.j.count("after") != 0 {
		t.Fatal("AfterReplayAll ran while an owner had failed")
	}
	f.clk.Step(retryInitial)
	f.waitFor(t, "second failure", func() bool { return f.j.count("replay-failed pods") == 2 })
	f.waitFor(t, "second retry timer", func() bool { return f.clk.Waiters() == 2 })
	if f.j.count("after") != 0 {
		t.Fatal("AfterReplayAll ran while an owner had failed")
	}
	f.clk.Step(retryInitial) // the backoff doubled: not yet
	if f.j.count("replay pods") != 0 {
		t.Fatal("retried before the doubled backoff elapsed")
	}
	f.clk.Step(retryInitial)
	f.waitFor(t, "AfterReplayAll", func() bool { return f.j.count("after") == 1 })
	want := []string{"replay gateway", "replay-failed pods", "replay proxier", "replay-failed pods", "replay pods", "after"}
	if got := f.j.get(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("journal = %q, want %q", got, want)
	}
	if n := f.h.Stats().Owners["pods"].ReplayFailures[TriggerReset]; n != 2 {
		t.Fatalf("pods failures = %d, want 2", n)
	}
}

func TestResetDuringRetryStartsOver(t *testing.T) {
	f := newFixture(t, time.Hour, "gateway", "pods")
	f.owners[1].failReplays = 1
	f.resets <- struct{}{}
	f.waitFor(t, "retry timer", func() bool { return f.clk.Waiters() == 2 })
	f.resets <- struct{}{}
	f.waitFor(t, "AfterReplayAll", func() bool { return f.j.count("after") == 1 })
	want := []string{"replay gateway", "replay-failed pods", "replay gateway", "replay pods", "after"}
	if got := f.j.get(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("journal = %q, want %q", got, want)
	}
}

func TestMismatchReplaysOnlyThatOwner(t *testing.T) {
	f := newFixture(t, 5*time.Second, "gateway", "pods", "proxier")
	f.owners[1].verifyOK = false
	f.clk.Step(5 * time.Second)
	f.waitFor(t, "the check of every owner", func() bool { return f.j.count("verify proxier") == 1 })
	want := []string{"verify gateway", "verify pods", "replay pods", "verify proxier"}
	if got := f.j.get(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("journal = %q, want %q", got, want)
	}
	if f.owners[0].counter == nil {
		t.Fatal("Verify was not given the counter")
	}
	st := f.h.Stats().Owners["pods"]
	if st.Mismatches != 1 || st.Replays[TriggerMismatch] != 1 {
		t.Fatalf("pods stats = %+v, want one mismatch and one mismatch replay", st)
	}
	reg := prometheus.NewRegistry()
	if err := f.h.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += "," + l.GetName() + "=" + l.GetValue()
			}
			series[key] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	for key, want := range map[string]float64{
		"antrea_proxy_healer_mismatches_total,owner=pods":                                 1,
		"antrea_proxy_healer_mismatches_total,owner=gateway":                              0,
		"antrea_proxy_healer_replays_total,owner=pods,result=success,trigger=mismatch":    1,
		"antrea_proxy_healer_replays_total,owner=gateway,result=success,trigger=mismatch": 0,
		"antrea_proxy_healer_last_replay_duration_seconds,owner=pods":                     0,
		"antrea_proxy_healer_change_reports_total":                                        0,
		"antrea_proxy_healer_watching":                                                    0,
	} {
		if got, ok := series[key]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", key, got, ok, want)
		}
	}
	if len(series) != 3*(6+3)+5 {
		t.Errorf("%d series, want %d (3 owners x (6 replay series + 3 others), 2 check kinds, table stats errors, change reports, watching)",
			len(series), 3*(6+3)+5)
	}
}

func TestVerifyErrorReplaysNothing(t *testing.T) {
	f := newFixture(t, 5*time.Second, "gateway", "pods")
	f.owners[0].verifyErr = errors.New("ovs-ofctl timed out")
	f.owners[0].verifyOK = false
	f.clk.Step(5 * time.Second)
	f.waitFor(t, "the check of every owner", func() bool { return f.j.count("verify pods") == 1 })
	want := []string{"verify gateway", "verify pods"}
	if got := f.j.get(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("journal = %q, want %q", got, want)
	}
	if n := f.h.Stats().Owners["gateway"].VerifyErrors; n != 1 {
		t.Fatalf("gateway verify errors = %d, want 1", n)
	}
}

func TestReplayAllReturnsAfterAfterReplayAll(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	j := &journal{}
	a := &fakeOwner{name: "a", j: j}
	calls := 0
	h := New(Options{Owners: []Owner{a}, Clock: clk, RetryInitial: retryInitial,
		AfterReplayAll: func(context.Context) error {
			calls++
			if calls == 1 {
				return errors.New("ovsdb down")
			}
			j.add("after")
			return nil
		}})
	errc := make(chan error, 1)
	go func() { errc <- h.ReplayAll(context.Background()) }()
	deadline := time.Now().Add(5 * time.Second)
	for clk.Waiters() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no retry of the failed AfterReplayAll")
		}
		time.Sleep(time.Millisecond)
	}
	clk.Step(retryInitial)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	// The owner is not replayed again when only AfterReplayAll failed.
	if got := j.get(); strings.Join(got, ",") != "replay a,after" {
		t.Fatalf("journal = %q", got)
	}
	if n := h.Stats().Owners["a"].Replays[TriggerStartup]; n != 1 {
		t.Fatalf("startup replays = %d, want 1", n)
	}
}

func TestReplayAllStopsWithContext(t *testing.T) {
	a := &fakeOwner{name: "a", j: &journal{}, failReplays: 1 << 30}
	h := New(Options{Owners: []Owner{a}, Clock: clocktesting.NewFakeClock(time.Unix(0, 0))})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.ReplayAll(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("ReplayAll = %v, want context.Canceled", err)
	}
}
