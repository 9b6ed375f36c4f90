package proxy

import (
	"hash/maphash"
	"slices"
	"sort"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

// owner names who owns a set of flows and groups: one Service port in one family
// ("ns/name:port/TCP/v4", holding its cluster group and, with a Local traffic policy, its local
// group), or "base" for node-level flows.
type owner string

const baseOwner owner = "base"

// flowSum is a 128-bit digest of a flow's canonical text (openflow.FormatFlow): flows compare
// equal when their digests do. The state keeps digests, not the text (memory at scale).
type flowSum [2]uint64

// wantedFlow is the flow one owner wants under a key. The flow is shared, never modified.
type wantedFlow struct {
	owner owner
	flow  *of.Flow
	sum   flowSum
}

// flowEntry is one installed flow key with the owners that want it. Endpoint DNAT flows are
// shared: a flow is deleted only when its last owner lets go of it. When owners want different
// content under one key, the winner's (see flowState.rank) is installed. owners is a short
// list (a key rarely has more than a few owners).
type flowEntry struct {
	flow   *of.Flow // what is installed: the winner's flow
	sum    flowSum
	winner owner
	owners []wantedFlow
}

// want returns o's want of the entry, nil when o wants none.
func (e *flowEntry) want(o owner) *wantedFlow {
	for i := range e.owners {
		if e.owners[i].owner == o {
			return &e.owners[i]
		}
	}
	return nil
}

// drop removes o's want.
func (e *flowEntry) drop(o owner) {
	for i := range e.owners {
		if e.owners[i].owner == o {
			e.owners = append(e.owners[:i], e.owners[i+1:]...)
			return
		}
	}
}

// rankFunc orders owners for a contested flow key: negative when a wins over b.
type rankFunc func(a, b owner) int

// flowState is what the proxier has installed in OVS: flows by key (table, priority, match),
// each owner's flow keys, and each owner's groups. It changes only through a committed txn, after
// OVS accepted the bundle, and only on the sync goroutine.
type flowState struct {
	flows  map[string]*flowEntry
	owned  map[owner][]string
	groups map[owner][]*of.Group
	// perCategory counts the installed flows by cookie category (Verify).
	perCategory map[pipeline.Category]int
	// conflicts holds, per losing owner, the keys it wants with other content than installed
	// and the winner of each.
	conflicts map[owner]map[string]owner
	rank      rankFunc
	// seeds key the flow digests (flowSum); they live as long as the state.
	seeds [2]maphash.Seed
}

// sum returns the digest of flow text.
func (s *flowState) sum(text string) flowSum {
	return flowSum{maphash.String(s.seeds[0], text), maphash.String(s.seeds[1], text)}
}

func newFlowState(rank rankFunc) *flowState {
	if rank == nil {
		rank = func(a, b owner) int { return compareOwners(a, b) }
	}
	return &flowState{
		flows:       map[string]*flowEntry{},
		owned:       map[owner][]string{},
		groups:      map[owner][]*of.Group{},
		perCategory: map[pipeline.Category]int{},
		conflicts:   map[owner]map[string]owner{},
		rank:        rank,
		seeds:       [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()},
	}
}

func compareOwners(a, b owner) int {
	switch {
	case a == b:
		return 0
	case a == baseOwner:
		return -1
	case b == baseOwner:
		return 1
	case a < b:
		return -1
	}
	return 1
}

// txn stages changes to a flowState. Nothing in the state changes until commit; ops returns the
// net difference between the state and the staged result.
type txn struct {
	st     *flowState
	flows  map[string]*flowEntry // staged entries; nil value = deleted
	owned  map[owner][]string    // staged owned keys; nil value = owner gone
	groups map[owner][]*of.Group // staged groups
	// touchedGroups preserves which owners' groups were set, including to nil.
	touchedGroups map[owner]bool
	// droppedBy lists, per staged key, the owners whose set let go of it: the owners of its
	// delete op, if the key ends up deleted (an add's owner is the key's winner).
	droppedBy map[string][]owner
	// preDeletes and preDeleteGroups come first in the bundle (first sync of a run): flows and
	// group IDs of earlier runs.
	preDeletes      []of.Op
	preDeleteGroups []uint32
	// extraDeletes are appended after flow deletes and before group deletes (round clean-up).
	extraDeletes []of.Op
}

func (s *flowState) begin() *txn {
	return &txn{st: s, flows: map[string]*flowEntry{}, owned: map[owner][]string{}, groups: map[owner][]*of.Group{},
		touchedGroups: map[owner]bool{}, droppedBy: map[string][]owner{}}
}

func (t *txn) entry(key string) *flowEntry {
	if e, ok := t.flows[key]; ok {
		return e
	}
	b := t.st.flows[key]
	if b == nil {
		return nil
	}
	c := &flowEntry{flow: b.flow, sum: b.sum, winner: b.winner, owners: append([]wantedFlow(nil), b.owners...)}
	t.flows[key] = c
	return c
}

func (t *txn) ownedKeys(o owner) []string {
	if k, ok := t.owned[o]; ok {
		return k
	}
	return t.st.owned[o]
}

// set replaces everything an owner has with groups and flows. No groups and no flows remove
// the owner.
//
// The state keeps pointers into flows, not copies (at 10,000 Services a copy of every flow was
// a third of the first sync's allocations): the caller hands over a slice of its own that
// nobody modifies afterwards. Every want of o is pointed into this slice, also where the content
// did not change, so the state holds only the latest slice of each owner, never parts of older
// ones.
func (t *txn) set(o owner, groups []*of.Group, flows []of.Flow) {
	keys, sums := t.st.keysOf(flows)
	t.setKeyed(o, groups, flows, keys, sums)
}

// keysOf returns the key and the digest of every flow of flows. It reads only the state's
// seeds, fixed for its life: any goroutine may call it.
func (s *flowState) keysOf(flows []of.Flow) ([]string, []flowSum) {
	if len(flows) == 0 {
		return nil, nil
	}
	keys, sums := make([]string, len(flows)), make([]flowSum, len(flows))
	for i := range flows {
		keys[i], sums[i] = of.FormatFlowKey(&flows[i]), s.sum(of.FormatFlow(&flows[i]))
	}
	return keys, sums
}

// setKeyed is set with the flows' keys and digests (keysOf) already computed.
func (t *txn) setKeyed(o owner, groups []*of.Group, flows []of.Flow, keys []string, sums []flowSum) {
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
	t.owned[o] = newKeys
	t.groups[o] = groups
	t.touchedGroups[o] = true
}

// resolve sets each staged entry's installed content to its winner's.
func (t *txn) resolve() {
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
		w := e.owners[best]
		e.flow, e.sum, e.winner = w.flow, w.sum, w.owner
	}
}

