package ofctl

import (
	"bufio"
	"bytes"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

func sampleFlow() *openflow.Flow {
	return &openflow.Flow{
		Table: 1, Priority: 200, Cookie: 0x5,
		Match: openflow.Match{
			EthType: openflow.EthTypeIP, IPProto: openflow.ProtoTCP,
			Dst: netip.MustParsePrefix("10.96.0.1/32"), TpDst: 80,
		},
		Actions: []openflow.Action{openflow.GroupAction{ID: 7}},
	}
}

func sampleGroup(id uint32, buckets int) *openflow.Group {
	g := &openflow.Group{ID: id, Type: openflow.GroupTypeSelect, HashFields: []string{"ip_src", "ip_dst", "tcp_src", "tcp_dst"}}
	for i := 0; i < buckets; i++ {
		g.Buckets = append(g.Buckets, openflow.Bucket{ID: uint32(i), Weight: 100, Actions: []openflow.Action{
			openflow.SetReg{Reg: 3, Value: uint32(i)},
			openflow.CT{Commit: true, Zone: 65520, Table: 5, HasTable: true,
				NAT:  &openflow.NAT{Kind: openflow.NATDst, Addr: netip.AddrFrom4([4]byte{10, 20, byte(i >> 8), byte(i)}), Port: 8080},
				Exec: []openflow.Action{openflow.SetCtMark{Value: 1, Mask: 1}}},
		}})
	}
	return g
}

func render(t *testing.T, maxBytes int, ops []openflow.Op) (string, []lineRef) {
	t.Helper()
	var buf bytes.Buffer
	bw := newBundleWriter(bufio.NewWriter(&buf), maxBytes)
	for i := range ops {
		require.NoError(t, bw.writeOp(i, &ops[i]))
	}
	require.NoError(t, bw.w.Flush())
	return buf.String(), bw.lines
}

func TestRenderEachOpKind(t *testing.T) {
	f := sampleFlow()
	g := sampleGroup(7, 2)
	ops := []openflow.Op{
		{Kind: openflow.AddFlow, Flow: f},
		{Kind: openflow.ModifyFlowStrict, Flow: f},
		{Kind: openflow.DeleteFlowStrict, Flow: f},
		{Kind: openflow.DeleteFlows, Flow: &openflow.Flow{Cookie: 0x100, CookieMask: 0xff00}},
		{Kind: openflow.DeleteFlows, Flow: &openflow.Flow{Cookie: 0x7, Table: 3}, TableSet: true},
		{Kind: openflow.AddGroup, Group: g},
		{Kind: openflow.ModifyGroup, Group: g},
		{Kind: openflow.DeleteGroup, Group: &openflow.Group{ID: 7}},
	}
	got, lines := render(t, 0, ops)
	bucket0 := "bucket=bucket_id:0,weight:100,actions=set_field:0->reg3,ct(commit,table=5,zone=65520,nat(dst=10.20.0.0:8080),exec(set_field:0x1/0x1->ct_mark))"
	bucket1 := "bucket=bucket_id:1,weight:100,actions=set_field:0x1->reg3,ct(commit,table=5,zone=65520,nat(dst=10.20.0.1:8080),exec(set_field:0x1/0x1->ct_mark))"
	groupText := "group_id=7,type=select,selection_method=hash,fields(ip_src,ip_dst,tcp_src,tcp_dst)," + bucket0 + "," + bucket1
	want := strings.Join([]string{
		"flow add " + openflow.FormatFlow(f),
		"flow modify_strict " + openflow.FormatFlow(f),
		"flow delete_strict table=1,priority=200,tcp,nw_dst=10.96.0.1,tp_dst=80",
		"flow delete cookie=0x100/0xff00",
		"flow delete cookie=0x7/0xffffffffffffffff,table=3",
		"group add " + groupText,
		"group modify " + groupText,
		"group delete group_id=7",
	}, "\n") + "\n"
	require.Equal(t, "table=1,priority=200,tcp,nw_dst=10.96.0.1,tp_dst=80", openflow.FormatFlowKey(f))
	require.Equal(t, groupText, openflow.FormatGroup(g))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("bundle text (-want +got):\n%s", diff)
	}
	wantLines := []lineRef{{0, 0}, {1, 0}, {2, 0}, {3, 0}, {4, 0}, {5, 0}, {6, 0}, {7, 0}}
	if diff := cmp.Diff(wantLines, lines, cmp.AllowUnexported(lineRef{})); diff != "" {
		t.Fatalf("line refs (-want +got):\n%s", diff)
	}
}

