package openflowtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

var ctx = context.Background()

// netip values have unexported fields; compare them with ==.
var cmpOpts = cmpopts.EquateComparable(netip.Prefix{}, netip.Addr{})

func tcpFlow(table uint8, prio uint16, cookie uint64, dst string, port uint16, actions ...openflow.Action) *openflow.Flow {
	return &openflow.Flow{
		Table: table, Priority: prio, Cookie: cookie,
		Match: openflow.Match{
			EthType: openflow.EthTypeIP, IPProto: openflow.ProtoTCP,
			Dst: netip.MustParsePrefix(dst), TpDst: port,
		},
		Actions: actions,
	}
}

func group(id uint32, bucketTables ...uint8) *openflow.Group {
	g := &openflow.Group{ID: id, Type: openflow.GroupTypeSelect, HashFields: []string{"ip_src", "ip_dst"}}
	for i, t := range bucketTables {
		g.Buckets = append(g.Buckets, openflow.Bucket{
			ID: uint32(i), Weight: 100,
			Actions: []openflow.Action{openflow.SetReg{Reg: 3, Value: uint32(i)}, openflow.Resubmit{Table: t}},
		})
	}
	return g
}

func addFlow(f *openflow.Flow) openflow.Op { return openflow.Op{Kind: openflow.AddFlow, Flow: f} }
func modFlow(f *openflow.Flow) openflow.Op {
	return openflow.Op{Kind: openflow.ModifyFlowStrict, Flow: f}
}
func delFlow(f *openflow.Flow) openflow.Op {
	return openflow.Op{Kind: openflow.DeleteFlowStrict, Flow: f}
}
func addGroup(g *openflow.Group) openflow.Op { return openflow.Op{Kind: openflow.AddGroup, Group: g} }
func modGroup(g *openflow.Group) openflow.Op {
	return openflow.Op{Kind: openflow.ModifyGroup, Group: g}
}
func delGroup(id uint32) openflow.Op {
	return openflow.Op{Kind: openflow.DeleteGroup, Group: &openflow.Group{ID: id}}
}
func delCookie(c, mask uint64) openflow.Op {
	return openflow.Op{Kind: openflow.DeleteFlows, Flow: &openflow.Flow{Cookie: c, CookieMask: mask}}
}
func delCookieIn(t uint8, c, m uint64) openflow.Op {
	return openflow.Op{Kind: openflow.DeleteFlows, Flow: &openflow.Flow{Table: t, Cookie: c, CookieMask: m}, TableSet: true}
}

// lines renders groups and flows as Dump does: one per line via openflow.FormatGroup and
// openflow.FormatFlow. Expectations are built from models so they follow the renderer.
func lines(objs ...any) string {
	var sb strings.Builder
	for _, o := range objs {
		switch o := o.(type) {
		case *openflow.Group:
			sb.WriteString(openflow.FormatGroup(o))
		case *openflow.Flow:
			sb.WriteString(openflow.FormatFlow(o))
		default:
			panic(fmt.Sprintf("lines: %T", o))
		}
		sb.WriteByte('\n')
	}
	return sb.String()
}

func withTimeouts(f *openflow.Flow, idle, hard uint16) *openflow.Flow {
	f.IdleTimeout, f.HardTimeout = idle, hard
	return f
}

func mustApply(t *testing.T, b *FakeBridge, ops ...openflow.Op) {
	t.Helper()
	require.NoError(t, b.Apply(ctx, ops))
}

// The seeded state: group 1, flows A and B in table 1, flow C in table 2.
func seedGroup() *openflow.Group { return group(1, 5, 5) }
func seedA() *openflow.Flow {
	return tcpFlow(1, 200, 0x1, "10.96.0.1/32", 80, openflow.GroupAction{ID: 1})
}
func seedB() *openflow.Flow {
	return tcpFlow(1, 200, 0x2, "10.96.0.2/32", 443, openflow.Resubmit{Table: 3})
}
func seedC() *openflow.Flow { return tcpFlow(2, 100, 0x1, "10.96.0.0/16", 0, openflow.Normal{}) }

func seeded(t *testing.T) *FakeBridge {
	t.Helper()
	b := NewFakeBridge()
	mustApply(t, b, addGroup(seedGroup()), addFlow(seedA()), addFlow(seedB()), addFlow(seedC()))
	require.Equal(t, lines(seedGroup(), seedA(), seedB(), seedC()), b.Dump())
	return b
}

