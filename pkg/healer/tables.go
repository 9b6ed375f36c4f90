package healer

import (
	"context"
	"maps"
	"slices"
	"time"

	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// TableCounts is a writer of the bridge that can say, without asking OVS, how many flows it
// installed in each table (the bridge's reconciler). With a Counter that also reports table
// statistics (openflow.TableCounter), the check then costs OVS one table statistics request
// instead of an aggregate request (a walk of every flow) per owner and category.
type TableCounts interface {
	// InstalledVersion returns the version of what the writer installed
	// (openflow.InstalledFlows.Version); false when it cannot tell (an Apply of its own is in
	// flight). It must be cheap: every check asks it twice. It should change when the counts
	// per table change; if it does not, the counts OVS holds stop adding up and the next full
	// check, after which every writer is asked for its flows again, sets that right.
	InstalledVersion() (uint64, bool)
	// InstalledFlows returns what the writer installed; false when it cannot tell. The Healer
	// asks it only when the version changed since it last asked.
	InstalledFlows() (openflow.InstalledFlows, bool)
}

// tableCheck is the state of the table statistics check: what OVS held beyond what the table
// owners installed, per table, when every owner last verified (the flows of the other owners
// and of other writers of the bridge).
type tableCheck struct {
	// baseline is nil until a full check of every owner passed.
	baseline map[uint8]int
	// lastFull is when the last full check ran (zero before the first).
	lastFull time.Time
	// installed caches what each of Options.Tables installed, by its index, with its version.
	installed map[int]openflow.InstalledFlows
}

// expectation is the sum of what the Tables installed.
type expectation struct {
	perTable map[uint8]int
	learned  map[uint8]bool
	versions []uint64
}

// versions returns the version of each of Options.Tables; false when one cannot tell.
func (h *Healer) versions() ([]uint64, bool) {
	vs := make([]uint64, 0, len(h.opts.Tables))
	for _, tc := range h.opts.Tables {
		v, ok := tc.InstalledVersion()
		if !ok {
			return nil, false
		}
		vs = append(vs, v)
	}
	return vs, true
}

// installed sums what each of Options.Tables installed at versions vs (from versions), asking
// one for its flows only when its version changed since the last time; false when one cannot
// tell or its flows are not of that version any more.
func (h *Healer) installed(vs []uint64) (expectation, bool) {
	if h.tables.installed == nil {
		h.tables.installed = map[int]openflow.InstalledFlows{}
	}
	e := expectation{perTable: map[uint8]int{}, learned: map[uint8]bool{}, versions: vs}
	for i, tc := range h.opts.Tables {
		in, cached := h.tables.installed[i]
		if !cached || in.Version != vs[i] {
			var ok bool
			if in, ok = tc.InstalledFlows(); !ok || in.Version != vs[i] {
				return expectation{}, false
			}
			h.tables.installed[i] = in
		}
		for t, n := range in.PerTable {
			e.perTable[t] += n
		}
		for _, t := range in.Learned {
			e.learned[t] = true
		}
	}
	return e, true
}

// surplus returns, per table, how many more flows OVS holds than the Tables installed
// (zeros left out; learned tables, whose counts change on their own, left out), and whether
// some table holds fewer than installed (a certain loss).
func (e expectation) surplus(stats []openflow.TableStats) (map[uint8]int, bool) {
	held := openflow.FlowsPerTable(stats)
	out := map[uint8]int{}
	short := false
	for t, n := range e.perTable {
		if held[t] < n {
			short = true
		}
	}
	for t, n := range held {
		if d := n - e.perTable[t]; d != 0 && !e.learned[t] {
			out[t] = d
		}
	}
	return out, short
}

// check compares one table statistics reply with what the Tables installed plus the
// surplus recorded at the last full check, and verifies every owner (replaying those that
// mismatch) only when they differ, when the statistics request failed, and once
// FullCheckInterval passed since the last full check; while one of the Tables cannot tell (its
// bundle is in flight) it does nothing. It reports whether OVS was found as installed (a
// baseline is recorded); otherwise the next check should come soon: after a replay, to confirm
// it, and after a check that could not tell.
func (h *Healer) check(ctx context.Context) bool {
	if h.opts.Counter == nil {
		return true
	}
	h.opMu.Lock()
	defer h.opMu.Unlock()
	tc := h.opts.Counter
	vs, ok := h.versions()
	var before expectation
	if ok {
		before, ok = h.installed(vs)
	}
	if !ok {
		// An owner's bundle is in flight (a big sync may take seconds): the next check decides,
		// as Verify would not tell either.
		klog.V(4).InfoS("Skipping the check of OVS: an owner's flows are being changed")
		return false
	}
	stats, err := tc.TableStats(ctx)
	if err != nil {
		h.stats.tableCheckFailed()
		klog.ErrorS(err, "Reading the table statistics of OVS failed; verifying every owner")
		h.fullCheck(ctx, nil, "table statistics failed")
		return false
	}
	after, ok := h.versions()
	if !ok || !slices.Equal(before.versions, after) {
		klog.V(4).InfoS("Skipping the check of OVS: an owner's flows changed during it")
		return false
	}
	surplus, short := before.surplus(stats)
	h.stats.tableChecked()
	st := &h.tables
	switch {
	case short:
		h.fullCheck(ctx, nil, "a table holds fewer flows than installed")
	case st.baseline == nil:
		h.fullCheck(ctx, surplus, "first check")
	case !maps.Equal(st.baseline, surplus):
		h.fullCheck(ctx, surplus, "table flow counts changed")
	case h.opts.FullCheckInterval > 0 && h.opts.Clock.Since(st.lastFull) >= h.opts.FullCheckInterval:
		h.fullCheck(ctx, surplus, "periodic full check")
	}
	return st.baseline != nil
}

// fullCheck verifies every owner and replays those that mismatch; when all matched, surplus
// (nil: unknown) becomes the baseline of the next table checks.
func (h *Healer) fullCheck(ctx context.Context, surplus map[uint8]int, reason string) {
	klog.V(2).InfoS("Verifying every owner's flows in OVS", "reason", reason)
	allOK := h.verifyAllLocked(ctx)
	h.tables.lastFull = h.opts.Clock.Now()
	// An owner's version may stay while its flows move between tables (see
	// TableCounts.InstalledVersion): the next check asks every writer again.
	h.tables.installed = nil
	if allOK && surplus != nil {
		h.tables.baseline = surplus
	} else {
		h.tables.baseline = nil
	}
}

// forgetBaseline makes the next check a full one (after replays: what OVS holds changed).
func (h *Healer) forgetBaseline() {
	h.tables.baseline = nil
}