func TestRenderSplitsLargeGroups(t *testing.T) {
	g := sampleGroup(9, 10)
	// Buckets 1-9 render to the same length; bucket 0 is shorter.
	bucketSize := estimateBucketBytes(&g.Buckets[1], len(openflow.FormatBucket(&g.Buckets[1])))
	header := openflow.FormatGroupHeader(g)
	// Room for the header and three buckets per message.
	maxBytes := groupModOverhead + hashFieldOverhead*len(g.HashFields) + len(header) + 3*bucketSize + 3
	ops := []openflow.Op{
		{Kind: openflow.AddFlow, Flow: sampleFlow()},
		{Kind: openflow.AddGroup, Group: g},
		{Kind: openflow.ModifyGroup, Group: g},
	}
	got, lines := render(t, maxBytes, ops)
	rows := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	require.Len(t, rows, len(lines))

	var want []string
	want = append(want, "flow add "+openflow.FormatFlow(sampleFlow()))
	wantLines := []lineRef{{0, 0}}
	for i, verb := range []string{"group add ", "group modify "} {
		op := int32(i + 1)
		b := func(lo, hi int) string {
			var s []string
			for j := lo; j < hi; j++ {
				s = append(s, openflow.FormatBucket(&g.Buckets[j]))
			}
			return strings.Join(s, ",")
		}
		want = append(want,
			verb+header+","+b(0, 3),
			"group insert_bucket group_id=9,command_bucket_id=last,"+b(3, 6),
			"group insert_bucket group_id=9,command_bucket_id=last,"+b(6, 9),
			"group insert_bucket group_id=9,command_bucket_id=last,"+b(9, 10))
		wantLines = append(wantLines, lineRef{op, 0}, lineRef{op, 1}, lineRef{op, 2}, lineRef{op, 3})
	}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Fatalf("bundle lines (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantLines, lines, cmp.AllowUnexported(lineRef{})); diff != "" {
		t.Fatalf("line refs (-want +got):\n%s", diff)
	}
	// Every line stays within the budget by the estimate, and joining the chunks gives back
	// the whole group.
	for _, r := range rows[1:] {
		require.LessOrEqual(t, len(r)-len("group insert_bucket "), maxBytes)
	}
	joined := strings.TrimPrefix(rows[1], "group add ")
	for _, r := range rows[2:5] {
		joined += strings.TrimPrefix(r, "group insert_bucket group_id=9,command_bucket_id=last")
	}
	require.Equal(t, openflow.FormatGroup(g), joined)
}

func TestRenderSplitKeepsOneBucketPerLineWhenTooSmall(t *testing.T) {
	g := sampleGroup(3, 3)
	got, lines := render(t, 1, []openflow.Op{{Kind: openflow.AddGroup, Group: g}})
	rows := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	require.Len(t, rows, 3)
	require.Len(t, lines, 3)
	for i, r := range rows {
		require.Equal(t, 1, strings.Count(r, "bucket=bucket_id:"), "line %d: %s", i, r)
	}
}

func TestRenderDefaultLimitFitsRealGroups(t *testing.T) {
	// 5,000 buckets need several messages at the default limit, each well under 64 KiB of text.
	g := sampleGroup(1, 5000)
	got, lines := render(t, 0, []openflow.Op{{Kind: openflow.AddGroup, Group: g}})
	require.Greater(t, len(lines), 10)
	n := 0
	for _, r := range strings.Split(strings.TrimSuffix(got, "\n"), "\n") {
		require.Less(t, len(r), DefaultMaxMessageBytes)
		n += strings.Count(r, "bucket=bucket_id:")
	}
	require.Equal(t, 5000, n)
	// A small group is one line, identical to FormatGroup.
	small := sampleGroup(2, 4)
	got, _ = render(t, 0, []openflow.Op{{Kind: openflow.AddGroup, Group: small}})
	require.Equal(t, "group add "+openflow.FormatGroup(small)+"\n", got)
}

func TestValidateOp(t *testing.T) {
	require.NoError(t, validateOp(&openflow.Op{Kind: openflow.AddFlow, Flow: sampleFlow()}))
	require.ErrorContains(t, validateOp(&openflow.Op{Kind: openflow.AddFlow}), "add-flow op has no Flow")
	require.ErrorContains(t, validateOp(&openflow.Op{Kind: openflow.DeleteGroup}), "delete-group op has no Group")
	require.ErrorContains(t, validateOp(&openflow.Op{Kind: 99, Flow: sampleFlow()}), "unknown op kind 99")
}
