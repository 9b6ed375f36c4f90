package openflow_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

func testNames(t testing.TB) *of.Names {
	t.Helper()
	n, err := of.NewNames(map[uint8]string{0: "Classifier", 14: "ServiceLB", 16: "ServiceSNAT", 17: "Learn", 19: "Commit"},
		[]of.RegField{
			{Name: "Source", Reg: 0, Start: 0, End: 3, Values: map[uint32]string{1: "Gateway", 2: "Pod"}},
			{Name: "External", Reg: 0, Start: 5, End: 5},
			{Name: "EndpointIP", Reg: 3, Start: 0, End: 31, IPv4: true},
			{Name: "EndpointPort", Reg: 4, Start: 0, End: 15},
			{Name: "Shard", Reg: 5, Start: 0, End: 31},
		})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestNamedRendering: tables and register fields show by name wherever a flow names them, bits
// of no field and subfields of move and learn stay raw, and a nil Names renders FormatFlow's text.
func TestNamedRendering(t *testing.T) {
	n := testNames(t)
	f := of.Flow{Table: 14, Priority: 200, Cookie: 0x5,
		Match: of.Match{EthType: of.EthTypeIP, Regs: []of.RegMatch{{Reg: 0, Value: 0x123, Mask: 0x12f}, {Reg: 3, Value: 0x0a0a0105}, {Reg: 5, Value: 0x2, Mask: 0x3}}},
		Actions: []of.Action{
			of.SetReg{Reg: 0, Value: 0x2, Mask: 0xf},
			of.SetReg{Reg: 4, Value: 0x1f90, Mask: 0xffff},
			of.SetReg{Reg: 0, Value: 0x30, Mask: 0x30}, // two bits, one of no field: raw
			of.Move{Src: of.Subfield{Field: "NXM_NX_REG3", Whole: true}, Dst: of.Subfield{Field: "NXM_NX_REG3", Whole: true}},
			of.Resubmit{Table: 17},
			of.CT{Commit: true, Table: 16, HasTable: true, Zone: 65520, Exec: []of.Action{of.SetReg{Reg: 0, Value: 0x20, Mask: 0x20}}},
			of.Learn{Table: 99, Priority: 200, Specs: []of.LearnSpec{{Kind: of.LearnMatch, Dst: of.Subfield{Field: "NXM_OF_IP_SRC", Whole: true}}}},
			of.GotoTable{Table: 19},
		}}
	want := "cookie=0x5,table=ServiceLB,priority=200,ip,Source=3,External=1,reg0=0x100/0x100,EndpointIP=10.10.1.5,Shard=0x2/0x3 " +
		"actions=set_field:Pod->Source,set_field:8080->EndpointPort,set_field:0x30/0x30->reg0," +
		"move:NXM_NX_REG3[]->NXM_NX_REG3[],resubmit(,Learn),ct(commit,table=ServiceSNAT,zone=65520,exec(set_field:1->External))," +
		"learn(table=99,priority=200,NXM_OF_IP_SRC[]),goto_table:Commit"
	if got := of.FormatFlowNamed(&f, n); got != want {
		t.Errorf("FormatFlowNamed =\n  %s\nwant\n  %s", got, want)
	}
	if got, plain := of.FormatFlowNamed(&f, nil), of.FormatFlow(&f); got != plain {
		t.Errorf("FormatFlowNamed(nil) = %s, want FormatFlow's %s", got, plain)
	}
	back, err := of.ParseFlowNamed(want, n)
	if err != nil {
		t.Fatal(err)
	}
	cf, cb := of.CanonicalFlow(f), of.CanonicalFlow(back)
	if diff := cmp.Diff(of.FormatFlow(&cf), of.FormatFlow(&cb)); diff != "" {
		t.Errorf("the named text parses back to another flow (-rendered +parsed):\n%s", diff)
	}
}

// TestNamedGroupRoundTrip: a group's bucket actions show names and parse back.
func TestNamedGroupRoundTrip(t *testing.T) {
	n := testNames(t)
	g := of.Group{ID: 1, Type: of.GroupTypeSelect, HashFields: []string{"ip_src"}, Buckets: []of.Bucket{
		{ID: 0, Weight: 100, Actions: []of.Action{of.SetReg{Reg: 3, Value: 0x0a000001}, of.Resubmit{Table: 17},
			of.CT{Commit: true, Table: 16, HasTable: true, Zone: 65520, NAT: &of.NAT{Kind: of.NATDst, Addr: netip.MustParseAddr("10.0.0.1"), Port: 80}}}},
	}}
	text := of.FormatGroupNamed(&g, n)
	for _, s := range []string{"set_field:10.0.0.1->EndpointIP", "resubmit(,Learn)", "ct(commit,table=ServiceSNAT,"} {
		if !strings.Contains(text, s) {
			t.Errorf("%s lacks %s", text, s)
		}
	}
	back, err := of.ParseGroupNamed(text, n)
	if err != nil {
		t.Fatal(err)
	}
	cg, cb := of.CanonicalGroup(g), of.CanonicalGroup(back)
	if diff := cmp.Diff(of.FormatGroup(&cg), of.FormatGroup(&cb)); diff != "" {
		t.Errorf("(-rendered +parsed):\n%s", diff)
	}
}

// TestParseNamedErrors: a name the Names do not know is an error naming the token.
func TestParseNamedErrors(t *testing.T) {
	n := testNames(t)
	for _, tc := range []struct{ line, want string }{
		{"table=Nope,priority=1 actions=drop", `unknown table "Nope"`},
		{"table=ServiceLB,priority=1 actions=goto_table:Nope", `unknown table "Nope"`},
		{"priority=1 actions=resubmit(,Nope)", `unknown table "Nope"`},
		{"priority=1 actions=ct(commit,table=Nope)", `unknown table "Nope"`},
		{"priority=1,Source=Uplink actions=drop", `field Source: "Uplink" is no value of it`},
		{"priority=1 actions=set_field:16->Source", "field Source: 16 does not fit bits 0..3"},
		{"priority=1,Unknown=1 actions=drop", "unknown match field"},
	} {
		_, err := of.ParseFlowNamed(tc.line, n)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseFlowNamed(%q) = %v, want an error with %q", tc.line, err, tc.want)
		}
	}
}

