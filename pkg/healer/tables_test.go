package healer

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// fakeTables is a Counter that also reports table statistics: flows per table, as a switch
// would hold them. Every TableStats call is journalled as "tables".
type fakeTables struct {
	j *journal

	mu    sync.Mutex
	held  map[uint8]int
	err   error
	calls int
}

func (f *fakeTables) CountFlows(context.Context, openflow.FlowFilter) (int, error) { return 0, nil }

func (f *fakeTables) TableStats(context.Context) ([]openflow.TableStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.j.add("tables")
	if f.err != nil {
		return nil, f.err
	}
	var out []openflow.TableStats
	for t := 0; t < 254; t++ {
		out = append(out, openflow.TableStats{Table: uint8(t), Active: uint64(f.held[uint8(t)])})
	}
	return out, nil
}

func (f *fakeTables) set(t uint8, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.held[t] = n
}

// tableOwner is a fakeOwner that says what it installed per table (TableCounts).
type tableOwner struct {
	*fakeOwner
	tmu       sync.Mutex
	installed openflow.InstalledFlows
	cannot    bool
	asked     int // InstalledFlows calls
	vcalls    int // InstalledVersion calls
}

func (o *tableOwner) InstalledVersion() (uint64, bool) {
	o.tmu.Lock()
	defer o.tmu.Unlock()
	o.vcalls++
	return o.installed.Version, !o.cannot
}

func (o *tableOwner) InstalledFlows() (openflow.InstalledFlows, bool) {
	o.tmu.Lock()
	defer o.tmu.Unlock()
	o.asked++
	return o.installed, !o.cannot
}

type tableFixture struct {
	*fixture
	tables *fakeTables
	proxy  *tableOwner
}

// newTableFixture runs a healer with a table-counting Counter, a "pods" owner that does not
// count per table and a "proxier" that does (Options.Tables): the switch holds the proxier's 100 flows in table
// 14, 5 in table 13 (which also holds learned flows) and, in table 0, 3 pod flows and 1 foreign
// flow.
func newTableFixture(t *testing.T, fullEvery time.Duration, configure ...func(*Options)) *tableFixture {
	t.Helper()
	j := &journal{}
	f := &tableFixture{fixture: &fixture{clk: clocktesting.NewFakeClock(time.Unix(1000, 0)), resets: make(chan struct{}), j: j, done: make(chan struct{})}}
	f.tables = &fakeTables{j: j, held: map[uint8]int{0: 4, 13: 5, 14: 100}}
	pods := &fakeOwner{name: "pods", j: j, verifyOK: true}
	f.proxy = &tableOwner{fakeOwner: &fakeOwner{name: "proxier", j: j, verifyOK: true},
		installed: openflow.InstalledFlows{PerTable: map[uint8]int{13: 5, 14: 100}, Learned: []uint8{13}, Version: 2}}
	f.owners = []*fakeOwner{pods, f.proxy.fakeOwner}
	opts := Options{Counter: f.tables, Owners: []Owner{pods, f.proxy}, Tables: []TableCounts{f.proxy}, Resets: f.resets, CheckInterval: 5 * time.Second,
		FullCheckInterval: fullEvery, RetryInitial: retryInitial, RetryMax: time.Second, Clock: f.clk}
	for _, c := range configure {
		c(&opts)
	}
	f.h = New(opts)
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	go func() { defer close(f.done); f.h.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-f.done })
	f.waitFor(t, "Run's ticker", func() bool { return f.clk.Waiters() == 1 })
	return f
}

// tick runs one check and waits until it read the table statistics and wantVerifies Verify
// calls happened in all.
func (f *tableFixture) tick(t *testing.T, wantVerifies int) {
	t.Helper()
	calls := f.j.count("tables")
	f.clk.Step(5 * time.Second)
	f.waitFor(t, "the table statistics", func() bool { return f.j.count("tables") == calls+1 })
	f.waitFor(t, "the verifies", func() bool { return f.j.count("verify proxier") >= wantVerifies })
	// The check holds opMu from before it reads the statistics until it is done: wait for it.
	f.h.opMu.Lock()
	//lint:ignore SA2001 taking the lock is the wait: the check holds it until it is done
	f.h.opMu.Unlock()
	if got := f.j.count("verify proxier"); got != wantVerifies {
		t.Fatalf("%d full checks, want %d; journal %q", got, wantVerifies, f.j.get())
	}
}

func TestTableCheckAtRestVerifiesNoOwner(t *testing.T) {
	f := newTableFixture(t, -1)
	f.tick(t, 1) // the first check verifies every owner and records the baseline
	for i := 0; i < 5; i++ {
		f.tick(t, 1)
	}
	st := f.h.Stats()
	if st.TableChecks != 6 || st.FullChecks != 1 {
		t.Fatalf("stats %+v, want 6 table checks and 1 full check", st)
	}
	if f.j.count("replay proxier")+f.j.count("replay pods") != 0 {
		t.Fatalf("replays at rest: %q", f.j.get())
	}
}

func TestTableCheckLostFlowReplaysTheOwner(t *testing.T) {
	f := newTableFixture(t, -1)
	f.tick(t, 1)
	f.tables.set(14, 99) // `ovs-ofctl del-flows` of one of the proxier's flows
	f.proxy.mu.Lock()
	f.proxy.verifyOK = false
	f.proxy.mu.Unlock()
	f.tick(t, 2)
	if f.j.count("replay proxier") != 1 || f.j.count("replay pods") != 0 {
		t.Fatalf("journal %q, want one replay of the proxier", f.j.get())
	}
	// After the replay the next check is a full one again.
	f.tables.set(14, 100)
	f.proxy.mu.Lock()
	f.proxy.verifyOK = true
	f.proxy.mu.Unlock()
	f.tick(t, 3)
	f.tick(t, 3)
}

