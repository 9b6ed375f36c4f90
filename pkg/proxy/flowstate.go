package proxy

import (
	"sort"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// owner names who owns a set of flows and at most one group: one Service port in one family
// ("ns/name:port/TCP/v4"), or "base" for node-level flows.
type owner string

const baseOwner owner = "base"

// flowEntry is one installed flow with the owners that want it. Endpoint DNAT flows are shared:
// a flow is deleted only when its last owner lets go of it.
type flowEntry struct {
	flow   of.Flow
	text   string // openflow.FormatFlow(flow): what is installed
	owners map[owner]struct{}
}

// flowState is what the proxier has installed in OVS: flows by key (table, priority, match),
// each owner's flow keys, and each owner's groups. It changes only through a committed txn, after
// OVS accepted the bundle.
type flowState struct {
	flows  map[string]*flowEntry
	owned  map[owner][]string
	groups map[owner][]*of.Group
	// preexisting holds group IDs found in OVS at start-up (a previous agent run): adding one of
	// them must be a modify, and those left unused are deleted after the first sync.
	preexisting map[uint32]bool
}

func newFlowState() *flowState {
	return &flowState{
		flows:       map[string]*flowEntry{},
		owned:       map[owner][]string{},
		groups:      map[owner][]*of.Group{},
		preexisting: map[uint32]bool{},
	}
}

// txn stages changes to a flowState. Nothing in the state changes until Commit; Ops returns the
// net difference between the state and the staged result.
type txn struct {
	st     *flowState
	flows  map[string]*flowEntry // staged entries; nil value = deleted
	owned  map[owner][]string    // staged owned keys; nil value = owner gone
	groups map[owner][]*of.Group // staged groups
	// touchedGroups preserves which owners' groups were set, including to nil.
	touchedGroups map[owner]bool
	// extra ops appended after flow deletes and before group deletes (round clean-up).
	extraDeletes []of.Op
	// dropPreexisting lists pre-existing group IDs to delete in this txn.
	dropPreexisting []uint32
}

func (s *flowState) begin() *txn {
	return &txn{st: s, flows: map[string]*flowEntry{}, owned: map[owner][]string{}, groups: map[owner][]*of.Group{}, touchedGroups: map[owner]bool{}}
}

func (t *txn) entry(key string) *flowEntry {
	if e, ok := t.flows[key]; ok {
		return e
	}
	b := t.st.flows[key]
	if b == nil {
		return nil
	}
	c := &flowEntry{flow: b.flow, text: b.text, owners: make(map[owner]struct{}, len(b.owners))}
	for o := range b.owners {
		c.owners[o] = struct{}{}
	}
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
func (t *txn) set(o owner, groups []*of.Group, flows []of.Flow) {
	newKeys := make([]string, 0, len(flows))
	seen := make(map[string]bool, len(flows))
	for i := range flows {
		f := flows[i]
		key := of.FormatFlowKey(&f)
		if seen[key] {
			continue
		}
		seen[key] = true
		newKeys = append(newKeys, key)
		text := of.FormatFlow(&f)
		e := t.entry(key)
		if e == nil {
			e = &flowEntry{owners: map[owner]struct{}{}}
			t.flows[key] = e
		}
		e.flow, e.text = f, text
		e.owners[o] = struct{}{}
	}
	for _, key := range t.ownedKeys(o) {
		if seen[key] {
			continue
		}
		if e := t.entry(key); e != nil {
			delete(e.owners, o)
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

func byID(gs []*of.Group) map[uint32]*of.Group {
	m := make(map[uint32]*of.Group, len(gs))
	for _, g := range gs {
		m[g.ID] = g
	}
	return m
}

// ops returns the bundle that takes OVS from the committed state to the staged one: group adds
// and modifies, flow adds, flow deletes, extra deletes, group deletes.
func (t *txn) ops() []of.Op {
	var groupAdds, flowAdds, flowDels, groupDels []of.Op
	owners := make([]owner, 0, len(t.touchedGroups))
	for o := range t.touchedGroups {
		owners = append(owners, o)
	}
	sort.Slice(owners, func(i, j int) bool { return owners[i] < owners[j] })
	for _, o := range owners {
		before, after := byID(t.st.groups[o]), t.groups[o]
		for _, g := range after {
			b := before[g.ID]
			switch {
			case b == nil:
				kind := of.AddGroup
				if t.st.preexisting[g.ID] {
					kind = of.ModifyGroup
				}
				groupAdds = append(groupAdds, of.Op{Kind: kind, Group: g})
			case of.FormatGroup(b) != of.FormatGroup(g):
				groupAdds = append(groupAdds, of.Op{Kind: of.ModifyGroup, Group: g})
			}
		}
		stay := byID(after)
		for _, b := range t.st.groups[o] {
			if stay[b.ID] == nil {
				groupDels = append(groupDels, of.Op{Kind: of.DeleteGroup, Group: b})
			}
		}
	}
	keys := make([]string, 0, len(t.flows))
	for k := range t.flows {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		after, before := t.flows[k], t.st.flows[k]
		switch {
		case after != nil && (before == nil || before.text != after.text):
			f := after.flow
			flowAdds = append(flowAdds, of.Op{Kind: of.AddFlow, Flow: &f})
		case after == nil && before != nil:
			f := before.flow
			flowDels = append(flowDels, of.Op{Kind: of.DeleteFlowStrict, Flow: &f})
		}
	}
	for _, id := range t.dropPreexisting {
		groupDels = append(groupDels, of.Op{Kind: of.DeleteGroup, Group: &of.Group{ID: id}})
	}
	ops := append(groupAdds, flowAdds...)
	ops = append(ops, flowDels...)
	ops = append(ops, t.extraDeletes...)
	return append(ops, groupDels...)
}

// commit makes the staged state the installed state. Call it only after OVS accepted ops().
func (t *txn) commit() {
	for k, e := range t.flows {
		if e == nil {
			delete(t.st.flows, k)
		} else {
			t.st.flows[k] = e
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
			for _, g := range gs {
				delete(t.st.preexisting, g.ID)
			}
		} else {
			delete(t.st.groups, o)
		}
	}
	for _, id := range t.dropPreexisting {
		delete(t.st.preexisting, id)
	}
}

// flowCount returns how many flows an owner has installed.
func (s *flowState) flowCount(o owner) int { return len(s.owned[o]) }

// groupCount returns how many groups are installed.
func (s *flowState) groupCount() int {
	n := 0
	for _, gs := range s.groups {
		n += len(gs)
	}
	return n
}
