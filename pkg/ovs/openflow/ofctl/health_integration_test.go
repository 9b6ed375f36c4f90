package ofctl

import (
	"context"
	"fmt"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// TestIntegrationWedgedVSwitchdTimesOut stops ovs-vswitchd (SIGSTOP: the process keeps its
// sockets but answers nothing, as a wedged daemon would) and checks that Apply, DumpFlows and
// CountFlows return a TimeoutError naming the command instead of blocking.
func TestIntegrationWedgedVSwitchdTimesOut(t *testing.T) {
	o, _ := startOVS(t)
	br, _ := addBridge(t, o)
	const call, bundle = 500 * time.Millisecond, 700 * time.Millisecond
	b := New(o.MgmtSocket(br), WithTimeouts(call, bundle, time.Microsecond))
	ctx := context.Background()
	drop := openflow.Flow{Table: 1, Priority: 10, Cookie: 0x7, Match: openflow.Match{EthType: openflow.EthTypeIP}, Actions: []openflow.Action{openflow.Drop{}}}
	require.NoError(t, b.Apply(ctx, []openflow.Op{addFlow(drop)}))

	pid := o.VSwitchdPID()
	require.NotZero(t, pid)
	require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			require.NoError(t, syscall.Kill(pid, syscall.SIGCONT))
		}
	}
	t.Cleanup(resume)

	checks := []struct {
		cmd   string
		limit time.Duration
		run   func() error
	}{
		{"bundle", bundle + time.Microsecond, func() error { return b.Apply(ctx, []openflow.Op{addFlow(drop)}) }},
		{"dump-flows", call, func() error { _, err := b.DumpFlows(ctx, openflow.FlowFilter{}); return err }},
		{"dump-aggregate", call, func() error { _, err := b.CountFlows(ctx, openflow.FlowFilter{}); return err }},
	}
	for _, c := range checks {
		start := time.Now()
		err := c.run()
		took := time.Since(start)
		t.Logf("%s against a stopped ovs-vswitchd returned after %v: %v", c.cmd, took, err)
		var te *TimeoutError
		require.ErrorAs(t, err, &te, c.cmd)
		require.Equal(t, c.cmd, te.Command)
		require.Equal(t, c.limit, te.After)
		require.ErrorContains(t, err, "ovs-ofctl "+c.cmd+" "+o.MgmtSocket(br)+" timed out after")
		// Generous: the process is killed at the deadline, then reaped.
		require.Less(t, took, c.limit+5*time.Second, c.cmd)
	}

	resume()
	n, err := b.CountFlows(ctx, openflow.FlowFilter{})
	require.NoError(t, err, "the bridge answers again after SIGCONT")
	require.Equal(t, 1, n)
	require.True(t, o.VSwitchdAlive())
}

// TestIntegrationCountFlows counts flows of several cookies and tables with dump-aggregate.
func TestIntegrationCountFlows(t *testing.T) {
	o, _ := startOVS(t)
	_, b := addBridge(t, o)
	ctx := context.Background()
	const catShift = 40
	var ops []openflow.Op
	perCategory := map[uint64]int{1: 3, 2: 5, 3: 7}
	for cat, n := range perCategory {
		for i := 0; i < n; i++ {
			ops = append(ops, addFlow(openflow.Flow{Table: uint8(i % 2), Priority: uint16(100*cat) + uint16(i), Cookie: 0x2<<48 | cat<<catShift | uint64(i),
				Match: openflow.Match{EthType: openflow.EthTypeIP}, Actions: []openflow.Action{openflow.Drop{}}}))
		}
	}
	// One flow of another round in category 2.
	ops = append(ops, addFlow(openflow.Flow{Table: 5, Priority: 1, Cookie: 0x1<<48 | 2<<catShift,
		Match: openflow.Match{EthType: openflow.EthTypeARP}, Actions: []openflow.Action{openflow.Drop{}}}))
	require.NoError(t, b.Apply(ctx, ops))

	count := func(f openflow.FlowFilter) int {
		t.Helper()
		n, err := b.CountFlows(ctx, f)
		require.NoError(t, err)
		return n
	}
	require.Equal(t, 16, count(openflow.FlowFilter{}))
	catMask := uint64(0xff) << catShift
	for cat, n := range perCategory {
		want := n
		if cat == 2 {
			want++
		}
		require.Equal(t, want, count(openflow.FlowFilter{Cookie: cat << catShift, CookieMask: catMask}), "category %d", cat)
	}
	roundCat := uint64(0xffff)<<48 | catMask
	require.Equal(t, 5, count(openflow.FlowFilter{Cookie: 0x2<<48 | 2<<catShift, CookieMask: roundCat}))
	require.Equal(t, 1, count(openflow.FlowFilter{Cookie: 0x1 << 48, CookieMask: 0xffff << 48}))
	// Table 1 holds the odd-numbered flows: 1 + 2 + 3.
	require.Equal(t, 6, count(openflow.FlowFilter{Table: 1, TableSet: true}))
	require.Equal(t, 3, count(openflow.FlowFilter{Table: 1, TableSet: true, Cookie: 3 << catShift, CookieMask: catMask}))
	require.Equal(t, 0, count(openflow.FlowFilter{Cookie: 9 << catShift, CookieMask: catMask}))
}