func TestDumpCanonicalOrder(t *testing.T) {
	b := NewFakeBridge()
	// Added in scrambled order; Dump must sort groups by ID, flows by table asc, priority
	// desc, match text asc.
	mustApply(t, b,
		addGroup(group(9, 4)),
		addGroup(group(2, 4)),
		addFlow(tcpFlow(3, 10, 0, "10.0.0.1/32", 0, openflow.Normal{})),
		addFlow(tcpFlow(1, 100, 0, "10.0.0.2/32", 0, openflow.Normal{})),
		addFlow(tcpFlow(1, 300, 0x7, "10.0.0.3/32", 80, openflow.GroupAction{ID: 9})),
		addFlow(tcpFlow(1, 100, 0, "10.0.0.1/32", 0, openflow.Normal{})),
		addFlow(&openflow.Flow{Table: 0, Priority: 0}),
	)
	want := lines(
		group(2, 4),
		group(9, 4),
		&openflow.Flow{Table: 0, Priority: 0},
		tcpFlow(1, 300, 0x7, "10.0.0.3/32", 80, openflow.GroupAction{ID: 9}),
		tcpFlow(1, 100, 0, "10.0.0.1/32", 0, openflow.Normal{}),
		tcpFlow(1, 100, 0, "10.0.0.2/32", 0, openflow.Normal{}),
		tcpFlow(3, 10, 0, "10.0.0.1/32", 0, openflow.Normal{}),
	)
	require.Equal(t, 7, strings.Count(want, "\n"))
	require.True(t, strings.HasPrefix(want, "group_id=2,"))
	if diff := cmp.Diff(want, b.Dump()); diff != "" {
		t.Errorf("Dump() mismatch (-want +got):\n%s", diff)
	}
	require.Equal(t, 5, b.FlowCount())
	require.Equal(t, 2, b.GroupCount())

	flows, err := b.DumpFlows(ctx, openflow.FlowFilter{})
	require.NoError(t, err)
	type key struct {
		Table    uint8
		Priority uint16
		Dst      string
	}
	var got []key
	for _, f := range flows {
		dst := ""
		if f.Match.Dst.IsValid() {
			dst = f.Match.Dst.String()
		}
		got = append(got, key{f.Table, f.Priority, dst})
	}
	require.Equal(t, []key{
		{0, 0, ""},
		{1, 300, "10.0.0.3/32"},
		{1, 100, "10.0.0.1/32"},
		{1, 100, "10.0.0.2/32"},
		{3, 10, "10.0.0.1/32"},
	}, got)
	groups, err := b.DumpGroups(ctx)
	require.NoError(t, err)
	require.Len(t, groups, 2)
	require.Equal(t, uint32(2), groups[0].ID)
	require.Equal(t, uint32(9), groups[1].ID)
}

func TestAddFlowReplacesSameKey(t *testing.T) {
	b := NewFakeBridge()
	f := tcpFlow(1, 200, 0x1, "10.96.0.1/32", 80, openflow.Normal{})
	f.IdleTimeout = 30
	mustApply(t, b, addFlow(f))
	// Same table, priority and match: cookie, actions and timeouts are replaced.
	mustApply(t, b, addFlow(tcpFlow(1, 200, 0x2, "10.96.0.1/32", 80, openflow.Output{Port: 3})))
	require.Equal(t, lines(tcpFlow(1, 200, 0x2, "10.96.0.1/32", 80, openflow.Output{Port: 3})), b.Dump())
	// A different priority is a different flow.
	mustApply(t, b, addFlow(tcpFlow(1, 201, 0x2, "10.96.0.1/32", 80, openflow.Normal{})))
	require.Equal(t, 2, b.FlowCount())
}

func TestMatchNormalizedLikeOVS(t *testing.T) {
	b := NewFakeBridge()
	f := tcpFlow(1, 10, 0, "10.0.0.7/24", 0, openflow.Normal{})
	f.Match.Regs = []openflow.RegMatch{{Reg: 4, Value: 0x13, Mask: 0x0f}, {Reg: 0, Value: 1, Mask: 0xffffffff}}
	mustApply(t, b, addFlow(f))
	// OVS stores the masked prefix and value and prints registers in order, so the same flow
	// written canonically replaces it rather than adding a second one.
	g := tcpFlow(1, 10, 0, "10.0.0.0/24", 0, openflow.Output{Port: 1})
	g.Match.Regs = []openflow.RegMatch{{Reg: 0, Value: 1}, {Reg: 4, Value: 0x3, Mask: 0x0f}}
	mustApply(t, b, addFlow(g))
	want := tcpFlow(1, 10, 0, "10.0.0.0/24", 0, openflow.Output{Port: 1})
	want.Match.Regs = []openflow.RegMatch{{Reg: 0, Value: 1}, {Reg: 4, Value: 0x3, Mask: 0x0f}}
	flows, err := b.DumpFlows(ctx, openflow.FlowFilter{})
	require.NoError(t, err)
	if diff := cmp.Diff([]openflow.Flow{*want}, flows, cmpOpts); diff != "" {
		t.Errorf("stored flow (-want +got):\n%s", diff)
	}
	require.Equal(t, lines(want), b.Dump())
	// And a strict delete with the unnormalized form finds it.
	mustApply(t, b, delFlow(f))
	require.Equal(t, 0, b.FlowCount())

	// A /0 prefix and an empty ct_state match anything, so they are the same flow as none;
	// xxreg values are masked like reg values.
	any0 := tcpFlow(2, 1, 0, "0.0.0.0/0", 0, openflow.Normal{})
	any0.Match.CtState = &openflow.CtState{}
	any0.Match.Extra = &openflow.MatchExtra{XXRegs: []openflow.XXRegMatch{{XXReg: 1, Value: openflow.Uint128{Lo: 0x1ff}, Mask: openflow.Uint128{Lo: 0xff}}}}
	mustApply(t, b, addFlow(any0))
	plain := &openflow.Flow{Table: 2, Priority: 1, Match: openflow.Match{EthType: openflow.EthTypeIP, IPProto: openflow.ProtoTCP, Extra: &openflow.MatchExtra{XXRegs: []openflow.XXRegMatch{{XXReg: 1, Value: openflow.Uint128{Lo: 0xff}, Mask: openflow.Uint128{Lo: 0xff}}}}}}
	mustApply(t, b, addFlow(plain))
	require.Equal(t, lines(plain), b.Dump())
}

