package openflow_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

func TestParseFlowDumpLenientSkipsForeignFlows(t *testing.T) {
	dump := `OFPST_FLOW reply (OF1.5) (xid=0x2):
 cookie=0x10, table=1, priority=7,reg1=0/0x1 actions=drop
 priority=50,ip actions=dec_ttl,goto_table:1
 priority=51,ip,nw_src=192.0.2.1 actions=note:01.02.03.00.00.00,output:1
 priority=52,ip,nw_src=192.0.2.2 actions=mod_nw_tos:4,output:1
 priority=53,ip,nw_src=192.0.2.3 actions=set_field:0x5->tun_id,output:1
 priority=1,bogus_field=3 actions=drop
 actions=drop
`
	got, skipped := of.ParseFlowDumpLenient(dump)
	want := []of.Flow{
		{Cookie: 0x10, Table: 1, Priority: 7, Match: of.Match{Regs: []of.RegMatch{{Reg: 1, Mask: 1}}}, Actions: []of.Action{of.Drop{}}},
		{Priority: 32768, Actions: []of.Action{of.Drop{}}},
	}
	if d := cmp.Diff(want, got, cmpModel()); d != "" {
		t.Errorf("flows (-want +got):\n%s", d)
	}
	require.Equal(t, 5, skipped.Count)
	require.Len(t, skipped.Errors, 5)
	lines := []int{}
	for _, e := range skipped.Errors {
		lines = append(lines, e.LineNo)
	}
	require.Equal(t, []int{3, 4, 5, 6, 7}, lines)
	require.Equal(t, "priority=50,ip actions=dec_ttl,goto_table:1", skipped.Errors[0].Line)
	require.Equal(t, "bogus_field=3", skipped.Errors[4].Token)

	// The strict parser still fails on the same dump.
	_, err := of.ParseFlowDump(dump)
	require.Error(t, err)

	// Errors are capped, the count is not.
	var b strings.Builder
	for i := 0; i < 3*of.MaxSkippedErrors; i++ {
		b.WriteString(" priority=1,ip actions=dec_ttl\n")
	}
	got, skipped = of.ParseFlowDumpLenient(b.String())
	require.Empty(t, got)
	require.Equal(t, 3*of.MaxSkippedErrors, skipped.Count)
	require.Len(t, skipped.Errors, of.MaxSkippedErrors)
}

func TestParseAggregateReply(t *testing.T) {
	cases := []struct {
		in   string
		want of.AggregateStats
		err  string
	}{
		{in: "OFPST_AGGREGATE reply (OF1.5) (xid=0x2): packet_count=0 byte_count=0 flow_count=1\n", want: of.AggregateStats{FlowCount: 1}},
		{in: "OFPST_AGGREGATE reply (OF1.5) (xid=0x2): packet_count=12 byte_count=3400 flow_count=10000", want: of.AggregateStats{PacketCount: 12, ByteCount: 3400, FlowCount: 10000}},
		{in: "NXST_AGGREGATE reply (xid=0x4): packet_count=1 byte_count=2 flow_count=3\n", want: of.AggregateStats{PacketCount: 1, ByteCount: 2, FlowCount: 3}},
		{in: "OFPST_AGGREGATE reply (OF1.5) (xid=0x2):\n packet_count=0 byte_count=0 flow_count=7\n", want: of.AggregateStats{FlowCount: 7}},
		{in: "flow_count=0", want: of.AggregateStats{}},
		{in: "", err: "no flow_count"},
		{in: "OFPST_AGGREGATE reply (OF1.5) (xid=0x2): packet_count=0 byte_count=0\n", err: "no flow_count"},
		{in: "OFPST_AGGREGATE reply (OF1.5) (xid=0x2): flow_count=-1", err: "flow_count"},
		{in: "OFPST_AGGREGATE reply (OF1.5) (xid=0x2): flow_count=99999999999999999999", err: "flow_count"},
	}
	for _, c := range cases {
		got, err := of.ParseAggregateReply(c.in)
		if c.err != "" {
			require.ErrorContains(t, err, c.err, c.in)
			continue
		}
		require.NoError(t, err, c.in)
		require.Equal(t, c.want, got, c.in)
	}
}