func TestTableCheckOtherOwnerChangeRebaselines(t *testing.T) {
	f := newTableFixture(t, -1)
	f.tick(t, 1)
	f.tables.set(0, 6) // a pod was added: two more flows in table 0
	f.tick(t, 2)       // every owner verifies; all match: no replay
	f.tick(t, 2)       // the new surplus is the baseline
	if n := f.j.count("replay proxier") + f.j.count("replay pods"); n != 0 {
		t.Fatalf("%d replays, want none: %q", n, f.j.get())
	}
	f.tables.set(0, 0) // the whole bridge's table 0 deleted
	f.owners[0].mu.Lock()
	f.owners[0].verifyOK = false
	f.owners[0].mu.Unlock()
	f.tick(t, 3)
	if f.j.count("replay pods") != 1 {
		t.Fatalf("journal %q, want a replay of pods", f.j.get())
	}
}

func TestTableCheckLearnedTable(t *testing.T) {
	f := newTableFixture(t, -1)
	f.tick(t, 1)
	f.tables.set(13, 40) // learned flows come...
	f.tick(t, 1)
	f.tables.set(13, 7) // ...and go: no full check
	f.tick(t, 1)
	f.tables.set(13, 4) // fewer than the proxier installed there: verify
	f.tick(t, 2)
}

func TestTableCheckInstalledChangeMatchesWithoutVerify(t *testing.T) {
	f := newTableFixture(t, -1)
	f.tick(t, 1)
	// The proxier installed 10 more flows and OVS holds them: nothing to verify.
	f.proxy.tmu.Lock()
	f.proxy.installed = openflow.InstalledFlows{PerTable: map[uint8]int{13: 5, 14: 110}, Learned: []uint8{13}, Version: 4}
	f.proxy.tmu.Unlock()
	f.tables.set(14, 110)
	f.tick(t, 1)
	f.tick(t, 1)
	f.proxy.tmu.Lock()
	defer f.proxy.tmu.Unlock()
	if f.proxy.asked != 2 {
		t.Fatalf("InstalledFlows asked %d times, want 2 (once per version)", f.proxy.asked)
	}
}

// TestTableCheckOwnerCannotTellWaits: while an owner's bundle is in flight a check does
// nothing (neither statistics nor Verify); the next one decides.
func TestTableCheckOwnerCannotTellWaits(t *testing.T) {
	f := newTableFixture(t, -1)
	f.tick(t, 1)
	f.proxy.tmu.Lock()
	f.proxy.cannot = true
	f.proxy.tmu.Unlock()
	calls := f.j.count("tables")
	f.proxy.tmu.Lock()
	vcalls := f.proxy.vcalls
	f.proxy.tmu.Unlock()
	f.clk.Step(5 * time.Second)
	f.waitFor(t, "the skipped check", func() bool {
		f.proxy.tmu.Lock()
		defer f.proxy.tmu.Unlock()
		return f.proxy.vcalls > vcalls
	})
	f.h.opMu.Lock()
	//lint:ignore SA2001 taking the lock is the wait: the check holds it until it is done
	f.h.opMu.Unlock()
	f.proxy.tmu.Lock()
	f.proxy.cannot = false
	f.proxy.tmu.Unlock()
	f.tick(t, 1)
	if got := f.j.count("tables"); got != calls+1 {
		t.Fatalf("%d table statistics requests after the skipped check, want %d: %q", got, calls+1, f.j.get())
	}
}

func TestTableCheckPeriodicFullCheck(t *testing.T) {
	f := newTableFixture(t, 15*time.Second)
	f.tick(t, 1)
	f.tick(t, 1)
	f.tick(t, 1)
	f.tick(t, 2) // the first check 15 s after the full one is a full one
	f.tick(t, 2)
}

func TestTableCheckStatsErrorVerifiesEveryOwner(t *testing.T) {
	f := newTableFixture(t, -1)
	f.tick(t, 1)
	f.tables.mu.Lock()
	f.tables.err = errors.New("connection refused")
	f.tables.mu.Unlock()
	f.tick(t, 2)
	if st := f.h.Stats(); st.TableCheckErrors != 1 {
		t.Fatalf("stats %+v, want one table stats error", st)
	}
}

func TestTableCheckAfterResetIsFull(t *testing.T) {
	f := newTableFixture(t, -1)
	f.tick(t, 1)
	f.resets <- struct{}{}
	f.waitFor(t, "the replays", func() bool { return f.j.count("replay proxier") == 1 })
	f.tick(t, 2)
	if got := strings.Count(strings.Join(f.j.get(), ","), "verify pods"); got != 2 {
		t.Fatalf("pods verified %d times, want 2", got)
	}
}

// TestTableCheckStaleVersionSettles: flows that moved between tables under the same version
// cost two full checks (the second with the owner asked again), then checks are cheap again,
// with no replay.
func TestTableCheckStaleVersionSettles(t *testing.T) {
	f := newTableFixture(t, -1)
	f.tick(t, 1)
	f.tick(t, 1)
	f.proxy.tmu.Lock()
	f.proxy.installed = openflow.InstalledFlows{PerTable: map[uint8]int{13: 5, 14: 90, 17: 10}, Learned: []uint8{13}, Version: 2}
	f.proxy.tmu.Unlock()
	f.tables.set(14, 90)
	f.tables.set(17, 10)
	f.tick(t, 2) // table 14 holds fewer than the cached count: full check
	f.tick(t, 3) // asked again: the surplus differs from the one recorded with the stale counts
	f.tick(t, 3)
	f.tick(t, 3)
	if n := f.j.count("replay proxier") + f.j.count("replay pods"); n != 0 {
		t.Fatalf("%d replays, want none: %q", n, f.j.get())
	}
}
