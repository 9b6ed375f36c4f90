package ofctl

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/test/ovssandbox"
)

// startOVS runs a private OVS inside its own network namespace: the netdev datapath creates a
// tap device named "ovs-netdev", so only one ovs-vswitchd can use it per namespace, and other
// tests (or engineers) may run OVS in the root namespace concurrently.
func startOVS(t testing.TB) (*ovssandbox.Instance, *ovssandbox.NetNS) {
	t.Helper()
	ns := ovssandbox.NewNetNS(t, "ofctl")
	return ovssandbox.Start(t, ovssandbox.Options{NetNS: ns.Name}), ns
}

// addBridge creates a netdev bridge with no flows (fail_mode=secure) and a Bridge for it.
func addBridge(t testing.TB, o *ovssandbox.Instance) (string, *Bridge) {
	t.Helper()
	br := fmt.Sprintf("br%06x", rand.IntN(1<<24))
	_, err := o.Vsctl("add-br", br, "--", "set", "bridge", br, "datapath_type=netdev",
		"protocols=OpenFlow10,OpenFlow13,OpenFlow15", "fail_mode=secure")
	require.NoError(t, err)
	require.NoError(t, o.WaitForBridge(br))
	return br, New(o.MgmtSocket(br))
}

// rawDump returns the bridge's flows and groups as ovs-ofctl prints them (without statistics).
func rawDump(t *testing.T, o *ovssandbox.Instance, br string) (string, string) {
	t.Helper()
	flows, err := o.Ofctl("dump-flows", br, "--no-stats")
	require.NoError(t, err)
	groups, err := o.Ofctl("dump-groups", br)
	require.NoError(t, err)
	return flows, groups
}

func selectGroup(id uint32, buckets ...[]openflow.Action) *openflow.Group {
	g := &openflow.Group{ID: id, Type: openflow.GroupTypeSelect, HashFields: []string{"ip_src", "ip_dst", "tcp_src", "tcp_dst"}}
	for i, a := range buckets {
		g.Buckets = append(g.Buckets, openflow.Bucket{ID: uint32(i), Weight: 100, Actions: a})
	}
	return g
}

func addFlow(f openflow.Flow) openflow.Op    { return openflow.Op{Kind: openflow.AddFlow, Flow: &f} }
func addGroup(g *openflow.Group) openflow.Op { return openflow.Op{Kind: openflow.AddGroup, Group: g} }