func TestModifyFlowStrict(t *testing.T) {
	b := NewFakeBridge()
	// On a missing flow, a strict modify does nothing (it does not add, unlike OpenFlow 1.0).
	mustApply(t, b, modFlow(tcpFlow(1, 200, 0x1, "10.96.0.1/32", 80, openflow.Normal{})))
	require.Equal(t, 0, b.FlowCount())
	require.Equal(t, "", b.Dump())

	f := tcpFlow(1, 200, 0x1, "10.96.0.1/32", 80, openflow.Normal{})
	f.IdleTimeout, f.HardTimeout = 30, 60
	mustApply(t, b, addFlow(f))
	// Actions and cookie replaced, timeouts kept (OVS modify semantics).
	m := tcpFlow(1, 200, 0x5, "10.96.0.1/32", 80, openflow.Output{Port: 2})
	m.IdleTimeout = 99
	mustApply(t, b, modFlow(m))
	require.Equal(t, lines(withTimeouts(tcpFlow(1, 200, 0x5, "10.96.0.1/32", 80, openflow.Output{Port: 2}), 30, 60)), b.Dump())
	// A modify without a cookie keeps the old one (ovs-ofctl only changes a named cookie).
	mustApply(t, b, modFlow(tcpFlow(1, 200, 0, "10.96.0.1/32", 80, openflow.Normal{})))
	require.Equal(t, lines(withTimeouts(tcpFlow(1, 200, 0x5, "10.96.0.1/32", 80, openflow.Normal{}), 30, 60)), b.Dump())
	// A modify of a different priority touches nothing.
	mustApply(t, b, modFlow(tcpFlow(1, 201, 0, "10.96.0.1/32", 80, openflow.Drop{})))
	require.Equal(t, 1, b.FlowCount())
}

func TestDeleteFlowStrict(t *testing.T) {
	b := seeded(t)
	before := b.Dump()
	mustApply(t, b, delFlow(tcpFlow(1, 199, 0, "10.96.0.1/32", 80))) // missing: no-op
	require.Equal(t, before, b.Dump())
	mustApply(t, b, delFlow(tcpFlow(1, 200, 0x999, "10.96.0.1/32", 80))) // cookie and actions ignored
	require.Equal(t, lines(seedGroup(), seedB(), seedC()), b.Dump())
}

func TestDeleteFlowsByCookie(t *testing.T) {
	t.Run("exact cookie in all tables", func(t *testing.T) {
		b := seeded(t)
		mustApply(t, b, delCookie(0x1, 0))
		require.Equal(t, "", b.DumpCookie(0x1, 0))
		require.Equal(t, lines(seedGroup(), seedB()), b.Dump())
	})
	t.Run("exact cookie in one table", func(t *testing.T) {
		b := seeded(t)
		mustApply(t, b, delCookieIn(2, 0x1, 0))
		require.Equal(t, lines(seedA()), b.DumpCookie(0x1, 0))
		require.Equal(t, lines(seedGroup(), seedA(), seedB()), b.Dump())
	})
	t.Run("masked cookie", func(t *testing.T) {
		b := seeded(t)
		mustApply(t, b, addFlow(tcpFlow(4, 1, 0x101, "10.1.0.0/16", 0, openflow.Normal{})))
		mustApply(t, b, delCookie(0x0, 0xf0)) // every cookie with bits 4..7 clear: 0x1, 0x2 and 0x101
		require.Equal(t, 0, b.FlowCount())
	})
	t.Run("masked cookie keeps non-matching", func(t *testing.T) {
		b := seeded(t)
		mustApply(t, b, addFlow(tcpFlow(4, 1, 0x101, "10.1.0.0/16", 0, openflow.Normal{})))
		mustApply(t, b, delCookie(0x100, 0xf00))
		require.Equal(t, 3, b.FlowCount())
		require.Equal(t, "", b.DumpCookie(0x100, 0xf00))
	})
	t.Run("no match is a no-op", func(t *testing.T) {
		b := seeded(t)
		before := b.Dump()
		mustApply(t, b, delCookie(0x77, 0), delCookieIn(9, 0x1, 0))
		require.Equal(t, before, b.Dump())
	})
}

func TestGroups(t *testing.T) {
	t.Run("add existing fails", func(t *testing.T) {
		b := seeded(t)
		err := b.Apply(ctx, []openflow.Op{addGroup(group(5, 3)), addGroup(group(5, 4))})
		require.ErrorIs(t, err, ErrGroupExists)
		require.Equal(t, "op 1 (add-group "+openflow.FormatGroup(group(5, 4))+"): group 5 already exists (OFPGMFC_GROUP_EXISTS)", err.Error())
		require.Equal(t, 1, b.GroupCount())
	})
	t.Run("modify missing fails", func(t *testing.T) {
		b := seeded(t)
		err := b.Apply(ctx, []openflow.Op{modGroup(group(7, 3))})
		require.ErrorIs(t, err, ErrUnknownGroup)
		require.Contains(t, err.Error(), "op 0 (modify-group group_id=7,")
	})
	t.Run("modify replaces buckets", func(t *testing.T) {
		b := seeded(t)
		mustApply(t, b, modGroup(group(1, 6, 6, 6)))
		groups, err := b.DumpGroups(ctx)
		require.NoError(t, err)
		if diff := cmp.Diff([]openflow.Group{*group(1, 6, 6, 6)}, groups, cmpOpts); diff != "" {
			t.Errorf("groups (-want +got):\n%s", diff)
		}
	})
	t.Run("delete missing is a no-op", func(t *testing.T) {
		b := seeded(t)
		before := b.Dump()
		mustApply(t, b, delGroup(42))
		require.Equal(t, before, b.Dump())
	})
	t.Run("delete removes referencing flows", func(t *testing.T) {
		b := seeded(t)
		toTwo := tcpFlow(3, 5, 0x9, "10.9.0.1/32", 0, openflow.SetReg{Reg: 1, Value: 1}, openflow.GroupAction{ID: 2})
		mustApply(t, b, addGroup(group(2, 5)), addFlow(toTwo))
		mustApply(t, b, delGroup(1))
		require.Equal(t, lines(group(2, 5), seedB(), seedC(), toTwo), b.Dump())
		mustApply(t, b, delGroup(2))
		require.Equal(t, lines(seedB(), seedC()), b.Dump())
	})
}

