package reconciler

import (
	"slices"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

// Txn stages changes to a State. Nothing in the state changes until Commit; Ops returns the net
// difference between the state and the staged result.
type Txn struct {
	st    *State
	flows map[string]*flowEntry // staged entries; nil value = deleted
	// staged are the owners set, with their keys and groups after the commit (both empty: the
	// owner goes).
	staged map[Owner]stagedOwner
	// droppedBy lists, per staged key, the owners whose set let go of it: the owners of its
	// delete op, if the key ends up deleted (an add's owner is the key's winner).
	droppedBy map[string][]Owner
	// replaced are the owners whose flows are all added again after their clean-up ops (Replace),
	// which come first in the bundle, attributed to them.
	replaced    map[Owner]bool
	ownerClean  []of.Op
	ownerCleanO []Owner
	// kindClean are the first bundles' clean-up ops of whole kinds (ReplaceKind).
	kindClean []of.Op
	// PreDeletes and PreDeleteGroups come first in the bundle (the proxier's first sync of a
	// run): flows and group IDs of earlier runs.
	PreDeletes      []of.Op
	PreDeleteGroups []uint32
	// ExtraDeletes are appended after flow deletes and before group deletes (round clean-up).
	ExtraDeletes []of.Op
}

// Begin starts a transaction over s.
func (s *State) Begin() *Txn {
	return &Txn{st: s, flows: map[string]*flowEntry{}, staged: map[Owner]stagedOwner{}, droppedBy: map[string][]Owner{}}
}

func (t *Txn) entry(key string) *flowEntry {
	if e, ok := t.flows[key]; ok {
		return e
	}
	b := t.st.flows[key]
	if b == nil {
		return nil
	}
	c := &flowEntry{flow: b.flow, sum: b.sum, owners: append([]wantedFlow(nil), b.owners...)}
	t.flows[key] = c
	return c
}

func (t *Txn) ownedKeys(o Owner) []string {
	if os, ok := t.staged[o]; ok {
		return os.keys
	}
	return t.st.owners[o].keys
}

// Set replaces everything an owner has with groups and flows. No groups and no flows remove
// the owner.
//
// The state keeps pointers into flows, not copies (at 10,000 Services a copy of every flow was
// a third of the first sync's allocations): the caller hands over a slice of its own that
// nobody modifies afterwards. Every want of o is pointed into this slice, also where the content
// did not change, so the state holds only the latest slice of each owner, never parts of older
// ones.
func (t *Txn) Set(o Owner, groups []*of.Group, flows []of.Flow) {
	keys, sums := t.st.KeysOf(flows)
	t.SetKeyed(o, groups, flows, keys, sums)
}

// Delete removes the owner.
func (t *Txn) Delete(o Owner) { t.Set(o, nil, nil) }

// Replace is Set where OVS may hold other flows of o than the state says: clean (delete ops
// that delete every flow of o, e.g. by o's cookie) comes first in the bundle, every flow of o
// is added again after it and the flows o lets go of get no delete of their own.
func (t *Txn) Replace(o Owner, flows []of.Flow, clean ...of.Op) {
	t.Set(o, nil, flows)
	t.markReplaced(o)
	for _, op := range clean {
		t.ownerClean, t.ownerCleanO = append(t.ownerClean, op), append(t.ownerCleanO, o)
	}
}

func (t *Txn) markReplaced(o Owner) {
	if t.replaced == nil {
		t.replaced = map[Owner]bool{}
	}
	t.replaced[o] = true
}

// ReplaceKind makes this bundle the first of kind's writer: it deletes first every flow of
// cats of any round (earlier runs' and this one's, whatever OVS holds) and adds again every
// flow of every owner of kind, staged or installed.
func (t *Txn) ReplaceKind(kind Kind, cats []pipeline.Category) {
	for _, c := range cats {
		t.kindClean = append(t.kindClean, of.Op{Kind: of.DeleteFlows,
			Flow: &of.Flow{Cookie: pipeline.Cookie(0, c, 0), CookieMask: pipeline.CategoryMask}})
	}
	mark := func(o Owner) {
		if o.Kind != kind {
			return
		}
		t.markReplaced(o)
		for _, key := range t.ownedKeys(o) {
			t.entry(key)
		}
	}
	for o := range t.st.owners {
		mark(o)
	}
	for o := range t.staged {
		mark(o)
	}
}

// SetKeyed is Set with the flows' keys and digests (State.KeysOf) already computed.
func (t *Txn) SetKeyed(o Owner, groups []*of.Group, flows []of.Flow, keys []string, sums []Sum) {
	newKeys := make([]string, 0, len(flows))
	// An owner has a few flows: a map of the keys seen only for many.
	var seen map[string]bool
	if len(flows) > smallOwner {
		seen = make(map[string]bool, len(flows))
	}
	has := func(key string) bool {
		if seen != nil {
			return seen[key]
		}
		return slices.Contains(newKeys, key)
	}
	for i := range flows {
		f, key, sum := &flows[i], keys[i], sums[i]
		if has(key) {
			continue
		}
		if seen != nil {
			seen[key] = true
		}
		newKeys = append(newKeys, key)
		e := t.entry(key)
		if e == nil {
			e = &flowEntry{}
			t.flows[key] = e
		}
		switch w := e.want(o); {
		case w == nil:
			e.owners = append(e.owners, wantedFlow{owner: o, flow: f, sum: sum})
		case w.sum != sum:
			w.flow, w.sum = f, sum
		default:
			w.flow = f // the same content: let go of the older slice
		}
	}
	for _, key := range t.ownedKeys(o) {
		if has(key) {
			continue
		}
		if e := t.entry(key); e != nil {
			e.drop(o)
			t.droppedBy[key] = append(t.droppedBy[key], o)
			if len(e.owners) == 0 {
				t.flows[key] = nil
			}
		}
	}
	if len(newKeys) == 0 {
		newKeys = nil
	}
	t.staged[o] = stagedOwner{keys: newKeys, groups: groups}
}

// StagedGroupIDs calls f with the ID of every group the transaction sets.
func (t *Txn) StagedGroupIDs(f func(uint32)) {
	for _, os := range t.staged {
		for _, g := range os.groups {
			f(g.ID)
		}
	}
}

// resolve sets each staged entry's installed content to its winner's and moves the winner
// first.
func (t *Txn) resolve() {
	for _, e := range t.flows {
		if e == nil {
			continue
		}
		best := 0
		for i := 1; i < len(e.owners); i++ {
			if t.st.rank(e.owners[i].owner, e.owners[best].owner) < 0 {
				best = i
			}
		}
		e.owners[0], e.owners[best] = e.owners[best], e.owners[0]
		w := e.owners[0]
		e.flow, e.sum = w.flow, w.sum
	}
}

// smallOwner is the number of flows or groups up to which an owner's are searched in a list,
// not a map.
const smallOwner = 8

// groupsByID finds groups (staged or packed) by ID: in the list itself when it is short.
type groupsByID[G any] struct {
	list []G
	m    map[uint32]G
	id   func(G) uint32
}

func byID[G any](gs []G, id func(G) uint32) groupsByID[G] {
	if len(gs) <= smallOwner {
		return groupsByID[G]{list: gs, id: id}
	}
	m := make(map[uint32]G, len(gs))
	for _, g := range gs {
		m[id(g)] = g
	}
	return groupsByID[G]{m: m}
}

func (b groupsByID[G]) get(id uint32) (G, bool) {
	if b.m != nil {
		g, ok := b.m[id]
		return g, ok
	}
	for _, g := range b.list {
		if b.id(g) == id {
			return g, true
		}
	}
	var none G
	return none, false
}

func stagedID(g *of.Group) uint32      { return g.ID }
func packedID(g of.PackedGroup) uint32 { return g.ID() }

// Commit makes the staged state the installed state. Call it only after OVS accepted Ops().
func (t *Txn) Commit() {
	t.resolve()
	for k, e := range t.flows {
		if b := t.st.flows[k]; b != nil {
			t.st.perCategory[pipeline.CookieCategory(b.flow.Cookie)]--
			t.st.perTable[b.flow.Table]--
			for _, w := range b.owners {
				t.st.dropConflict(w.owner, k)
			}
		}
		if e == nil {
			delete(t.st.flows, k)
			continue
		}
		t.st.flows[k] = e
		t.st.perCategory[pipeline.CookieCategory(e.flow.Cookie)]++
		t.st.perTable[e.flow.Table]++
		for _, w := range e.owners {
			t.st.dropConflict(w.owner, k)
			if w.sum != e.sum {
				if t.st.conflicts[w.owner] == nil {
					t.st.conflicts[w.owner] = map[string]Owner{}
				}
				t.st.conflicts[w.owner][k] = e.winner()
			}
		}
	}
	for o, os := range t.staged {
		t.st.groupsPerKind[o.Kind] += len(os.groups) - len(t.st.owners[o].groups)
		if os.keys == nil && len(os.groups) == 0 {
			delete(t.st.owners, o)
			continue
		}
		t.st.owners[o] = ownerState{keys: os.keys, groups: packGroups(os.groups)}
	}
}

// packGroups returns gs packed, nil for none.
func packGroups(gs []*of.Group) []of.PackedGroup {
	if len(gs) == 0 {
		return nil
	}
	out := make([]of.PackedGroup, len(gs))
	for i, g := range gs {
		out[i] = of.PackGroup(g)
	}
	return out
}
