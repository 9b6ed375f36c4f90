package proxy

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/reconciler"
)

// plan is one bundle and what committing it changes.
type plan struct {
	tx  *reconciler.Txn
	ops []of.Op
	// by holds, per op, the owners it is done for (nil: node-level or clean-up).
	by [][]owner
	// included are the Services staged, sorted; newOwners their owners after the commit.
	included  []types.NamespacedName
	newOwners map[types.NamespacedName][]owner
	// released are the owners that go away with the commit.
	released []owner
}

// buildPlan stages in's changes, leaving out the Services in exclude, over st (which it does
// not change); installed holds each Service's owners as committed. It is pure.
func buildPlan(st *reconciler.State, installed map[types.NamespacedName][]owner, in *syncInput, exclude sets.Set[types.NamespacedName]) *plan {
	tx := st.Begin()
	pl := &plan{tx: tx, newOwners: make(map[types.NamespacedName][]owner, len(in.names)),
		included: make([]types.NamespacedName, 0, len(in.names))}
	if in.setBase {
		tx.Set(baseOwner, nil, in.base)
	}
	for _, nn := range in.names {
		if exclude.Has(nn) {
			continue
		}
		pl.included = append(pl.included, nn)
		want := in.computed[nn]
		var owners []owner
		if len(want) > 0 {
			owners = make([]owner, 0, len(want))
		}
		for _, d := range want {
			tx.SetKeyed(d.owner, d.flows.Groups, d.all, d.keys, d.sums)
			owners = append(owners, d.owner)
		}
		if owners != nil {
			pl.newOwners[nn] = owners
		}
		for _, o := range installed[nn] {
			if !slices.Contains(owners, o) {
				tx.Delete(o)
				pl.released = append(pl.released, o)
			}
		}
	}
	if in.first {
		tx.ExtraDeletes = in.stale
		tx.PreDeletes = in.staleCurrent
		tx.PreDeleteGroups = firstBundleGroupDeletes(tx, in.staleGroups)
	}
	pl.ops, pl.by = tx.Ops()
	return pl
}

// firstBundleGroupDeletes returns the group IDs the first bundle of a run deletes before adding
// anything: those earlier runs' flows use and those it adds, so that its outcome never depends
// on which groups OVS still holds (deleting a missing group is a no-op).
func firstBundleGroupDeletes(tx *reconciler.Txn, earlier []uint32) []uint32 {
	ids := map[uint32]bool{}
	for _, id := range earlier {
		ids[id] = true
	}
	tx.StagedGroupIDs(func(id uint32) { ids[id] = true })
	out := make([]uint32, 0, len(ids))
	for id := range ids {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// rejectedServices returns the Services whose op err names; nil when err names no op, or one
// done for the node-level flows or the clean-up (then the whole sync fails).
func (p *Proxier) rejectedServices(pl *plan, err error) []types.NamespacedName {
	idx, ok := of.RejectedOpIndex(err)
	if !ok || idx < 0 || idx >= len(pl.by) || len(pl.by[idx]) == 0 {
		return nil
	}
	seen := sets.New[types.NamespacedName]()
	for _, o := range pl.by[idx] {
		info, ok := p.ownerMeta[o]
		if o == baseOwner || !ok {
			return nil
		}
		seen.Insert(info.name)
	}
	return sortedNames(seen)
}

// planAndApply plans and applies in. When OVS rejects an op of a Service, that Service is left
// out and the rest is re-planned and applied, while that makes progress; rejected returns the
// Services left out with OVS's error.
func (p *Proxier) planAndApply(ctx context.Context, in *syncInput) (*plan, map[types.NamespacedName]string, error) {
	exclude := sets.New[types.NamespacedName]()
	rejected := map[types.NamespacedName]string{}
	for {
		pl := buildPlan(p.state, p.svcOwners, in, exclude)
		if len(pl.ops) == 0 {
			return pl, rejected, nil
		}
		err := p.applyOps(ctx, pl.ops, len(pl.included), in.full)
		if err == nil {
			return pl, rejected, nil
		}
		if p.ovsLostState(ctx) {
			// Not the Services' fault: ovs-vswitchd restarted or the bridge was flushed, and the
			// ops met groups or flows that are gone. Replay everything before the next sync.
			p.replayOwed = true
			return nil, nil, fmt.Errorf("OVS lost the proxier's flows; replaying before the next sync: %w", err)
		}
		bad := p.rejectedServices(pl, err)
		progress := false
		for _, nn := range bad {
			if _, planned := in.computed[nn]; planned && !exclude.Has(nn) {
				exclude.Insert(nn)
				rejected[nn] = err.Error()
				progress = true
			}
		}
		if !progress {
			return nil, nil, err
		}
		klog.ErrorS(err, "OVS rejected a Service's flows; quarantining it and installing the others", "services", bad)
	}
}

// applyOps sends one bundle; p.mu is not held.
func (p *Proxier) applyOps(ctx context.Context, ops []of.Op, services int, full bool) error {
	big := len(ops) >= bigSyncOps
	if big {
		klog.InfoS("Installing a large batch of flows and groups in one bundle", "ops", len(ops), "services", services, "full", full)
	}
	start := p.opts.Clock.Now()
	err := p.bridge.Apply(ctx, ops)
	if big && err == nil {
		klog.InfoS("Installed the batch", "ops", len(ops), "duration", p.opts.Clock.Since(start))
	}
	return err
}

// beginApply marks a bundle in flight until endApply or the commit (Verify ignores what it
// counts meanwhile).
func (p *Proxier) beginApply() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.applySeq++
}

func (p *Proxier) endApply() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endApplyLocked()
}

func (p *Proxier) endApplyLocked() {
	if p.applySeq%2 == 1 {
		p.applySeq++
	}
}