func TestGroupReferences(t *testing.T) {
	toGroup := func(id uint32) *openflow.Flow {
		return tcpFlow(1, 100, 0, "10.96.0.9/32", 80, openflow.GroupAction{ID: id})
	}
	t.Run("flow to missing group", func(t *testing.T) {
		b := NewFakeBridge()
		err := b.Apply(ctx, []openflow.Op{addFlow(toGroup(3))})
		require.ErrorIs(t, err, ErrBadOutGroup)
		require.Contains(t, err.Error(), "op 0 (add-flow "+openflow.FormatFlow(toGroup(3))+"): ")
	})
	t.Run("group added earlier in batch", func(t *testing.T) {
		b := NewFakeBridge()
		mustApply(t, b, addGroup(group(3, 4)), addFlow(toGroup(3)))
		require.Equal(t, 1, b.FlowCount())
	})
	t.Run("group added later in batch", func(t *testing.T) {
		b := NewFakeBridge()
		err := b.Apply(ctx, []openflow.Op{addFlow(toGroup(3)), addGroup(group(3, 4))})
		var opErr *OpError
		require.ErrorAs(t, err, &opErr)
		require.Equal(t, 0, opErr.Index)
		require.Equal(t, openflow.AddFlow, opErr.Kind)
		require.ErrorIs(t, err, ErrBadOutGroup)
		require.Equal(t, 0, b.GroupCount())
	})
	t.Run("group deleted earlier in batch", func(t *testing.T) {
		b := seeded(t)
		err := b.Apply(ctx, []openflow.Op{delGroup(1), addFlow(toGroup(1))})
		require.ErrorIs(t, err, ErrBadOutGroup)
		require.Equal(t, 1, b.GroupCount())
	})
	t.Run("modify of missing flow still checks", func(t *testing.T) {
		b := NewFakeBridge()
		require.ErrorIs(t, b.Apply(ctx, []openflow.Op{modFlow(toGroup(8))}), ErrBadOutGroup)
	})
	t.Run("bucket to missing group", func(t *testing.T) {
		b := NewFakeBridge()
		g := group(4, 3)
		g.Buckets[0].Actions = []openflow.Action{openflow.GroupAction{ID: 5}}
		err := b.Apply(ctx, []openflow.Op{addGroup(g)})
		require.ErrorIs(t, err, ErrBadOutGroup)
		require.Contains(t, err.Error(), "bucket_id 0")
		mustApply(t, b, addGroup(group(5, 3)), addGroup(g))
		require.Equal(t, 2, b.GroupCount())
	})
}

func TestBatchIsAtomic(t *testing.T) {
	b := seeded(t)
	before := b.Dump()
	err := b.Apply(ctx, []openflow.Op{
		addFlow(tcpFlow(5, 1, 0x3, "10.5.0.0/16", 0, openflow.Normal{})),
		delCookie(0x1, 0),
		modGroup(group(1, 7)),
		delGroup(1),
		addGroup(group(1, 8)), // fine: 1 was deleted above
		addGroup(group(1, 9)), // fails: exists again
		addFlow(tcpFlow(6, 1, 0, "10.6.0.0/16", 0, openflow.Normal{})),
	})
	var opErr *OpError
	require.ErrorAs(t, err, &opErr)
	require.Equal(t, 5, opErr.Index)
	require.Equal(t, openflow.AddGroup, opErr.Kind)
	require.Equal(t, openflow.FormatGroup(group(1, 9)), opErr.Object)
	require.ErrorIs(t, err, ErrGroupExists)
	if diff := cmp.Diff(before, b.Dump()); diff != "" {
		t.Errorf("failed batch changed the state (-before +after):\n%s", diff)
	}
}