// TestNewNamesReportsEveryProblem: NewNames lists all that is wrong, not the first problem.
func TestNewNamesReportsEveryProblem(t *testing.T) {
	_, err := of.NewNames(map[uint8]string{1: "table", 2: "Same", 3: "Same"}, []of.RegField{
		{Name: "A", Reg: 0, Start: 0, End: 3},
		{Name: "B", Reg: 0, Start: 3, End: 4},
		{Name: "Same", Reg: 1, Start: 0, End: 0},
		{Name: "Ip", Reg: 2, Start: 0, End: 7, IPv4: true},
		{Name: "Wide", Reg: 16, Start: 0, End: 0},
		{Name: "V", Reg: 5, Start: 0, End: 1, Values: map[uint32]string{1: "x-y"}},
	})
	if err == nil {
		t.Fatal("NewNames accepted bad names")
	}
	for _, want := range []string{
		`table 1: name "table" must start with an upper-case letter`,
		`tables 2 and 3 are both named "Same"`,
		`fields "A" and "B" overlap in reg0`,
		`field "Same" has a table's name`,
		`field "Ip": an IPv4 field must be a whole register`,
		`field "Wide": bits 0..0 of reg16 are not in a register`,
		`field "V" value 1: name "x-y" must start with an upper-case letter`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

// FuzzNamedRoundTrip: every flow the parser accepts renders with names and parses back to the
// same flow.
func FuzzNamedRoundTrip(f *testing.F) {
	for _, c := range parseFlowCases {
		f.Add(c.line)
	}
	for _, s := range flowDumpSeeds {
		f.Add(s)
	}
	f.Add("table=14,priority=1,reg0=0x21/0x2f,reg5=0x1/0x3,reg3=0xa000001 actions=set_field:0x2/0xf->reg0,resubmit(,17),goto_table:19")
	n := testNames(f)
	f.Fuzz(func(t *testing.T, line string) {
		fl, err := of.ParseFlow(line)
		if err != nil {
			return
		}
		fl = of.CanonicalFlow(fl)
		named := of.FormatFlowNamed(&fl, n)
		back, err := of.ParseFlowNamed(named, n)
		if err != nil {
			t.Fatalf("%q renders as %q, which does not parse: %v", line, named, err)
		}
		back = of.CanonicalFlow(back)
		if a, b := of.FormatFlow(&fl), of.FormatFlow(&back); a != b {
			t.Fatalf("%q renders as %q, which parses back to %q, want %q", line, named, b, a)
		}
	})
}
