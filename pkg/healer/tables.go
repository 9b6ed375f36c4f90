package healer

import (
	"context"
	"maps"
	"slices"

	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// TableOwner is an Owner that can say, without asking OVS, how many flows it installed in each
// table. With a Counter that also reports table statistics (openflow.TableCounter), the
// periodic check then costs OVS one table statistics request instead of an aggregate request
// (a walk of every flow) per owner and category.
type TableOwner interface {
	Owner
	// InstalledFlows returns what the owner installed; false when it cannot tell (an Apply of
	// its own is in flight).
	InstalledFlows() (openflow.InstalledFlows, bool)
}

// tableCheck is the state of the table statistics check: what OVS held beyond what the table
// owners installed, per table, when every owner last verified (the flows of the other owners
// and of other writers of the bridge).
type tableCheck struct {
	// baseline is nil until a full check of every owner passed.
	baseline map[uint8]int
	// sinceFull counts the table checks since the last full check.
	sinceFull int
}

// expectation is the sum of what the table owners installed.
type expectation struct {
	perTable map[uint8]int
	learned  map[uint8]bool
	versions []uint64
}

// installed sums what every TableOwner installed; false when one cannot tell.
func (h *Healer) installed() (expectation, bool) {
	e := expectation{perTable: map[uint8]int{}, learned: map[uint8]bool{}}
	for _, o := range h.opts.Owners {
		to, ok := o.(TableOwner)
		if !ok {
			continue
		}
		in, ok := to.InstalledFlows()
		if !ok {
			return expectation{}, false
		}
		for t, n := range in.PerTable {
			e.perTable[t] += n
		}
		for _, t := range in.Learned {
			e.learned[t] = true
		}
		e.versions = append(e.versions, in.Version)
	}
	return e, true
}

// surplus returns, per table, how many more flows OVS holds than the table owners installed
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

// check is the periodic check. With a table-counting Counter it compares one table statistics
// reply with what the table owners installed plus the surplus recorded at the last full check,
// and verifies every owner (replaying those that mismatch) only when they differ, when an
// owner cannot tell, and every FullCheckEvery table checks; otherwise it verifies every owner.
func (h *Healer) check(ctx context.Context) {
	if h.opts.Counter == nil {
		return
	}
	h.opMu.Lock()
	defer h.opMu.Unlock()
	tc, ok := h.opts.Counter.(openflow.TableCounter)
	if !ok {
		h.verifyAllLocked(ctx)
		return
	}
	before, ok := h.installed()
	if !ok {
		h.fullCheck(ctx, nil, "an owner's flows are being changed")
		return
	}
	stats, err := tc.TableStats(ctx)
	if err != nil {
		h.stats.tableCheckFailed()
		klog.ErrorS(err, "Reading the table statistics of OVS failed; verifying every owner")
		h.fullCheck(ctx, nil, "table statistics failed")
		return
	}
	after, ok := h.installed()
	if !ok || !slices.Equal(before.versions, after.versions) {
		h.fullCheck(ctx, nil, "an owner's flows changed during the check")
		return
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
	case h.opts.FullCheckEvery > 0 && st.sinceFull+1 >= h.opts.FullCheckEvery:
		h.fullCheck(ctx, surplus, "periodic full check")
	default:
		st.sinceFull++
	}
}

// fullCheck verifies every owner and replays those that mismatch; when all matched, surplus
// (nil: unknown) becomes the baseline of the next table checks.
func (h *Healer) fullCheck(ctx context.Context, surplus map[uint8]int, reason string) {
	klog.V(2).InfoS("Verifying every owner's flows in OVS", "reason", reason)
	allOK := h.verifyAllLocked(ctx)
	h.tables.sinceFull = 0
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