func TestStructuralValidation(t *testing.T) {
	ipFlow := func(mut func(f *openflow.Flow)) *openflow.Flow {
		f := &openflow.Flow{Table: 2, Priority: 10, Match: openflow.Match{EthType: openflow.EthTypeIP}, Actions: []openflow.Action{openflow.Normal{}}}
		mut(f)
		return f
	}
	natDst := &openflow.NAT{Kind: openflow.NATDst, Addr: netip.MustParseAddr("10.0.0.2"), Port: 8080}
	tests := []struct {
		name string
		op   openflow.Op
		want error // nil: accepted
	}{
		{"nil flow add", openflow.Op{Kind: openflow.AddFlow}, ErrMalformed},
		{"nil flow modify", openflow.Op{Kind: openflow.ModifyFlowStrict}, ErrMalformed},
		{"nil flow delete", openflow.Op{Kind: openflow.DeleteFlowStrict}, ErrMalformed},
		{"nil flow delete-flows", openflow.Op{Kind: openflow.DeleteFlows}, ErrMalformed},
		{"nil group add", openflow.Op{Kind: openflow.AddGroup}, ErrMalformed},
		{"nil group modify", openflow.Op{Kind: openflow.ModifyGroup}, ErrMalformed},
		{"nil group delete", openflow.Op{Kind: openflow.DeleteGroup}, ErrMalformed},
		{"unknown kind", openflow.Op{Kind: 99, Flow: ipFlow(func(*openflow.Flow) {})}, ErrMalformed},
		{"nil action", addFlow(ipFlow(func(f *openflow.Flow) { f.Actions = []openflow.Action{nil} })), ErrMalformed},
		{"pointer action", addFlow(ipFlow(func(f *openflow.Flow) { f.Actions = []openflow.Action{&openflow.Output{Port: 1}} })), ErrMalformed},
		{"drop alone", addFlow(ipFlow(func(f *openflow.Flow) { f.Actions = []openflow.Action{openflow.Drop{}} })), nil},
		{"drop with others", addFlow(ipFlow(func(f *openflow.Flow) { f.Actions = []openflow.Action{openflow.SetReg{Reg: 1}, openflow.Drop{}} })), ErrBadAction},
		{"ip_proto without eth_type", addFlow(ipFlow(func(f *openflow.Flow) { f.Match.EthType = 0; f.Match.IPProto = openflow.ProtoTCP })), ErrBadPrereq},
		{"ip_proto with arp", addFlow(ipFlow(func(f *openflow.Flow) { f.Match.EthType = openflow.EthTypeARP; f.Match.IPProto = openflow.ProtoUDP })), ErrBadPrereq},
		{"tcp6 port ok", addFlow(ipFlow(func(f *openflow.Flow) {
			f.Match.EthType, f.Match.IPProto, f.Match.TpDst = openflow.EthTypeIPv6, openflow.ProtoTCP, 80
		})), nil},
		{"tp_dst without proto", addFlow(ipFlow(func(f *openflow.Flow) { f.Match.TpDst = 80 })), ErrBadPrereq},
		{"tp_src with icmp", addFlow(ipFlow(func(f *openflow.Flow) { f.Match.IPProto, f.Match.TpSrc = openflow.ProtoICMP, 1 })), ErrBadPrereq},
		{"nw_dst without eth_type", addFlow(ipFlow(func(f *openflow.Flow) { f.Match.EthType = 0; f.Match.Dst = netip.MustParsePrefix("10.0.0.0/8") })), ErrBadPrereq},
		{"ipv6 prefix in ip flow", addFlow(ipFlow(func(f *openflow.Flow) { f.Match.Src = netip.MustParsePrefix("fd00::/64") })), ErrBadMatch},
		{"arp_tpa without arp", addFlow(ipFlow(func(f *openflow.Flow) { f.Match.Extra = &openflow.MatchExtra{ARPTPA: netip.MustParseAddr("10.0.0.1")} })), ErrBadPrereq},
		{"short mac", addFlow(ipFlow(func(f *openflow.Flow) { f.Match.Extra = &openflow.MatchExtra{EthSrc: net.HardwareAddr{1, 2}} })), ErrBadMatch},
		{"arp_spa without arp", addFlow(ipFlow(func(f *openflow.Flow) { f.Match.Extra = &openflow.MatchExtra{ARPSPA: netip.MustParseAddr("10.0.0.1")} })), ErrBadPrereq},
		{"arp_sha with arp", addFlow(ipFlow(func(f *openflow.Flow) {
			f.Match.EthType, f.Match.Extra = openflow.EthTypeARP, &openflow.MatchExtra{ARPSHA: net.HardwareAddr{1, 2, 3, 4, 5, 6}}
		})), nil},
		{"nd_target without icmp_type", addFlow(ipFlow(func(f *openflow.Flow) {
			f.Match.EthType, f.Match.IPProto, f.Match.Extra = openflow.EthTypeIPv6, openflow.ProtoICMPv6, &openflow.MatchExtra{NDTarget: netip.MustParseAddr("fd00::1")}
		})), ErrBadPrereq},
		{"nd_target of an advertisement", addFlow(ipFlow(func(f *openflow.Flow) {
			typ := uint8(136)
			f.Match.EthType, f.Match.IPProto, f.Match.Extra = openflow.EthTypeIPv6, openflow.ProtoICMPv6, &openflow.MatchExtra{ICMPType: &typ, NDTarget: netip.MustParseAddr("fd00::1")}
		})), nil},
		{"nd_tll of a solicitation", addFlow(ipFlow(func(f *openflow.Flow) {
			typ := uint8(135)
			f.Match.EthType, f.Match.IPProto, f.Match.Extra = openflow.EthTypeIPv6, openflow.ProtoICMPv6, &openflow.MatchExtra{ICMPType: &typ, NDTLL: net.HardwareAddr{1, 2, 3, 4, 5, 6}}
		})), ErrBadPrereq},
		{"duplicate reg", addFlow(ipFlow(func(f *openflow.Flow) { f.Match.Regs = []openflow.RegMatch{{Reg: 1}, {Reg: 1, Value: 2}} })), ErrBadMatch},
		{"reg16", addFlow(ipFlow(func(f *openflow.Flow) { f.Match.Regs = []openflow.RegMatch{{Reg: 16}} })), ErrBadMatch},
		{"ct_state set and unset", addFlow(ipFlow(func(f *openflow.Flow) {
			f.Match.CtState = &openflow.CtState{Set: openflow.CtNew, Unset: openflow.CtNew}
		})), ErrBadMatch},
		{"ct_mark outside ct", addFlow(ipFlow(func(f *openflow.Flow) { f.Actions = []openflow.Action{openflow.SetCtMark{Value: 1}} })), ErrBadAction},
		{"ct without ip", addFlow(ipFlow(func(f *openflow.Flow) { f.Match.EthType = 0; f.Actions = []openflow.Action{openflow.CT{Zone: 1}} })), ErrBadAction},
		{"ct nat commit ok", addFlow(ipFlow(func(f *openflow.Flow) {
			f.Actions = []openflow.Action{openflow.CT{Commit: true, NAT: natDst, Exec: []openflow.Action{openflow.SetCtMark{Value: 1, Mask: 1}}}}
		})), nil},
		{"ct nat without commit", addFlow(ipFlow(func(f *openflow.Flow) { f.Actions = []openflow.Action{openflow.CT{NAT: natDst}} })), ErrBadAction},
		{"ct bare nat without commit ok", addFlow(ipFlow(func(f *openflow.Flow) { f.Actions = []openflow.Action{openflow.CT{NAT: &openflow.NAT{}}} })), nil},
		{"ct exec without commit", addFlow(ipFlow(func(f *openflow.Flow) {
			f.Actions = []openflow.Action{openflow.CT{Exec: []openflow.Action{openflow.SetCtMark{Value: 1}}}}
		})), ErrBadAction},
		{"ct exec output", addFlow(ipFlow(func(f *openflow.Flow) {
			f.Actions = []openflow.Action{openflow.CT{Commit: true, Exec: []openflow.Action{openflow.Output{Port: 1}}}}
		})), ErrBadAction},
		{"ct v4 nat in ipv6 flow", addFlow(ipFlow(func(f *openflow.Flow) {
			f.Match.EthType = openflow.EthTypeIPv6
			f.Actions = []openflow.Action{openflow.CT{Commit: true, NAT: natDst}}
		})), ErrBadAction},
		{"goto later table ok", addFlow(ipFlow(func(f *openflow.Flow) {
			f.Actions = []openflow.Action{openflow.SetReg{Reg: 1}, openflow.GotoTable{Table: 3}}
		})), nil},
		{"goto same table", addFlow(ipFlow(func(f *openflow.Flow) { f.Actions = []openflow.Action{openflow.GotoTable{Table: 2}} })), ErrBadAction},
		{"goto not last", addFlow(ipFlow(func(f *openflow.Flow) { f.Actions = []openflow.Action{openflow.GotoTable{Table: 4}, openflow.Normal{}} })), ErrBadAction},
		{"bad controller reason", addFlow(ipFlow(func(f *openflow.Flow) { f.Actions = []openflow.Action{openflow.Controller{Reason: "because"}} })), ErrBadAction},
		{"group id 0", addGroup(group(0, 3)), ErrBadGroup},
		{"reserved group id", addGroup(group(0xfffffffc, 3)), ErrBadGroup},
		{"delete group id 0", delGroup(0), ErrBadGroup},
		{"duplicate bucket ids", addGroup(&openflow.Group{ID: 3, Buckets: []openflow.Bucket{{ID: 1}, {ID: 1}}}), ErrBadGroup},
		{"empty group ok", addGroup(&openflow.Group{ID: 3}), nil},
		{"bucket goto", addGroup(&openflow.Group{ID: 3, Buckets: []openflow.Bucket{{ID: 1, Actions: []openflow.Action{openflow.GotoTable{Table: 3}}}}}), ErrBadAction},
		{"bucket drop with others", addGroup(&openflow.Group{ID: 3, Buckets: []openflow.Bucket{{ID: 1, Actions: []openflow.Action{openflow.Normal{}, openflow.Drop{}}}}}), ErrBadAction},
		{"bucket ct nat ok", addGroup(&openflow.Group{ID: 3, Buckets: []openflow.Bucket{{ID: 1, Actions: []openflow.Action{openflow.CT{Commit: true, NAT: natDst}}}}}), nil},
		{"delete-strict bad match", delFlow(ipFlow(func(f *openflow.Flow) { f.Match.TpDst = 1 })), ErrBadPrereq},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := seeded(t)
			before := b.Dump()
			// A valid op first, so the failing op is at index 1.
			err := b.Apply(ctx, []openflow.Op{addFlow(tcpFlow(9, 1, 0, "10.9.9.9/32", 0, openflow.Normal{})), tc.op})
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.want)
			var opErr *OpError
			require.ErrorAs(t, err, &opErr)
			require.Equal(t, 1, opErr.Index)
			require.Contains(t, err.Error(), fmt.Sprintf("op 1 (%s ", tc.op.Kind))
			require.Equal(t, before, b.Dump())
		})
	}
}

