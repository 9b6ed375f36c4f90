package reconciler

import (
	"slices"
	"sort"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// Ops returns the bundle that takes OVS from the committed state to the staged one and, for
// each op, the owners it is done for (nil: node-level clean-up): clean-up of whole kinds,
// clean-up of replaced owners, pre-deletes and pre-deleted groups, group adds and modifies,
// flow adds, flow deletes, extra deletes, group deletes.
func (t *Txn) Ops() ([]of.Op, [][]Owner) {
	t.resolve()
	var pre, groupAdds, flowAdds, flowDels, groupDels opList
	for _, op := range t.kindClean {
		pre.add(op, nil)
	}
	for i, op := range t.ownerClean {
		pre.add(op, t.ownerCleanO[i:i+1:i+1])
	}
	for _, op := range t.PreDeletes {
		pre.add(op, nil)
	}
	for _, id := range t.PreDeleteGroups {
		pre.add(of.Op{Kind: of.DeleteGroup, Group: &of.Group{ID: id}}, nil)
	}
	owners := sortedOwners(t.staged)
	// Each op's owner list is a one-owner view of owners (read-only): not one allocation per
	// owner.
	for i, o := range owners {
		before, after := byID(t.st.owners[o].groups, packedID), t.staged[o].groups
		by := owners[i : i+1 : i+1]
		for _, g := range after {
			b, had := before.get(g.ID)
			switch {
			case !had:
				groupAdds.add(of.Op{Kind: of.AddGroup, Group: g}, by)
			case !b.Same(g):
				groupAdds.add(of.Op{Kind: of.ModifyGroup, Group: g}, by)
			}
		}
		stay := byID(after, stagedID)
		for _, b := range t.st.owners[o].groups {
			if _, ok := stay.get(b.ID()); !ok {
				groupDels.add(of.Op{Kind: of.DeleteGroup, Group: &of.Group{ID: b.ID()}}, by)
			}
		}
	}
	t.flowOps(&flowAdds, &flowDels)
	// The bundle is allocated once at its size (the first sync's has 130k ops at 10k Services).
	n := len(pre.ops) + len(groupAdds.ops) + len(flowAdds.ops) + len(flowDels.ops) + len(t.ExtraDeletes) + len(groupDels.ops)
	out := opList{ops: make([]of.Op, 0, n), by: make([][]Owner, 0, n)}
	for _, l := range []*opList{&pre, &groupAdds, &flowAdds, &flowDels} {
		out.ops, out.by = append(out.ops, l.ops...), append(out.by, l.by...)
	}
	for _, op := range t.ExtraDeletes {
		out.add(op, nil)
	}
	out.ops, out.by = append(out.ops, groupDels.ops...), append(out.by, groupDels.by...)
	return out.ops, out.by
}

// flowOps appends the flow adds and deletes of the staged keys, in key order.
func (t *Txn) flowOps(flowAdds, flowDels *opList) {
	keys := make([]string, 0, len(t.flows))
	for k := range t.flows {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	*flowAdds = opList{ops: make([]of.Op, 0, len(keys)), by: make([][]Owner, 0, len(keys))}
	// One owner list per winner, shared by its adds (read-only): not one allocation per op.
	winners := map[Owner][]Owner{}
	for _, k := range keys {
		after, before := t.flows[k], t.st.flows[k]
		switch {
		case after != nil && (before == nil || before.sum != after.sum || t.replaced[after.winner()]):
			w := after.winner()
			by, ok := winners[w]
			if !ok {
				by = []Owner{w}
				winners[w] = by
			}
			flowAdds.add(of.Op{Kind: of.AddFlow, Flow: after.flow}, by)
		case after == nil && before != nil && !t.cleanedUp(k):
			flowDels.add(of.Op{Kind: of.DeleteFlowStrict, Flow: before.flow}, t.droppedBy[k])
		}
	}
}

// cleanedUp reports whether the clean-up ops of the replaced owners already delete key: every
// owner that let go of it was replaced.
func (t *Txn) cleanedUp(key string) bool {
	by := t.droppedBy[key]
	if len(by) == 0 || len(t.replaced) == 0 {
		return false
	}
	for _, o := range by {
		if !t.replaced[o] {
			return false
		}
	}
	return true
}

// opList is a list of ops with the owners of each.
type opList struct {
	ops []of.Op
	by  [][]Owner
}

func (l *opList) add(op of.Op, by []Owner) {
	l.ops = append(l.ops, op)
	l.by = append(l.by, by)
}

// RejectedOwners returns the owners of the op err names (of.RejectedOpIndex) among ops' owner
// lists by; nil when err names no op or one done for no owner (node-level clean-up).
func RejectedOwners(by [][]Owner, err error) []Owner {
	idx, ok := of.RejectedOpIndex(err)
	if !ok || idx < 0 || idx >= len(by) || len(by[idx]) == 0 {
		return nil
	}
	return slices.Clone(by[idx])
}