// smallOwner is the number of flows or groups up to which an owner's are searched in a list,
// not a map.
const smallOwner = 8

// groupsByID finds groups by ID: in the list itself when it is short.
type groupsByID struct {
	list []*of.Group
	m    map[uint32]*of.Group
}

func byID(gs []*of.Group) groupsByID {
	if len(gs) <= smallOwner {
		return groupsByID{list: gs}
	}
	m := make(map[uint32]*of.Group, len(gs))
	for _, g := range gs {
		m[g.ID] = g
	}
	return groupsByID{m: m}
}

func (b groupsByID) get(id uint32) *of.Group {
	if b.m != nil {
		return b.m[id]
	}
	for _, g := range b.list {
		if g.ID == id {
			return g
		}
	}
	return nil
}

// ops returns the bundle that takes OVS from the committed state to the staged one and, for
// each op, the owners it is done for (nil: node-level clean-up): pre-deleted groups, group adds
// and modifies, flow adds, flow deletes, extra deletes, group deletes.
func (t *txn) ops() ([]of.Op, [][]owner) {
	t.resolve()
	var pre, groupAdds, flowAdds, flowDels, groupDels opList
	for _, op := range t.preDeletes {
		pre.add(op, nil)
	}
	for _, id := range t.preDeleteGroups {
		pre.add(of.Op{Kind: of.DeleteGroup, Group: &of.Group{ID: id}}, nil)
	}
	owners := make([]owner, 0, len(t.touchedGroups))
	for o := range t.touchedGroups {
		owners = append(owners, o)
	}
	slices.Sort(owners)
	// Each op's owner list is a one-owner view of owners (read-only): not one allocation per
	// owner.
	for i, o := range owners {
		before, after := byID(t.st.groups[o]), t.groups[o]
		by := owners[i : i+1 : i+1]
		for _, g := range after {
			b := before.get(g.ID)
			switch {
			case b == nil:
				groupAdds.add(of.Op{Kind: of.AddGroup, Group: g}, by)
			case of.FormatGroup(b) != of.FormatGroup(g):
				groupAdds.add(of.Op{Kind: of.ModifyGroup, Group: g}, by)
			}
		}
		stay := byID(after)
		for _, b := range t.st.groups[o] {
			if stay.get(b.ID) == nil {
				groupDels.add(of.Op{Kind: of.DeleteGroup, Group: b}, by)
			}
		}
	}
	keys := make([]string, 0, len(t.flows))
	for k := range t.flows {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	flowAdds = opList{ops: make([]of.Op, 0, len(keys)), by: make([][]owner, 0, len(keys))}
	// One owner list per winner, shared by its adds (read-only): not one allocation per op.
	winners := map[owner][]owner{}
	for _, k := range keys {
		after, before := t.flows[k], t.st.flows[k]
		switch {
		case after != nil && (before == nil || before.sum != after.sum):
			by, ok := winners[after.winner]
			if !ok {
				by = []owner{after.winner}
				winners[after.winner] = by
			}
			flowAdds.add(of.Op{Kind: of.AddFlow, Flow: after.flow}, by)
		case after == nil && before != nil:
			flowDels.add(of.Op{Kind: of.DeleteFlowStrict, Flow: before.flow}, t.droppedBy[k])
		}
	}
	// The bundle is allocated once at its size (the first sync's has 130k ops at 10k Services).
	n := len(pre.ops) + len(groupAdds.ops) + len(flowAdds.ops) + len(flowDels.ops) + len(t.extraDeletes) + len(groupDels.ops)
	out := opList{ops: make([]of.Op, 0, n), by: make([][]owner, 0, n)}
	for _, l := range []*opList{&pre, &groupAdds, &flowAdds, &flowDels} {
		out.ops, out.by = append(out.ops, l.ops...), append(out.by, l.by...)
	}
	for _, op := range t.extraDeletes {
		out.add(op, nil)
	}
	out.ops, out.by = append(out.ops, groupDels.ops...), append(out.by, groupDels.by...)
	return out.ops, out.by
}

// opList is a list of ops with the owners of each.
type opList struct {
	ops []of.Op
	by  [][]owner
}

func (l *opList) add(op of.Op, by []owner) {
	l.ops = append(l.ops, op)
	l.by = append(l.by, by)
}

// commit makes the staged state the installed state. Call it only after OVS accepted ops().
func (t *txn) commit() {
	t.resolve()
	for k, e := range t.flows {
		if b := t.st.flows[k]; b != nil {
			t.st.perCategory[pipeline.CookieCategory(b.flow.Cookie)]--
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
		for _, w := range e.owners {
			t.st.dropConflict(w.owner, k)
			if w.sum != e.sum {
				if t.st.conflicts[w.owner] == nil {
					t.st.conflicts[w.owner] = map[string]owner{}
				}
				t.st.conflicts[w.owner][k] = e.winner
			}
		}
	}
	for o, keys := range t.owned {
		if keys == nil {
			delete(t.st.owned, o)
		} else {
			t.st.owned[o] = keys
		}
	}
	for o := range t.touchedGroups {
		if gs := t.groups[o]; len(gs) > 0 {
			t.st.groups[o] = gs
		} else {
			delete(t.st.groups, o)
		}
	}
}

func (s *flowState) dropConflict(o owner, key string) {
	if m := s.conflicts[o]; m != nil {
		delete(m, key)
		if len(m) == 0 {
			delete(s.conflicts, o)
		}
	}
}

// flowCount returns how many flows an owner has installed or wants (a lost contested key
// counts).
func (s *flowState) flowCount(o owner) int { return len(s.owned[o]) }

// groupCount returns how many groups are installed.
func (s *flowState) groupCount() int {
	n := 0
	for _, gs := range s.groups {
		n += len(gs)
	}
	return n
}

// replayOps returns the bundle that reinstalls the whole state whatever OVS holds: delete
// this round's flows of our categories and every group ID held, then add every group and flow.
func (s *flowState) replayOps(round uint16) []of.Op {
	var ops []of.Op
	for _, c := range ourCategories {
		ops = append(ops, of.Op{Kind: of.DeleteFlows, Flow: &of.Flow{
			Cookie: pipeline.Cookie(round, c, 0), CookieMask: pipeline.RoundMask | pipeline.CategoryMask}})
	}
	owners := make([]owner, 0, len(s.groups))
	for o := range s.groups {
		owners = append(owners, o)
	}
	sort.Slice(owners, func(i, j int) bool { return owners[i] < owners[j] })
	var adds []of.Op
	for _, o := range owners {
		for _, g := range s.groups[o] {
			ops = append(ops, of.Op{Kind: of.DeleteGroup, Group: &of.Group{ID: g.ID}})
			adds = append(adds, of.Op{Kind: of.AddGroup, Group: g})
		}
	}
	ops = append(ops, adds...)
	keys := make([]string, 0, len(s.flows))
	for k := range s.flows {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ops = append(ops, of.Op{Kind: of.AddFlow, Flow: s.flows[k].flow})
	}
	return ops
}
