package reconciler

import (
	"net/netip"
	"reflect"
	"testing"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

func stateTestFlows(next uint8) []of.Flow {
	return []of.Flow{
		{Table: 10, Priority: 100, Match: of.Match{EthType: of.EthTypeIP}, Actions: []of.Action{of.Resubmit{Table: 11}}},
		{Table: 10, Priority: 200, Match: of.Match{EthType: of.EthTypeIPv6}, Actions: []of.Action{of.Resubmit{Table: next}}},
	}
}

// TestStateKeepsOnlyTheLatestSlice checks that the state points into the slice of each owner's
// latest set, unchanged flows included, so older slices can be collected; and that an unchanged
// flow costs no op.
func TestStateKeepsOnlyTheLatestSlice(t *testing.T) {
	st := NewState(nil)
	o := Owner{Kind: KindServicePort, Key: "ns/a:80/TCP/v4"}
	apply := func(flows []of.Flow) []of.Op {
		tx := st.Begin()
		tx.Set(o, nil, flows)
		ops, _ := tx.Ops()
		tx.Commit()
		return ops
	}
	first := stateTestFlows(11)
	if ops := apply(first); len(ops) != 2 {
		t.Fatalf("first set: %d ops, want 2 adds", len(ops))
	}
	second := stateTestFlows(11)
	if ops := apply(second); len(ops) != 0 {
		t.Fatalf("unchanged set: %d ops, want none", len(ops))
	}
	third := stateTestFlows(12) // the second flow's actions change
	if ops := apply(third); len(ops) != 1 || ops[0].Kind != of.AddFlow || ops[0].Flow != &third[1] {
		t.Fatalf("changed set: ops %+v, want one add of the new flow", ops)
	}
	for i := range third {
		key := of.FormatFlowKey(&third[i])
		e := st.flows[key]
		if e == nil {
			t.Fatalf("flow %s not in the state", key)
		}
		if e.flow != &third[i] || e.owners[0].flow != &third[i] {
			t.Errorf("flow %s: the state points outside the latest slice", key)
		}
	}
}

// serviceGroup is a Service port's select group as the pipeline builds it: one ct action with
// a DNAT per bucket (the shape the state keeps packed).
func serviceGroup(id uint32, ports ...uint16) *of.Group {
	g := &of.Group{ID: id, Type: of.GroupTypeSelect, HashFields: []string{"ip_src", "ip_dst"}}
	exec := []of.Action{of.SetCtMark{Value: 0x10, Mask: 0x10}}
	for i, p := range ports {
		nat := &of.NAT{Kind: of.NATDst, Addr: netip.MustParseAddr("10.0.0.1"), Port: p}
		g.Buckets = append(g.Buckets, of.Bucket{ID: uint32(i), Weight: 100,
			Actions: []of.Action{of.CT{Commit: true, Zone: 65520, Table: 21, HasTable: true, NAT: nat, Exec: exec}}})
	}
	return g
}

// TestStateKeepsGroupsPacked: the state keeps a Service's group packed; an equal group set
// again costs no op, a changed one a modify, one no longer set a delete of its ID; what the
// state gives back (OwnerGroups, EachGroup, the replay) is equal to the group set.
func TestStateKeepsGroupsPacked(t *testing.T) {
	st := NewState(nil)
	o := Owner{Kind: KindServicePort, Key: "ns/a:80/TCP/v4"}
	apply := func(gs ...*of.Group) []of.Op {
		tx := st.Begin()
		tx.Set(o, gs, stateTestFlows(11))
		ops, _ := tx.Ops()
		tx.Commit()
		return ops
	}
	first := serviceGroup(7, 80, 81)
	apply(first)
	// A group kept as it is would come back as the same pointer.
	got := st.OwnerGroups(o)
	if len(got) != 1 || got[0] == first {
		t.Fatalf("OwnerGroups = %v: the state keeps the group set as it is, not packed", got)
	}
	if !reflect.DeepEqual(got[0], first) {
		t.Fatalf("OwnerGroups = %s, want %s", of.FormatGroup(got[0]), of.FormatGroup(first))
	}
	st.EachGroup(func(_ Owner, g *of.Group) {
		if !reflect.DeepEqual(g, first) {
			t.Errorf("EachGroup gives %s, want %s", of.FormatGroup(g), of.FormatGroup(first))
		}
	})
	var replayed []*of.Group
	for _, op := range st.ReplayOps(0, nil, func(Owner) bool { return true }) {
		if op.Kind == of.AddGroup {
			replayed = append(replayed, op.Group)
		}
	}
	if len(replayed) != 1 || !reflect.DeepEqual(replayed[0], first) {
		t.Errorf("replay adds %v, want the group set", replayed)
	}
	if ops := apply(serviceGroup(7, 80, 81)); len(ops) != 0 {
		t.Errorf("an equal group set again: ops %v, want none", ops)
	}
	changed := serviceGroup(7, 80, 82)
	if ops := apply(changed); len(ops) != 1 || ops[0].Kind != of.ModifyGroup || ops[0].Group != changed {
		t.Errorf("a changed group: ops %v, want one modify of it", ops)
	}
	if ops := apply(serviceGroup(8, 80)); len(ops) != 2 || ops[0].Kind != of.AddGroup || ops[1].Kind != of.DeleteGroup || ops[1].Group.ID != 7 {
		t.Errorf("another group: ops %v, want an add of group 8 and a delete of group 7", ops)
	}
}