func TestIntegrationAtomicBatchNamesRejectedOp(t *testing.T) {
	o, _ := startOVS(t)
	br, b := addBridge(t, o)
	ctx := context.Background()

	toGroup1 := openflow.Flow{Table: 1, Priority: 200, Cookie: 0x11, Match: openflow.Match{
		EthType: openflow.EthTypeIP, IPProto: openflow.ProtoTCP, Dst: netip.MustParsePrefix("10.96.0.1/32"), TpDst: 80,
	}, Actions: []openflow.Action{openflow.GroupAction{ID: 1}}}
	dropAll := openflow.Flow{Table: 0, Priority: 10, Match: openflow.Match{EthType: openflow.EthTypeIP}, Actions: []openflow.Action{openflow.Drop{}}}
	require.NoError(t, b.Apply(ctx, []openflow.Op{
		addGroup(selectGroup(1, []openflow.Action{openflow.Output{Port: 1}}, []openflow.Action{openflow.Output{Port: 2}})),
		addFlow(toGroup1),
		addFlow(dropAll),
	}))
	flowsBefore, groupsBefore := rawDump(t, o, br)
	require.Contains(t, flowsBefore, "actions=group:1")
	require.Contains(t, groupsBefore, "group_id=1,")
	parsedFlowsBefore, err := b.DumpFlows(ctx, openflow.FlowFilter{})
	require.NoError(t, err)
	parsedGroupsBefore, err := b.DumpGroups(ctx)
	require.NoError(t, err)
	require.Len(t, parsedFlowsBefore, 2)
	require.Len(t, parsedGroupsBefore, 1)

	// A parse error early in a large batch: ovs-ofctl exits while Apply is still streaming.
	badMove := openflow.Flow{Table: 5, Priority: 1, Match: openflow.Match{EthType: openflow.EthTypeIP}, Actions: []openflow.Action{
		openflow.Move{Src: openflow.Subfield{Field: "NXM_NX_REG0", Start: 0, End: 40}, Dst: openflow.Subfield{Field: "NXM_NX_REG1", Whole: true}}}}
	bigBatch := append(append(flowsInTable(6, 5), addFlow(badMove)), flowsInTable(7, 20000)...)

	toMissing := openflow.Flow{Table: 2, Priority: 300, Match: openflow.Match{EthType: openflow.EthTypeIP},
		Actions: []openflow.Action{openflow.GroupAction{ID: 99}}}
	cases := []struct {
		name   string
		ops    []openflow.Op
		index  int
		kind   openflow.OpKind
		reason string
		text   string
	}{{
		name: "flow to a missing group",
		ops: []openflow.Op{
			addFlow(openflow.Flow{Table: 3, Priority: 5, Match: openflow.Match{EthType: openflow.EthTypeARP}, Actions: []openflow.Action{openflow.Normal{}}}),
			addGroup(selectGroup(2, []openflow.Action{openflow.Output{Port: 3}})),
			{Kind: openflow.DeleteFlowStrict, Flow: &dropAll},
			addFlow(toMissing),
			{Kind: openflow.DeleteGroup, Group: &openflow.Group{ID: 1}},
		},
		index: 3, kind: openflow.AddFlow, reason: "OFPBAC_BAD_OUT_GROUP",
		text: "flow add " + openflow.FormatFlow(&toMissing),
	}, {
		name: "duplicate group add",
		ops: []openflow.Op{
			{Kind: openflow.DeleteFlows, Flow: &openflow.Flow{Cookie: 0x11}},
			addGroup(selectGroup(3, []openflow.Action{openflow.Output{Port: 3}})),
			addGroup(selectGroup(1, []openflow.Action{openflow.Output{Port: 4}})),
			addFlow(openflow.Flow{Table: 4, Priority: 1, Actions: []openflow.Action{openflow.Drop{}}}),
		},
		index: 2, kind: openflow.AddGroup, reason: "OFPGMFC_GROUP_EXISTS",
		text: "group add " + openflow.FormatGroup(selectGroup(1, []openflow.Action{openflow.Output{Port: 4}})),
	}, {
		name:  "parse error early in a large batch",
		ops:   bigBatch,
		index: 5, kind: openflow.AddFlow, reason: "NXM_NX_REG0[0..40]->NXM_NX_REG1[]: ending bit 40 is not valid because field is only 32 bits wide",
		text: "flow add " + openflow.FormatFlow(&badMove),
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := b.Apply(ctx, tc.ops)
			t.Log(err)
			var rej *RejectedOpError
			require.True(t, errors.As(err, &rej), "want a RejectedOpError, got %v", err)
			require.Equal(t, tc.index, rej.Index, "%v", err)
			require.Equal(t, tc.kind, rej.Kind)
			require.Equal(t, tc.reason, rej.Reason)
			require.Equal(t, tc.text, rej.Text)
			require.Contains(t, err.Error(), fmt.Sprintf("op %d (%s", tc.index, tc.kind))

			flowsAfter, groupsAfter := rawDump(t, o, br)
			require.Equal(t, flowsBefore, flowsAfter, "flows changed by a rejected batch")
			require.Equal(t, groupsBefore, groupsAfter, "groups changed by a rejected batch")
			parsedFlows, err := b.DumpFlows(ctx, openflow.FlowFilter{})
			require.NoError(t, err)
			require.Empty(t, gocmp.Diff(parsedFlowsBefore, parsedFlows, equateIP()))
			parsedGroups, err := b.DumpGroups(ctx)
			require.NoError(t, err)
			require.Empty(t, gocmp.Diff(parsedGroupsBefore, parsedGroups, equateIP()))
		})
	}
}