func TestFailNextApply(t *testing.T) {
	b := seeded(t)
	before := b.Dump()
	boom := errors.New("boom")
	b.FailNextApply(boom)
	err := b.Apply(ctx, []openflow.Op{delCookie(0x1, 0)})
	require.ErrorIs(t, err, boom)
	require.Equal(t, before, b.Dump())
	// Only the next call fails.
	mustApply(t, b, delCookie(0x1, 0))
	require.Equal(t, 1, b.FlowCount())
	// Disarming with nil.
	b.FailNextApply(boom)
	b.FailNextApply(nil)
	mustApply(t, b, delCookie(0x2, 0))
	require.Equal(t, 0, b.FlowCount())
}

func TestApplyHook(t *testing.T) {
	b := seeded(t)
	before := b.Dump()
	var seen [][]openflow.Op
	var dumped string
	boom := errors.New("hook says no")
	fail := true
	b.SetApplyHook(func(ops []openflow.Op) error {
		seen = append(seen, ops)
		dumped = b.Dump() // the hook may read the fake without deadlocking
		if fail {
			return boom
		}
		return nil
	})
	ops := []openflow.Op{delCookie(0x1, 0), delGroup(1)}
	require.ErrorIs(t, b.Apply(ctx, ops), boom)
	require.Equal(t, before, b.Dump())
	require.Equal(t, before, dumped)
	fail = false
	mustApply(t, b, ops...)
	require.Equal(t, 1, b.FlowCount())
	require.Len(t, seen, 2)
	if diff := cmp.Diff(ops, seen[1], cmpOpts); diff != "" {
		t.Errorf("hook ops (-want +got):\n%s", diff)
	}
	b.SetApplyHook(nil)
	mustApply(t, b, delCookie(0x2, 0))
	require.Len(t, seen, 2)
}

