package reconciler

import (
	"hash/maphash"
	"slices"
	"sort"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

// Sum is a 128-bit digest of a flow's canonical text (openflow.FormatFlow): flows compare
// equal when their digests do. The state keeps digests, not the text (memory at scale).
type Sum [2]uint64

// wantedFlow is the flow one owner wants under a key. The flow is shared, never modified.
type wantedFlow struct {
	owner Owner
	flow  *of.Flow
	sum   Sum
}

// flowEntry is one installed flow key with the owners that want it. Endpoint DNAT flows are
// shared: a flow is deleted only when its last owner lets go of it. When owners want different
// content under one key, the winner's (see State.rank) is installed. owners is a short list (a
// key rarely has more than a few owners), the winner first once resolved (no field of its own:
// an entry stays in the 48-byte size class).
type flowEntry struct {
	flow   *of.Flow // what is installed: the winner's flow
	sum    Sum
	owners []wantedFlow
}

// ownerState is what one owner has installed: the keys of the flows it wants and its groups,
// packed (of.PackedGroup: a Service's select group is about a fifth of its size unpacked).
type ownerState struct {
	keys   []string
	groups []of.PackedGroup
}

// stagedOwner is what a transaction sets for one owner: the keys of the flows it wants and its
// groups as the caller built them (the bundle's group ops point to them).
type stagedOwner struct {
	keys   []string
	groups []*of.Group
}

// winner returns the owner whose content is installed (of a resolved entry).
func (e *flowEntry) winner() Owner { return e.owners[0].owner }

// want returns o's want of the entry, nil when o wants none.
func (e *flowEntry) want(o Owner) *wantedFlow {
	for i := range e.owners {
		if e.owners[i].owner == o {
			return &e.owners[i]
		}
	}
	return nil
}

// drop removes o's want.
func (e *flowEntry) drop(o Owner) {
	for i := range e.owners {
		if e.owners[i].owner == o {
			e.owners = append(e.owners[:i], e.owners[i+1:]...)
			return
		}
	}
}

// State is what has been installed in OVS: flows by key (table, priority, match), each
// owner's flow keys, and each owner's groups. It changes only through a committed Txn, after
// OVS accepted the bundle. It has no lock: its user serializes writes and reads (Reconciler).
type State struct {
	flows map[string]*flowEntry
	// owners holds each owner's flow keys and groups (one map: an owner is a 24-byte key).
	owners map[Owner]ownerState
	// perCategory counts the installed flows by cookie category (Verify), perTable by table
	// (the healer's table check).
	perCategory map[pipeline.Category]int
	perTable    map[uint8]int
	// groupsPerKind counts the installed groups by their owner's kind.
	groupsPerKind map[Kind]int
	// conflicts holds, per losing owner, the keys it wants with other content than installed
	// and the winner of each.
	conflicts map[Owner]map[string]Owner
	rank      RankFunc
	// seeds key the flow digests (Sum); they live as long as the state.
	seeds [2]maphash.Seed
}

// NewState returns an empty state; rank orders the owners of a contested key (nil: Compare).
func NewState(rank RankFunc) *State {
	if rank == nil {
		rank = Compare
	}
	return &State{
		flows:         map[string]*flowEntry{},
		owners:        map[Owner]ownerState{},
		perCategory:   map[pipeline.Category]int{},
		perTable:      map[uint8]int{},
		groupsPerKind: map[Kind]int{},
		conflicts:     map[Owner]map[string]Owner{},
		rank:          rank,
		seeds:         [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()},
	}
}

// sum returns the digest of flow text.
func (s *State) sum(text string) Sum {
	return Sum{maphash.String(s.seeds[0], text), maphash.String(s.seeds[1], text)}
}

// KeysOf returns the key and the digest of every flow of flows. It reads only the state's
// seeds, fixed for its life: any goroutine may call it.
func (s *State) KeysOf(flows []of.Flow) ([]string, []Sum) {
	if len(flows) == 0 {
		return nil, nil
	}
	keys, sums := make([]string, len(flows)), make([]Sum, len(flows))
	for i := range flows {
		keys[i], sums[i] = of.FormatFlowKey(&flows[i]), s.sum(of.FormatFlow(&flows[i]))
	}
	return keys, sums
}

// Len returns the number of installed flows.
func (s *State) Len() int { return len(s.flows) }

// FlowCount returns how many flows an owner has installed or wants (a lost contested key
// counts).
func (s *State) FlowCount(o Owner) int { return len(s.owners[o].keys) }

// GroupCount returns how many groups are installed.
func (s *State) GroupCount() int {
	n := 0
	for _, c := range s.groupsPerKind {
		n += c
	}
	return n
}

// GroupCountOf returns how many groups owners of kind have installed.
func (s *State) GroupCountOf(kind Kind) int { return s.groupsPerKind[kind] }

// PerCategory returns how many installed flows have a cookie of category c.
func (s *State) PerCategory(c pipeline.Category) int { return s.perCategory[c] }

// OwnerFlows calls f with every installed flow under a key o wants (the winner's content).
func (s *State) OwnerFlows(o Owner, f func(*of.Flow)) {
	for _, key := range s.owners[o].keys {
		if e := s.flows[key]; e != nil {
			f(e.flow)
		}
	}
}

// OwnerGroups returns o's installed groups (unpacked anew or shared: not to be modified).
func (s *State) OwnerGroups(o Owner) []*of.Group {
	gs := s.owners[o].groups
	if len(gs) == 0 {
		return nil
	}
	out := make([]*of.Group, len(gs))
	for i := range gs {
		out[i] = gs[i].Group()
	}
	return out
}

// EachFlow calls f with every installed flow and the owner whose content it is (shared: not to
// be modified).
func (s *State) EachFlow(f func(Owner, *of.Flow)) {
	for _, e := range s.flows {
		f(e.winner(), e.flow)
	}
}

// EachGroup calls f with every installed group and its owner (unpacked anew or shared: not to
// be modified).
func (s *State) EachGroup(f func(Owner, *of.Group)) {
	for o, os := range s.owners {
		for _, g := range os.groups {
			f(o, g.Group())
		}
	}
}

// Conflicts calls f with every key an owner wants with other content than installed, and the
// owner whose content won.
func (s *State) Conflicts(f func(loser Owner, key string, winner Owner)) {
	for o, keys := range s.conflicts {
		for key, w := range keys {
			f(o, key, w)
		}
	}
}

// FlowsPerTable returns how many flows are installed in each table (a copy; the state keeps
// the counts as it commits).
func (s *State) FlowsPerTable() map[uint8]int {
	out := make(map[uint8]int, len(s.perTable))
	for t, n := range s.perTable {
		if n != 0 {
			out[t] = n
		}
	}
	return out
}

func (s *State) dropConflict(o Owner, key string) {
	if m := s.conflicts[o]; m != nil {
		delete(m, key)
		if len(m) == 0 {
			delete(s.conflicts, o)
		}
	}
}

// sortedOwners returns the owners of m, sorted.
func sortedOwners[V any](m map[Owner]V) []Owner {
	out := make([]Owner, 0, len(m))
	for o := range m {
		out = append(out, o)
	}
	slices.SortFunc(out, Compare)
	return out
}

// ReplayOps returns the bundle that reinstalls the flows and groups of the owners mine selects
// whatever OVS holds: delete this round's flows of cats and every group ID they hold, then add
// every group and flow of theirs (a flow by its winner).
func (s *State) ReplayOps(round uint16, cats []pipeline.Category, mine func(Owner) bool) []of.Op {
	var ops []of.Op
	for _, c := range cats {
		ops = append(ops, of.Op{Kind: of.DeleteFlows, Flow: &of.Flow{
			Cookie: pipeline.Cookie(round, c, 0), CookieMask: pipeline.RoundMask | pipeline.CategoryMask}})
	}
	var adds []of.Op
	for _, o := range sortedOwners(s.owners) {
		if !mine(o) {
			continue
		}
		for _, g := range s.owners[o].groups {
			ops = append(ops, of.Op{Kind: of.DeleteGroup, Group: &of.Group{ID: g.ID()}})
			adds = append(adds, of.Op{Kind: of.AddGroup, Group: g.Group()})
		}
	}
	ops = append(ops, adds...)
	keys := make([]string, 0, len(s.flows))
	for k, e := range s.flows {
		if mine(e.winner()) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		ops = append(ops, of.Op{Kind: of.AddFlow, Flow: s.flows[k].flow})
	}
	return ops
}
