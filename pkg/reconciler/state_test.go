package reconciler

import (
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