func flowsInTable(table uint8, n int) []openflow.Op {
	ops := make([]openflow.Op, 0, n)
	for i := 0; i < n; i++ {
		ops = append(ops, addFlow(openflow.Flow{Table: table, Priority: uint16(i + 1), Match: openflow.Match{EthType: openflow.EthTypeIP},
			Actions: []openflow.Action{openflow.Drop{}}}))
	}
	return ops
}

func sortFlows(f []openflow.Flow) {
	slices.SortStableFunc(f, func(a, b openflow.Flow) int {
		return cmp.Or(cmp.Compare(a.Table, b.Table), cmp.Compare(b.Priority, a.Priority))
	})
}

func TestIntegrationRoundTrip(t *testing.T) {
	o, _ := startOVS(t)
	_, b := addBridge(t, o)
	ctx := context.Background()
	mac, _ := net.ParseMAC("aa:bb:cc:dd:ee:01")
	flows := []openflow.Flow{{
		Priority: 200, Match: openflow.Match{EthType: openflow.EthTypeIP, Dst: netip.MustParsePrefix("10.96.0.0/16")},
		Actions: []openflow.Action{openflow.CT{Table: 1, HasTable: true, Zone: 65520, NAT: &openflow.NAT{Kind: openflow.NATReply}}},
	}, {
		Table: 1, Priority: 200, Cookie: 0x5,
		Match: openflow.Match{
			CtState: &openflow.CtState{Set: openflow.CtNew | openflow.CtTrk, Unset: openflow.CtEst},
			CtMark:  &openflow.Masked32{Value: 2, Mask: 2},
			EthType: openflow.EthTypeIP, IPProto: openflow.ProtoTCP,
			Regs: []openflow.RegMatch{{Reg: 0, Value: 1, Mask: 0xf}},
			Dst:  netip.MustParsePrefix("10.96.0.1/32"), TpDst: 80,
		},
		Actions: []openflow.Action{openflow.GroupAction{ID: 1}},
	}, {
		Table: 2, Priority: 100, Match: openflow.Match{InPort: 3, Extra: &openflow.MatchExtra{EthSrc: mac}},
		Actions: []openflow.Action{openflow.SetEthDst{MAC: mac}, openflow.Output{Port: 3}},
	}, {
		Table: 3, Priority: 5, Match: openflow.Match{EthType: openflow.EthTypeIP},
		Actions: []openflow.Action{openflow.CT{Commit: true, Zone: 65521, NAT: &openflow.NAT{Kind: openflow.NATSrc, Addr: netip.MustParseAddr("10.0.0.254")}}, openflow.Controller{}},
	}}
	groups := []*openflow.Group{
		selectGroup(1,
			[]openflow.Action{openflow.SetReg{Reg: 3, Value: 0xa000001}, openflow.SetReg{Reg: 4, Value: 0x50, Mask: 0xffff}, openflow.Resubmit{Table: 5}},
			[]openflow.Action{openflow.CT{Commit: true, Table: 6, HasTable: true, Zone: 65520,
				NAT:  &openflow.NAT{Kind: openflow.NATDst, Addr: netip.MustParseAddr("10.0.0.2"), Port: 8080},
				Exec: []openflow.Action{openflow.SetCtMark{Value: 1, Mask: 1}}}}),
	}
	var ops []openflow.Op
	for _, g := range groups {
		ops = append(ops, addGroup(g))
	}
	for _, f := range flows {
		ops = append(ops, addFlow(f))
	}
	require.NoError(t, b.Apply(ctx, ops))

	got, err := b.DumpFlows(ctx, openflow.FlowFilter{})
	require.NoError(t, err)
	var want []openflow.Flow
	for _, f := range flows {
		want = append(want, openflow.CanonicalFlow(f))
	}
	sortFlows(want)
	sortFlows(got)
	if diff := gocmp.Diff(want, got, equateIP()); diff != "" {
		t.Fatalf("dumped flows (-applied +dumped):\n%s", diff)
	}
	gotGroups, err := b.DumpGroups(ctx)
	require.NoError(t, err)
	if diff := gocmp.Diff([]openflow.Group{openflow.CanonicalGroup(*groups[0])}, gotGroups, equateIP()); diff != "" {
		t.Fatalf("dumped groups (-applied +dumped):\n%s", diff)
	}

	// A filtered dump returns only the selected flows.
	got, err = b.DumpFlows(ctx, openflow.FlowFilter{Cookie: 0x5, CookieMask: 0xf, Table: 1, TableSet: true})
	require.NoError(t, err)
	require.Empty(t, gocmp.Diff([]openflow.Flow{openflow.CanonicalFlow(flows[1])}, got, equateIP()))
}

