package proxy

import (
	"context"
	"errors"
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
	ops []of.Op
	// by holds, per op, the owners it is done for (nil: node-level or clean-up).
	by [][]owner
	// included are the Services staged, sorted; newOwners their owners after the commit.
	included  []types.NamespacedName
	newOwners map[types.NamespacedName][]owner
	// released are the owners that go away with the commit.
	released []owner
}

// buildPlan stages in's changes, leaving out the Services in exclude, in b (a batch over the
// installed state, which it does not change); installed holds each Service's owners as
// committed (in its status). It is pure.
func buildPlan(b *reconciler.Batch, installed func(types.NamespacedName) *serviceStatus, in *syncInput, exclude sets.Set[types.NamespacedName]) *plan {
	tx := b.Txn()
	pl := &plan{newOwners: make(map[types.NamespacedName][]owner, len(in.names)),
		included: make([]types.NamespacedName, 0, len(in.names))}
	if in.setBase {
		tx.Set(baseOwner(), nil, in.base)
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
		for _, o := range installed(nn).ownerList(nn) {
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
	pl.ops, pl.by = b.Ops()
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

// rejectedServices returns the Services of the owners a rejected bundle names; nil when err is
// not a rejection of an op of Services' owners (then the whole sync fails).
func (p *Proxier) rejectedServices(err error) []types.NamespacedName {
	var rej *reconciler.RejectedError
	if !errors.As(err, &rej) || len(rej.Owners) == 0 {
		return nil
	}
	seen := sets.New[types.NamespacedName]()
	for _, o := range rej.Owners {
		info, ok := p.ownerMeta[o]
		if o.Kind != reconciler.KindServicePort || !ok {
			return nil
		}
		seen.Insert(info.name)
	}
	return sortedNames(seen)
}

// planAndApply plans and applies in, in one batch of the bridge's reconciler per attempt. When
// OVS rejects an op of a Service, that Service is left out and the rest is re-planned and
// applied, while that makes progress; rejected returns the Services left out with OVS's error.
// The installed state is committed by the batch; the rest of the commit is p.commit's.
func (p *Proxier) planAndApply(ctx context.Context, in *syncInput) (*plan, map[types.NamespacedName]string, error) {
	exclude := sets.New[types.NamespacedName]()
	rejected := map[types.NamespacedName]string{}
	for {
		b := p.bridgeState.Begin()
		pl := buildPlan(b, p.statusOf, in, exclude)
		if in.first {
			b.Start(reconciler.KindNode)
			b.Start(reconciler.KindServicePort)
		}
		err := p.commitBatch(ctx, b, len(pl.ops), len(pl.included), in.full)
		if err == nil {
			return pl, rejected, nil
		}
		if p.ovsLostState(ctx) {
			// Not the Services' fault: ovs-vswitchd restarted or the bridge was flushed, and the
			// ops met groups or flows that are gone. Replay everything before the next sync.
			p.bridgeState.OweReplay()
			return nil, nil, fmt.Errorf("OVS lost the proxier's flows; replaying before the next sync: %w", err)
		}
		bad := p.rejectedServices(err)
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

// commitBatch commits b (its bundle has ops ops); p.mu is not held.
func (p *Proxier) commitBatch(ctx context.Context, b *reconciler.Batch, ops, services int, full bool) error {
	big := ops >= bigSyncOps
	if big {
		klog.InfoS("Installing a large batch of flows and groups in one bundle", "ops", ops, "services", services, "full", full)
	}
	start := p.opts.Clock.Now()
	err := b.Commit(ctx)
	if big && err == nil {
		klog.InfoS("Installed the batch", "ops", ops, "duration", p.opts.Clock.Since(start))
	}
	return err
}