func TestObservation(t *testing.T) {
	b := NewFakeBridge()
	require.Nil(t, b.LastOps())
	f := tcpFlow(1, 1, 0x1, "10.0.0.1/32", 0, openflow.Normal{})
	mustApply(t, b, addGroup(group(1, 2)), addFlow(f))
	mustApply(t, b, delCookie(0x1, 0))
	require.Error(t, b.Apply(ctx, []openflow.Op{addGroup(group(1, 2))})) // failed calls are recorded too
	require.Equal(t, 3, b.ApplyCount())
	require.Equal(t, 4, b.OpsTotal())
	calls := b.ApplyCalls()
	require.Len(t, calls, 3)
	if diff := cmp.Diff([]openflow.Op{addGroup(group(1, 2)), addFlow(tcpFlow(1, 1, 0x1, "10.0.0.1/32", 0, openflow.Normal{}))}, calls[0], cmpOpts); diff != "" {
		t.Errorf("first call (-want +got):\n%s", diff)
	}
	require.Equal(t, []openflow.Op{addGroup(group(1, 2))}, b.LastOps())
	// Recorded ops are copies: changing the caller's flow after the call changes nothing.
	f.Actions[0] = openflow.Drop{}
	f.Match.Dst = netip.MustParsePrefix("10.0.0.2/32")
	require.Equal(t, openflow.Action(openflow.Normal{}), b.ApplyCalls()[0][1].Flow.Actions[0])
	// And so are the returned ones.
	calls[0][1].Flow.Actions[0] = openflow.Drop{}
	require.Equal(t, openflow.Action(openflow.Normal{}), b.ApplyCalls()[0][1].Flow.Actions[0])

	b.Reset()
	require.Equal(t, 0, b.ApplyCount())
	require.Equal(t, 0, b.OpsTotal())
	require.Empty(t, b.ApplyCalls())
	require.Equal(t, 1, b.GroupCount(), "Reset keeps the switch state")

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, b.Apply(cancelled, []openflow.Op{delGroup(1)}), context.Canceled)
	require.Equal(t, 0, b.ApplyCount())
	require.Equal(t, 1, b.GroupCount())
	_, err := b.DumpFlows(cancelled, openflow.FlowFilter{})
	require.ErrorIs(t, err, context.Canceled)
}

func TestDumpFlowsFilter(t *testing.T) {
	b := seeded(t)
	mustApply(t, b, addFlow(tcpFlow(1, 5, 0x11, "10.1.0.0/16", 0, openflow.Normal{})))
	keys := func(filter openflow.FlowFilter) []string {
		flows, err := b.DumpFlows(ctx, filter)
		require.NoError(t, err)
		var out []string
		for i := range flows {
			out = append(out, fmt.Sprintf("%d/%d/%#x", flows[i].Table, flows[i].Priority, flows[i].Cookie))
		}
		return out
	}
	require.Equal(t, []string{"1/200/0x1", "1/200/0x2", "1/5/0x11", "2/100/0x1"}, keys(openflow.FlowFilter{}))
	require.Equal(t, []string{"2/100/0x1"}, keys(openflow.FlowFilter{Table: 2, TableSet: true}))
	require.Equal(t, []string{"1/200/0x1", "2/100/0x1"}, keys(openflow.FlowFilter{Cookie: 0x1}))
	require.Equal(t, []string{"1/200/0x1", "1/5/0x11", "2/100/0x1"}, keys(openflow.FlowFilter{Cookie: 0x1, CookieMask: 0xf}))
	require.Equal(t, []string{"1/200/0x1", "1/5/0x11"}, keys(openflow.FlowFilter{Cookie: 0x1, CookieMask: 0xf, Table: 1, TableSet: true}))
	require.Nil(t, keys(openflow.FlowFilter{Table: 0, TableSet: true}))
	require.Equal(t, lines(tcpFlow(1, 200, 0x2, "10.96.0.2/32", 443, openflow.Resubmit{Table: 3})), b.DumpCookie(0x2, 0))
	require.Equal(t, 2, strings.Count(b.DumpCookie(0x10, 0xf0)+b.DumpCookie(0x2, 0), "\n"))
}

