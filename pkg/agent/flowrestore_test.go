package agent

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// fakeSyncer is a proxier whose syncs the test sets; every SyncState call is reported on
// asked (and waits while the previous report is not taken), so the test knows the gate has
// looked.
type fakeSyncer struct {
	mu    sync.Mutex
	syncs int
	err   error
	asked chan struct{}
	// base counts InstallBaseFlows calls.
	base int
}

func (f *fakeSyncer) InstallBaseFlows(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.base++
	return nil
}

func (f *fakeSyncer) baseCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.base
}

func (f *fakeSyncer) SyncState() (time.Time, int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	syncs, err := f.syncs, f.err
	f.mu.Unlock()
	f.asked <- struct{}{}
	f.mu.Lock()
	return time.Time{}, syncs, err
}

func (f *fakeSyncer) set(syncs int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.syncs, f.err = syncs, err
}

// fakeFlowRestoreDB holds flow-restore-wait.
type fakeFlowRestoreDB struct {
	mu      sync.Mutex
	on      bool
	cleared chan struct{}
}

func (d *fakeFlowRestoreDB) FlowRestoreWait(context.Context) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.on, nil
}

func (d *fakeFlowRestoreDB) SetFlowRestoreWait(_ context.Context, on bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.on = on
	if !on {
		close(d.cleared)
	}
	return nil
}

func (d *fakeFlowRestoreDB) isOn() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.on
}

type gateFixture struct {
	clk  *clocktesting.FakeClock
	prox *fakeSyncer
	db   *fakeFlowRestoreDB
	done chan struct{}
}

func startGate(t *testing.T) *gateFixture {
	f := &gateFixture{clk: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		prox: &fakeSyncer{asked: make(chan struct{}, 1)}, db: &fakeFlowRestoreDB{on: true, cleared: make(chan struct{})},
		done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); <-f.done })
	go func() {
		defer close(f.done)
		flowRestoreGate{clock: f.clk, proxier: f.prox, db: f.db, timeout: 30 * time.Second}.run(ctx)
	}()
	f.waitAsked(t)
	return f
}

// waitAsked waits until the gate has looked at the proxier.
func (f *gateFixture) waitAsked(t *testing.T) {
	t.Helper()
	select {
	case <-f.prox.asked:
	case <-time.After(10 * time.Second):
		t.Fatal("the gate never looked at the proxier")
	}
}

// step advances the clock by one poll and waits until the gate has looked again.
func (f *gateFixture) step(t *testing.T, d time.Duration) {
	t.Helper()
	for !f.clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	f.clk.Step(d)
	f.waitAsked(t)
}

func (f *gateFixture) waitCleared(t *testing.T) {
	t.Helper()
	select {
	case <-f.db.cleared:
	case <-time.After(10 * time.Second):
		t.Fatal("flow-restore-wait was never cleared")
	}
}

// TestFlowRestoreGateHealthyStart: flow-restore-wait stays set until the proxier's first sync,
// then is cleared at once.
func TestFlowRestoreGateHealthyStart(t *testing.T) {
	f := startGate(t)
	for range 50 {
		f.step(t, flowRestorePoll)
		require.True(t, f.db.isOn(), "cleared before the proxier synced")
	}
	f.prox.set(1, nil)
	f.clk.Step(flowRestorePoll)
	f.waitCleared(t)
	require.Zero(t, f.prox.baseCalls(), "the first sync installed the node-level flows")
}

// TestFlowRestoreGateProxierNeverSyncs: a proxier that fails every sync holds flow-restore-wait
// for the timeout only, after which its node-level flows are installed without Services and it
// is cleared (the gateway and pod flows are in).
func TestFlowRestoreGateProxierNeverSyncs(t *testing.T) {
	f := startGate(t)
	f.prox.set(0, errors.New("OVS rejected the bundle"))
	f.step(t, 29*time.Second)
	require.True(t, f.db.isOn(), "cleared before the timeout")
	require.Zero(t, f.prox.baseCalls())
	f.step(t, time.Second)
	f.waitCleared(t)
	require.Equal(t, 1, f.prox.baseCalls(), "the node-level flows go in before flow-restore-wait is cleared")
}

// blockingOwner is a proxier owner whose Replay waits for release and returns its error.
type blockingOwner struct {
	release chan error
	started chan struct{}
}

func (blockingOwner) Name() string { return "proxier" }
func (blockingOwner) Verify(context.Context, openflow.FlowCounter) (bool, error) {
	return true, nil
}
func (o blockingOwner) Replay(context.Context) error {
	o.started <- struct{}{}
	return <-o.release
}

// TestBoundedReplayGivesUpAfterTimeout: a replay blocked behind a long sync holds the healer
// for the timeout only; a later call waits for the same replay instead of starting another;
// one that keeps failing is reported as failed until the timeout, then as done; success is
// reported at once.
func TestBoundedReplayGivesUpAfterTimeout(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	o := blockingOwner{release: make(chan error, 1), started: make(chan struct{}, 4)}
	b := newBoundedReplay(o, clk, 30*time.Second)
	ctx := context.Background()

	res := make(chan error, 1)
	go func() { res <- b.Replay(ctx) }()
	<-o.started
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	clk.Step(30 * time.Second)
	require.NoError(t, <-res, "a replay blocked for the timeout is given up on")

	// The replay still running is waited for, not started again; it succeeds.
	go func() { res <- b.Replay(ctx) }()
	o.release <- nil
	require.NoError(t, <-res)
	require.Empty(t, o.started, "no second replay while one was running")

	// Failing replays: errors until the timeout, then done.
	o.release <- errors.New("OFPBAC_BAD_ARGUMENT")
	err := b.Replay(ctx)
	require.Error(t, err)
	<-o.started
	clk.Step(31 * time.Second)
	o.release <- errors.New("OFPBAC_BAD_ARGUMENT")
	require.NoError(t, b.Replay(ctx), "a replay failing for longer than the timeout is given up on")
	<-o.started
}