func TestIntegrationDeleteFlowsByCookie(t *testing.T) {
	o, _ := startOVS(t)
	_, b := addBridge(t, o)
	ctx := context.Background()
	type key struct {
		table  uint8
		cookie uint64
	}
	all := []key{{1, 0x1001}, {1, 0x1002}, {1, 0x2001}, {2, 0x1003}, {2, 0x2002}, {3, 0x1004}}
	var ops []openflow.Op
	for i, k := range all {
		ops = append(ops, addFlow(openflow.Flow{Table: k.table, Priority: uint16(100 + i), Cookie: k.cookie,
			Match: openflow.Match{EthType: openflow.EthTypeIP}, Actions: []openflow.Action{openflow.Drop{}}}))
	}
	require.NoError(t, b.Apply(ctx, ops))
	remaining := func() []key {
		flows, err := b.DumpFlows(ctx, openflow.FlowFilter{})
		require.NoError(t, err)
		var ks []key
		for _, f := range flows {
			ks = append(ks, key{f.Table, f.Cookie})
		}
		slices.SortFunc(ks, func(a, b key) int { return cmp.Or(cmp.Compare(a.table, b.table), cmp.Compare(a.cookie, b.cookie)) })
		return ks
	}
	require.Equal(t, all, remaining())

	// Cookie 0x1xxx in table 2 only.
	require.NoError(t, b.Apply(ctx, []openflow.Op{{Kind: openflow.DeleteFlows, TableSet: true,
		Flow: &openflow.Flow{Table: 2, Cookie: 0x1000, CookieMask: 0xf000}}}))
	require.Equal(t, []key{{1, 0x1001}, {1, 0x1002}, {1, 0x2001}, {2, 0x2002}, {3, 0x1004}}, remaining())

	// Cookie 0x1xxx in every table.
	require.NoError(t, b.Apply(ctx, []openflow.Op{{Kind: openflow.DeleteFlows,
		Flow: &openflow.Flow{Cookie: 0x1000, CookieMask: 0xf000}}}))
	require.Equal(t, []key{{1, 0x2001}, {2, 0x2002}}, remaining())
}

func TestIntegrationUnreachableSwitch(t *testing.T) {
	ovssandbox.Require(t)
	target := "unix:" + t.TempDir() + "/nobody.mgmt"
	err := New(target).Apply(context.Background(), []openflow.Op{addFlow(openflow.Flow{Actions: []openflow.Action{openflow.Drop{}}})})
	require.Error(t, err)
	require.True(t, strings.HasPrefix(err.Error(), "ovs-ofctl bundle "+target+": "), err.Error())
	require.Contains(t, err.Error(), "(No such file or directory)")
	_, err = New(target).DumpFlows(context.Background(), openflow.FlowFilter{})
	require.ErrorContains(t, err, "ovs-ofctl dump-flows "+target+": ")
}