// TestIntegrationDumpSkipsForeignFlows installs, with ovs-ofctl directly, flows the model cannot
// represent next to the agent's own: DumpFlows skips them and still returns the agent's flows.
func TestIntegrationDumpSkipsForeignFlows(t *testing.T) {
	o, _ := startOVS(t)
	br, b := addBridge(t, o)
	ctx := context.Background()
	_, err := o.Ofctl("add-meter", br, "meter=1,pktps,band=type=drop,rate=1000")
	require.NoError(t, err)
	foreign := []string{
		"table=0,priority=50,ip,actions=dec_ttl,goto_table:1",
		"table=0,priority=51,ip,nw_src=192.0.2.1,actions=note:01.02.03,output:1",
		"table=0,priority=52,ip,nw_src=192.0.2.2,actions=mod_nw_tos:4,output:1",
		"table=0,priority=53,ip,nw_src=192.0.2.3,actions=set_field:0x5->tun_id,output:1",
		"table=0,priority=54,ip,nw_src=192.0.2.4,actions=mod_vlan_vid:5,output:1",
		"table=0,priority=55,ip,nw_src=192.0.2.5,actions=push_vlan:0x8100,output:1",
	}
	for _, f := range foreign {
		out, err := o.Ofctl("add-flow", br, f)
		require.NoError(t, err, out)
	}
	own := []openflow.Flow{{
		Table: 1, Priority: 200, Cookie: 0x2 << 40,
		Match:   openflow.Match{EthType: openflow.EthTypeIP, IPProto: openflow.ProtoTCP, Dst: netip.MustParsePrefix("10.96.0.1/32"), TpDst: 80},
		Actions: []openflow.Action{openflow.Drop{}},
	}, {
		Table: 0, Priority: 10, Cookie: 0x1 << 40, Match: openflow.Match{EthType: openflow.EthTypeARP}, Actions: []openflow.Action{openflow.Normal{}},
	}}
	var ops []openflow.Op
	for _, f := range own {
		ops = append(ops, addFlow(f))
	}
	require.NoError(t, b.Apply(ctx, ops))

	got, err := b.DumpFlows(ctx, openflow.FlowFilter{})
	require.NoError(t, err, "foreign flows must not make the dump fail")
	sortFlows(got)
	want := []openflow.Flow{openflow.CanonicalFlow(own[1]), openflow.CanonicalFlow(own[0])}
	sortFlows(want)
	require.Equal(t, fmt.Sprint(want), fmt.Sprint(got))

	// The raw dump really holds them, and the lenient parser counts every one.
	raw, err := o.Ofctl("dump-flows", br, "--no-stats")
	require.NoError(t, err)
	flows, skipped := openflow.ParseFlowDumpLenient(raw)
	require.Len(t, flows, len(own))
	require.Equal(t, len(foreign), skipped.Count, "%v", skipped.Errors)
	for _, e := range skipped.Errors {
		t.Logf("skipped line %d: %s (%s)", e.LineNo, e.Line, e.Reason)
	}
}

// TestIntegrationLargeGroupCountAndDumpFlowsKeepVSwitchdAlive shows what the start-up design
// relies on: with a select group of 5,000 buckets (its description is far larger than 64 KiB)
// installed, dump-aggregate and dump-flows are served and ovs-vswitchd survives. (dump-groups of
// the same bridge makes ovs-vswitchd 3.1 abort in ofpmp_postappend(); see Bridge.DumpGroups.)
func TestIntegrationLargeGroupCountAndDumpFlowsKeepVSwitchdAlive(t *testing.T) {
	o, _ := startOVS(t)
	_, b := addBridge(t, o)
	ctx := context.Background()
	const n = 5000
	g := &openflow.Group{ID: 9, Type: openflow.GroupTypeSelect, HashFields: []string{"ip_src", "ip_dst", "tcp_src", "tcp_dst"}}
	for i := 0; i < n; i++ {
		g.Buckets = append(g.Buckets, openflow.Bucket{ID: uint32(i), Weight: 100, Actions: []openflow.Action{
			openflow.SetReg{Reg: 3, Value: uint32(0x10000 + i)},
			openflow.CT{Commit: true, Table: 5, HasTable: true, Zone: 65520,
				NAT: &openflow.NAT{Kind: openflow.NATDst, Addr: netip.AddrFrom4([4]byte{10, 20, byte(i >> 8), byte(i)}), Port: 8080}},
		}})
	}
	toGroup := openflow.Flow{Priority: 100, Cookie: 0x3 << 40, Match: openflow.Match{EthType: openflow.EthTypeIP, IPProto: openflow.ProtoTCP,
		Dst: netip.MustParsePrefix("10.96.0.10/32"), TpDst: 80}, Actions: []openflow.Action{openflow.GroupAction{ID: 9}}}
	require.NoError(t, b.Apply(ctx, []openflow.Op{addGroup(g), addFlow(toGroup)}))
	pid := o.VSwitchdPID()

	for i := 0; i < 3; i++ {
		c, err := b.CountFlows(ctx, openflow.FlowFilter{Cookie: 0x3 << 40, CookieMask: 0xff << 40})
		require.NoError(t, err)
		require.Equal(t, 1, c)
		flows, err := b.DumpFlows(ctx, openflow.FlowFilter{})
		require.NoError(t, err)
		require.Len(t, flows, 1)
		require.Equal(t, []openflow.Action{openflow.GroupAction{ID: 9}}, flows[0].Actions)
		require.True(t, o.VSwitchdAlive(), "ovs-vswitchd died")
		require.Equal(t, pid, o.VSwitchdPID())
	}
}