func TestCopyIsolation(t *testing.T) {
	b := NewFakeBridge()
	mac := net.HardwareAddr{0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0x01}
	f := &openflow.Flow{
		Table: 1, Priority: 10, Cookie: 0x1, CookieMask: 0xff,
		Match: openflow.Match{
			EthType: openflow.EthTypeIP, CtMark: &openflow.Masked32{Value: 2, Mask: 2},
			Regs: []openflow.RegMatch{{Reg: 0, Value: 1}}, Extra: &openflow.MatchExtra{EthSrc: mac},
		},
		Actions: []openflow.Action{
			openflow.SetEthDst{MAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}},
			openflow.CT{Commit: true, Zone: 1, NAT: &openflow.NAT{Kind: openflow.NATDst, Addr: netip.MustParseAddr("10.0.0.2")},
				Exec: []openflow.Action{openflow.SetCtMark{Value: 1}}},
			openflow.Controller{UserData: []byte{1, 2}},
		},
	}
	g := group(1, 3)
	mustApply(t, b, addGroup(g), addFlow(f))
	before := b.Dump()

	// Mutating what was passed in does not reach the fake.
	f.Match.Extra.EthSrc[5] = 0x99
	f.Match.CtMark.Value = 7
	f.Match.Regs[0].Value = 9
	f.Actions[0].(openflow.SetEthDst).MAC[5] = 0x99
	f.Actions[1].(openflow.CT).NAT.Port = 99
	f.Actions[2].(openflow.Controller).UserData[0] = 9
	g.Buckets[0].Actions[0] = openflow.Normal{}
	g.HashFields[0] = "tcp_dst"
	require.Equal(t, before, b.Dump())

	// Mutating what was dumped does not reach the fake either.
	flows, err := b.DumpFlows(ctx, openflow.FlowFilter{})
	require.NoError(t, err)
	require.Len(t, flows, 1)
	require.Zero(t, flows[0].CookieMask, "the stored flow has no cookie mask")
	got := flows[0]
	got.Match.Extra.EthSrc[0] = 0
	got.Match.CtMark.Mask = 0
	got.Match.Regs[0].Reg = 5
	got.Actions[0].(openflow.SetEthDst).MAC[0] = 0
	got.Actions[1].(openflow.CT).NAT.Addr = netip.MustParseAddr("1.1.1.1")
	got.Actions[1].(openflow.CT).Exec[0] = openflow.Normal{}
	got.Actions[2] = openflow.Drop{}
	groups, err := b.DumpGroups(ctx)
	require.NoError(t, err)
	groups[0].Buckets[0].Actions[1] = openflow.Normal{}
	groups[0].Buckets[0].Weight = 1
	groups[0].HashFields[1] = "x"
	require.Equal(t, before, b.Dump())
}

func TestConcurrentUse(t *testing.T) {
	b := NewFakeBridge()
	mustApply(t, b, addGroup(group(1, 2)))
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				dst := fmt.Sprintf("10.%d.%d.1/32", w, i)
				if err := b.Apply(ctx, []openflow.Op{addFlow(tcpFlow(1, 10, uint64(w+1), dst, 80, openflow.GroupAction{ID: 1}))}); err != nil {
					t.Error(err)
					return
				}
				_ = b.Dump()
				if _, err := b.DumpFlows(ctx, openflow.FlowFilter{Cookie: uint64(w + 1)}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	require.Equal(t, 400, b.FlowCount())
	require.Equal(t, 401, b.ApplyCount())
	mustApply(t, b, delGroup(1))
	require.Equal(t, 0, b.FlowCount())
}

func TestRejectOps(t *testing.T) {
	b := seeded(t)
	before := b.Dump()
	bad := errors.New("OFPBAC_BAD_ARGUMENT")
	b.RejectOps(func(op openflow.Op) error {
		if op.Kind == openflow.AddFlow && op.Flow.Match.TpDst == 81 {
			return bad
		}
		return nil
	})
	good := tcpFlow(1, 100, 0x5, "10.96.0.5/32", 80, openflow.Normal{})
	rejected := tcpFlow(1, 100, 0x5, "10.96.0.5/32", 81, openflow.Normal{})
	err := b.Apply(ctx, []openflow.Op{addFlow(good), addFlow(rejected), addFlow(rejected)})
	require.ErrorIs(t, err, bad)
	idx, ok := openflow.RejectedOpIndex(err)
	require.True(t, ok)
	require.Equal(t, 1, idx)
	require.Equal(t, before, b.Dump(), "a rejected batch changes nothing")
	// Still armed: ops the predicate accepts go through.
	mustApply(t, b, addFlow(good))
	require.Equal(t, 4, b.FlowCount())
	b.RejectOps(nil)
	mustApply(t, b, addFlow(rejected))
	require.Equal(t, 5, b.FlowCount())
}

func TestWipeAndClearFlows(t *testing.T) {
	b := seeded(t)
	require.Equal(t, 3, b.FlowCount())
	require.Equal(t, 1, b.GroupCount())
	b.ClearFlows(openflow.FlowFilter{Cookie: 0x1, CookieMask: 0xf})
	n, err := b.CountFlows(ctx, openflow.FlowFilter{})
	require.NoError(t, err)
	require.Equal(t, 1, n, "only the flow whose cookie the filter does not select stays")
	require.Equal(t, 1, b.GroupCount(), "del-flows keeps groups")
	b.ClearFlows(openflow.FlowFilter{})
	require.Equal(t, 0, b.FlowCount())
	require.Equal(t, 1, b.GroupCount())
	// The group survived, so adding it again fails as in OVS.
	require.ErrorIs(t, b.Apply(ctx, []openflow.Op{addGroup(seedGroup())}), ErrGroupExists)
	b.Wipe()
	require.Equal(t, 0, b.GroupCount())
	mustApply(t, b, addGroup(seedGroup()), addFlow(seedA()))
	require.Equal(t, 1, b.FlowCount())
}

func TestCountFlows(t *testing.T) {
	b := seeded(t)
	for _, tc := range []struct {
		filter openflow.FlowFilter
		want   int
	}{
		{openflow.FlowFilter{}, 3},
		{openflow.FlowFilter{Cookie: 0x1}, 2},
		{openflow.FlowFilter{Cookie: 0x2}, 1},
		{openflow.FlowFilter{Table: 2, TableSet: true}, 1},
		{openflow.FlowFilter{Cookie: 0x3}, 0},
	} {
		n, err := b.CountFlows(ctx, tc.filter)
		require.NoError(t, err)
		flows, err := b.DumpFlows(ctx, tc.filter)
		require.NoError(t, err)
		require.Equal(t, tc.want, n, "filter %+v", tc.filter)
		require.Len(t, flows, n, "CountFlows and DumpFlows agree for %+v", tc.filter)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err := b.CountFlows(cancelled, openflow.FlowFilter{})
	require.ErrorIs(t, err, context.Canceled)
}
