package oftrace

import (
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

var (
	clientIP = netip.MustParseAddr("10.0.0.1")
	vipIP    = netip.MustParseAddr("10.96.0.10")
	ep1IP    = netip.MustParseAddr("10.0.1.5")
	ep2IP    = netip.MustParseAddr("10.0.1.6")
)

func host(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, a.BitLen()) }

func tcp(in uint32, src netip.Addr, sport uint16, dst netip.Addr, dport uint16) Packet {
	return Packet{InPort: in, EthType: of.EthTypeIP, Proto: of.ProtoTCP, Src: src, Dst: dst, SrcPort: sport, DstPort: dport}
}

func mustTracer(t *testing.T, flows []of.Flow, groups []of.Group, opts Options) *Tracer {
	t.Helper()
	tr, err := New(flows, groups, opts)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func mustTrace(t *testing.T, tr *Tracer, p Packet, ct *Conntrack) *Trace {
	t.Helper()
	res, err := tr.Trace(p, ct)
	if err != nil {
		t.Fatalf("trace %v: %v", p, err)
	}
	return res
}

func single(t *testing.T, res *Trace) Outcome {
	t.Helper()
	o, ok := res.Single()
	if !ok {
		t.Fatalf("want one outcome, got:\n%s", res)
	}
	return o
}

func TestPriorityMissAndDrop(t *testing.T) {
	flows := []of.Flow{
		{Table: 0, Priority: 100, Match: of.Match{EthType: of.EthTypeIP, Dst: netip.MustParsePrefix("10.96.0.0/16")}, Actions: []of.Action{of.Output{Port: 7}}},
		{Table: 0, Priority: 200, Match: of.Match{EthType: of.EthTypeIP, IPProto: of.ProtoTCP, TpDst: 80}, Actions: []of.Action{of.Output{Port: 8}}},
		{Table: 0, Priority: 300, Match: of.Match{InPort: 9}, Actions: []of.Action{of.Drop{}}},
	}
	tr := mustTracer(t, flows, nil, Options{})
	if o := single(t, mustTrace(t, tr, tcp(1, clientIP, 1000, vipIP, 80), nil)); o.Kind != Output || o.Port != 8 {
		t.Errorf("tcp/80: want output:8 (priority 200), got %v", o)
	}
	if o := single(t, mustTrace(t, tr, tcp(1, clientIP, 1000, vipIP, 81), nil)); o.Kind != Output || o.Port != 7 {
		t.Errorf("tcp/81: want output:7, got %v", o)
	}
	if o := single(t, mustTrace(t, tr, tcp(9, clientIP, 1000, vipIP, 80), nil)); o.Kind != Dropped || o.Reason != "drop" || o.Table != 0 {
		t.Errorf("in_port 9: want dropped by a drop action in table 0, got %v", o)
	}
	if o := single(t, mustTrace(t, tr, tcp(1, clientIP, 1000, ep1IP, 81), nil)); o.Kind != Dropped || o.Reason != "table miss" {
		t.Errorf("no flow: want a table miss, got %v", o)
	}
}

func TestAmbiguousEqualPriority(t *testing.T) {
	flows := []of.Flow{
		{Table: 0, Priority: 100, Match: of.Match{EthType: of.EthTypeIP, IPProto: of.ProtoTCP}, Actions: []of.Action{of.Output{Port: 7}}},
		{Table: 0, Priority: 100, Match: of.Match{EthType: of.EthTypeIP, Dst: host(vipIP)}, Actions: []of.Action{of.Output{Port: 8}}},
	}
	tr := mustTracer(t, flows, nil, Options{})
	if _, err := tr.Trace(tcp(1, clientIP, 1000, vipIP, 80), nil); !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("want ErrAmbiguous, got %v", err)
	}
	// A packet only one of them matches is fine.
	if o := single(t, mustTrace(t, tr, tcp(1, clientIP, 1000, ep1IP, 80), nil)); o.Port != 7 {
		t.Errorf("want output:7, got %v", o)
	}
}

// TestResubmitGotoRegisters: a resubmit returns (also from a drop flow), goto_table does not,
// registers are set under masks, moved and matched.
func TestResubmitGotoRegisters(t *testing.T) {
	flows := []of.Flow{
		{Table: 0, Priority: 0, Actions: []of.Action{
			of.SetReg{Reg: 0, Value: 0x20, Mask: 0xf0}, of.Resubmit{Table: 3}, of.Resubmit{Table: 4}, of.GotoTable{Table: 5}}},
		{Table: 3, Priority: 0, Actions: []of.Action{of.Drop{}}},
		{Table: 4, Priority: 0, Actions: []of.Action{of.SetReg{Reg: 1, Value: 0xdead}, of.Move{
			Src: of.Subfield{Field: "NXM_NX_REG1", Start: 0, End: 15}, Dst: of.Subfield{Field: "NXM_NX_REG2", Start: 16, End: 31}}}},
		{Table: 5, Priority: 10, Match: of.Match{Regs: []of.RegMatch{{Reg: 0, Value: 0x20, Mask: 0xf0}, {Reg: 2, Value: 0xdead0000}}},
			Actions: []of.Action{of.SetEthDst{MAC: net.HardwareAddr{2, 0, 0, 0, 0, 9}}, of.Output{Port: 3}}},
		{Table: 5, Priority: 0, Actions: []of.Action{of.Output{Port: 4}}},
	}
	tr := mustTracer(t, flows, nil, Options{})
	p := tcp(1, clientIP, 1000, vipIP, 80)
	p.Regs[0] = 0x103
	res := mustTrace(t, tr, p, nil)
	o := single(t, res)
	if o.Kind != Output || o.Port != 3 || o.Packet.Regs[0] != 0x123 || o.Packet.EthDst.String() != "02:00:00:00:00:09" {
		t.Fatalf("want output:3 with reg0=0x123 and the new eth_dst, got %v regs=%x\n%s", o, o.Packet.Regs[:3], res)
	}
}

func TestOutputToInPortIsSkipped(t *testing.T) {
	flows := []of.Flow{{Table: 0, Priority: 0, Actions: []of.Action{of.Output{Port: 2}}}}
	tr := mustTracer(t, flows, nil, Options{})
	if o := single(t, mustTrace(t, tr, tcp(2, clientIP, 1000, vipIP, 80), nil)); o.Kind != Dropped || !strings.Contains(o.Reason, "in_port") {
		t.Errorf("want dropped (output to in_port skipped), got %v", o)
	}
	flows = []of.Flow{{Table: 0, Priority: 0, Actions: []of.Action{of.OutputInPort{}}}}
	tr = mustTracer(t, flows, nil, Options{})
	if o := single(t, mustTrace(t, tr, tcp(2, clientIP, 1000, vipIP, 80), nil)); o.Kind != Output || o.Port != 2 {
		t.Errorf("IN_PORT: want output:2, got %v", o)
	}
}

func TestControllerAndNormal(t *testing.T) {
	flows := []of.Flow{
		{Table: 0, Priority: 10, Match: of.Match{EthType: of.EthTypeARP}, Actions: []of.Action{of.Normal{}}},
		{Table: 0, Priority: 0, Actions: []of.Action{of.Controller{MaxLen: 128}}},
	}
	tr := mustTracer(t, flows, nil, Options{})
	if o := single(t, mustTrace(t, tr, tcp(1, clientIP, 1000, vipIP, 80), nil)); o.Kind != Controller || o.Controller.MaxLen != 128 {
		t.Errorf("want controller, got %v", o)
	}
	arp := Packet{InPort: 1, EthType: of.EthTypeARP, ARPOp: 1, ARPSPA: clientIP, ARPTPA: vipIP}
	if o := single(t, mustTrace(t, tr, arp, nil)); o.Kind != Normal {
		t.Errorf("ARP: want NORMAL, got %v", o)
	}
}

// lbPipeline is a one-Service load balancer: table 0 looks the packet up (un-NATing replies),
// table 1 sends new connections to the VIP to group 1, whose buckets DNAT in table 2.
func lbPipeline() ([]of.Flow, []of.Group) {
	ct := func(commit bool, nat *of.NAT, table uint8, exec ...of.Action) of.CT {
		return of.CT{Commit: commit, Zone: 7, NAT: nat, Table: table, HasTable: true, Exec: exec}
	}
	flows := []of.Flow{
		{Table: 0, Priority: 10, Match: of.Match{EthType: of.EthTypeIP}, Actions: []of.Action{ct(false, &of.NAT{Kind: of.NATReply}, 1)}},
		{Table: 1, Priority: 20, Match: of.Match{EthType: of.EthTypeIP, IPProto: of.ProtoTCP, Dst: host(vipIP), TpDst: 80,
			CtState: &of.CtState{Set: of.CtNew | of.CtTrk}}, Actions: []of.Action{of.GroupAction{ID: 1}}},
		{Table: 1, Priority: 10, Match: of.Match{CtState: &of.CtState{Set: of.CtInv | of.CtTrk}}, Actions: []of.Action{of.Drop{}}},
		{Table: 1, Priority: 0, Actions: []of.Action{of.GotoTable{Table: 3}}},
		{Table: 3, Priority: 0, Actions: []of.Action{of.Output{Port: 9}}},
	}
	var g of.Group
	g.ID, g.Type = 1, of.GroupTypeSelect
	g.HashFields = []string{"ip_src", "ip_dst", "tcp_src", "tcp_dst"}
	for i, ip := range []netip.Addr{ep1IP, ep2IP} {
		flows = append(flows, of.Flow{Table: 2, Priority: 10, Match: of.Match{EthType: of.EthTypeIP, Regs: []of.RegMatch{{Reg: 3, Value: uint32(i + 1)}}},
			Actions: []of.Action{ct(true, &of.NAT{Kind: of.NATDst, Addr: ip, Port: 8080}, 3, of.SetCtMark{Value: 1, Mask: 1})}})
		g.Buckets = append(g.Buckets, of.Bucket{ID: uint32(i), Weight: 100,
			Actions: []of.Action{of.SetReg{Reg: 3, Value: uint32(i + 1)}, of.Resubmit{Table: 2}}})
	}
	return flows, []of.Group{g}
}

func TestGroupBucketChoice(t *testing.T) {
	flows, groups := lbPipeline()
	p := tcp(1, clientIP, 1000, vipIP, 80)
	for i, want := range []netip.Addr{ep1IP, ep2IP} {
		tr := mustTracer(t, flows, groups, Options{SelectBucket: FixedBucket(i)})
		o := single(t, mustTrace(t, tr, p, nil))
		if o.Kind != Output || o.Packet.Dst != want || o.Packet.DstPort != 8080 {
			t.Errorf("bucket %d: want DNAT to %s:8080, got %v", i, want, o)
		}
	}
	tr := mustTracer(t, flows, groups, Options{})
	a, b := single(t, mustTrace(t, tr, p, nil)), single(t, mustTrace(t, tr, p, nil))
	if a.Packet.Dst != b.Packet.Dst {
		t.Errorf("HashBucket is not deterministic: %v vs %v", a, b)
	}
	ct := NewConntrack()
	all, err := tr.TraceAll(p, ct)
	if err != nil {
		t.Fatal(err)
	}
	got := map[netip.Addr]bool{}
	for _, res := range all {
		got[single(t, res).Packet.Dst] = true
		if len(res.Conntrack.Conns()) != 1 {
			t.Errorf("each path commits one connection on its own copy, got %v", res.Conntrack.Conns())
		}
	}
	if len(all) != 2 || !got[ep1IP] || !got[ep2IP] || len(ct.Conns()) != 0 {
		t.Errorf("TraceAll: want both endpoints and the caller's conntrack untouched, got %v, %d conns", got, len(ct.Conns()))
	}
	// A weight-0 bucket is never taken.
	groups[0].Buckets[0].Weight = 0
	tr = mustTracer(t, flows, groups, Options{})
	if all, err = tr.TraceAll(p, nil); err != nil || len(all) != 1 || single(t, all[0]).Packet.Dst != ep2IP {
		t.Errorf("weight 0: want only %s, got %d traces, err %v", ep2IP, len(all), err)
	}
}

// TestConntrackInBucket: a bucket whose ct action commits, DNATs and marks the connection
// itself (the pipeline's buckets without session affinity) continues in the ct action's table
// with the packet as conntrack left it, and the connection's reply is un-DNATed.
func TestConntrackInBucket(t *testing.T) {
	flows, groups := lbPipeline()
	for i, ip := range []netip.Addr{ep1IP, ep2IP} {
		groups[0].Buckets[i].Actions = []of.Action{of.CT{Commit: true, Zone: 7, Table: 3, HasTable: true,
			NAT: &of.NAT{Kind: of.NATDst, Addr: ip, Port: 8080}, Exec: []of.Action{of.SetCtMark{Value: 1, Mask: 1}}}}
	}
	flows = slices.DeleteFunc(flows, func(f of.Flow) bool { return f.Table == 2 })
	for i, want := range []netip.Addr{ep1IP, ep2IP} {
		tr := mustTracer(t, flows, groups, Options{SelectBucket: FixedBucket(i)})
		ct := NewConntrack()
		res := mustTrace(t, tr, tcp(1, clientIP, 1000, vipIP, 80), ct)
		o := single(t, res)
		if o.Kind != Output || o.Port != 9 || o.Packet.Dst != want || o.Packet.DstPort != 8080 ||
			o.Packet.CtState != of.CtNew|of.CtTrk|of.CtDNAT || o.Packet.CtMark != 1 || o.Table != 3 {
			t.Fatalf("bucket %d: want output:9 DNATed to %s:8080 in table 3, +new+trk+dnat, ct_mark 1; got %v\n%s", i, want, o, res)
		}
		if len(res.Buckets) != 1 || res.Buckets[0] != i || len(ct.Conns()) != 1 {
			t.Fatalf("bucket %d: want the bucket taken and one connection committed, got buckets %v, conns %v", i, res.Buckets, ct.Conns())
		}
		r := single(t, mustTrace(t, tr, tcp(9, want, 8080, clientIP, 1000), ct))
		if r.Packet.Src != vipIP || r.Packet.SrcPort != 80 || r.Packet.CtState&of.CtRpl == 0 {
			t.Fatalf("bucket %d: reply: want source %s:80, +rpl; got %v", i, vipIP, r)
		}
	}
}

// TestConntrackConnection follows one connection: new and DNATed, +new again before a reply
// (as OVS and Linux conntrack report it), the reply un-DNATed with +est+rpl, then +est.
func TestConntrackConnection(t *testing.T) {
	flows, groups := lbPipeline()
	tr := mustTracer(t, flows, groups, Options{SelectBucket: FixedBucket(1)})
	ct := NewConntrack()
	p := tcp(1, clientIP, 1000, vipIP, 80)
	o := single(t, mustTrace(t, tr, p, ct))
	if o.Packet.Dst != ep2IP || o.Packet.CtState != of.CtNew|of.CtTrk|of.CtDNAT || o.Packet.CtMark != 1 {
		t.Fatalf("first packet: want DNAT to %s, +new+trk+dnat, ct_mark 1; got %v", ep2IP, o)
	}
	// Before any reply the next packet is still +new, but table 0's nat already DNATs it, so it
	// misses the VIP flow and is forwarded as it is.
	res := mustTrace(t, tr, p, ct)
	if o := single(t, res); o.Packet.Dst != ep2IP || o.Packet.CtState&of.CtNew == 0 || len(res.Buckets) != 0 {
		t.Fatalf("second packet: want +new, DNATed by the lookup, no group; got %v\n%s", o, res)
	}
	reply := tcp(9, ep2IP, 8080, clientIP, 1000)
	o = single(t, mustTrace(t, tr, reply, ct))
	if o.Packet.Src != vipIP || o.Packet.SrcPort != 80 || o.Packet.CtState != of.CtEst|of.CtRpl|of.CtTrk|of.CtSNAT {
		t.Fatalf("reply: want source %s:80, +est+rpl+trk; got %v", vipIP, o)
	}
	o = single(t, mustTrace(t, tr, p, ct))
	if o.Packet.Dst != ep2IP || o.Packet.CtState != of.CtEst|of.CtTrk|of.CtDNAT {
		t.Fatalf("after the reply: want +est and DNAT; got %v", o)
	}
	conns := ct.Conns()
	if len(conns) != 1 || !conns[0].SeenReply || conns[0].Reply.Src != ep2IP {
		t.Fatalf("conntrack: %+v", conns)
	}
	if n := ct.Flush(7, of.CtTuple{Dst: vipIP}, of.CtTuple{}); n != 1 || len(ct.Conns()) != 0 {
		t.Fatalf("flush: deleted %d, left %v", n, ct.Conns())
	}
}

func TestConntrackInvalidICMP(t *testing.T) {
	flows, groups := lbPipeline()
	ns := Packet{InPort: 1, EthType: of.EthTypeIPv6, Proto: of.ProtoICMPv6, ICMPType: 135,
		Src: netip.MustParseAddr("fe80::1"), Dst: netip.MustParseAddr("ff02::1:ff00:1")}
	flows[0].Match.EthType = of.EthTypeAny
	tr := mustTracer(t, flows, groups, Options{})
	o := single(t, mustTrace(t, tr, ns, nil))
	if o.Kind != Dropped || o.Packet.CtState != of.CtInv|of.CtTrk {
		t.Errorf("neighbour solicitation: want +inv+trk and dropped, got %v", o)
	}
	errICMP := Packet{InPort: 1, EthType: of.EthTypeIP, Proto: of.ProtoICMP, ICMPType: 3, Src: ep1IP, Dst: clientIP}
	if _, err := tr.Trace(errICMP, nil); !errors.Is(err, ErrUnsupported) {
		t.Errorf("ICMP error through ct: want ErrUnsupported, got %v", err)
	}
}

func TestSNATAndReply(t *testing.T) {
	gw := netip.MustParseAddr("169.254.0.253")
	flows := []of.Flow{
		{Table: 0, Priority: 10, Match: of.Match{EthType: of.EthTypeIP}, Actions: []of.Action{
			of.CT{Zone: 3, NAT: &of.NAT{Kind: of.NATReply}, Table: 1, HasTable: true}}},
		{Table: 1, Priority: 10, Match: of.Match{EthType: of.EthTypeIP, CtState: &of.CtState{Set: of.CtNew | of.CtTrk}}, Actions: []of.Action{
			of.CT{Commit: true, Zone: 3, NAT: &of.NAT{Kind: of.NATSrc, Addr: gw}, Table: 2, HasTable: true}}},
		{Table: 1, Priority: 0, Actions: []of.Action{of.GotoTable{Table: 2}}},
		{Table: 2, Priority: 10, Match: of.Match{EthType: of.EthTypeIP, Dst: host(clientIP)}, Actions: []of.Action{of.Output{Port: 1}}},
		{Table: 2, Priority: 0, Actions: []of.Action{of.Output{Port: 9}}},
	}
	tr := mustTracer(t, flows, nil, Options{})
	ct := NewConntrack()
	o := single(t, mustTrace(t, tr, tcp(1, clientIP, 1000, ep1IP, 8080), ct))
	if o.Port != 9 || o.Packet.Src != gw || o.Packet.SrcPort != 1000 || o.Packet.CtState&of.CtSNAT == 0 {
		t.Fatalf("want SNAT to %s keeping the port, got %v", gw, o)
	}
	o = single(t, mustTrace(t, tr, tcp(9, ep1IP, 8080, gw, 1000), ct))
	if o.Port != 1 || o.Packet.Dst != clientIP || o.Packet.DstPort != 1000 {
		t.Fatalf("reply: want un-SNAT to %s:1000, got %v", clientIP, o)
	}
}

func TestLearn(t *testing.T) {
	learn := of.Learn{Table: 5, Priority: 10, IdleTimeout: 30, EthType: of.EthTypeIP, IPProto: of.ProtoTCP, Specs: []of.LearnSpec{
		{Kind: of.LearnMatch, Dst: of.Subfield{Field: "NXM_OF_IP_SRC", Whole: true}},
		{Kind: of.LearnMatch, Dst: of.Subfield{Field: "NXM_OF_TCP_DST", Whole: true}},
		{Kind: of.LearnLoad, Src: of.Subfield{Field: "NXM_NX_REG3", Whole: true}, Dst: of.Subfield{Field: "NXM_NX_REG3", Whole: true}},
		{Kind: of.LearnLoad, Src: of.Subfield{Field: "NXM_NX_REG4", End: 16}, Dst: of.Subfield{Field: "NXM_NX_REG4", End: 16}},
	}}
	flows := []of.Flow{
		{Table: 0, Priority: 0, Actions: []of.Action{of.Resubmit{Table: 5}, of.GotoTable{Table: 6}}},
		{Table: 5, Priority: 0, Actions: []of.Action{of.Drop{}}},
		{Table: 6, Priority: 10, Match: of.Match{Regs: []of.RegMatch{{Reg: 4, Value: 1 << 16, Mask: 1 << 16}}}, Actions: []of.Action{of.Output{Port: 3}}},
		{Table: 6, Priority: 0, Actions: []of.Action{of.SetReg{Reg: 3, Value: 0x0a000105}, of.SetReg{Reg: 4, Value: 0x11f90, Mask: 0x1ffff}, learn, of.Output{Port: 4}}},
	}
	tr := mustTracer(t, flows, nil, Options{InstallLearned: true})
	p := tcp(1, clientIP, 1000, vipIP, 80)
	res := mustTrace(t, tr, p, nil)
	if o := single(t, res); o.Port != 4 || len(res.Learned) != 1 {
		t.Fatalf("first: want output:4 and one learned flow, got %v\n%s", o, res)
	}
	want := "table=5, priority=10, idle_timeout=30, tcp,nw_src=10.0.0.1,tp_dst=80 actions=set_field:0xa000105->reg3,set_field:0x11f90/0x1ffff->reg4"
	if got := of.FormatFlow(&res.Learned[0]); !strings.Contains(strings.ReplaceAll(got, " ", ""), strings.ReplaceAll(want, " ", "")) {
		t.Errorf("learned flow:\n got %s\nwant %s", got, want)
	}
	p.SrcPort = 2000
	res = mustTrace(t, tr, p, nil)
	if o := single(t, res); o.Port != 3 || o.Packet.Regs[3] != 0x0a000105 {
		t.Fatalf("second: want the learned flow to load the endpoint (output:3), got %v\n%s", o, res)
	}
}

func TestUnsupportedAndInvalid(t *testing.T) {
	cases := []struct {
		name    string
		actions []of.Action
	}{
		{"ct nat without table", []of.Action{of.CT{Commit: true, NAT: &of.NAT{Kind: of.NATDst, Addr: ep1IP}}}},
		{"move to ct_mark", []of.Action{of.Move{Src: of.Subfield{Field: "NXM_NX_REG0", Whole: true}, Dst: of.Subfield{Field: "NXM_NX_CT_MARK", Whole: true}}}},
		{"unknown field", []of.Action{of.Move{Src: of.Subfield{Field: "NXM_NX_TUN_ID", Whole: true}, Dst: of.Subfield{Field: "NXM_NX_REG0", Whole: true}}}},
		{"controller pause", []of.Action{of.Controller{Pause: true}}},
	}
	for _, tc := range cases {
		tr := mustTracer(t, []of.Flow{{Table: 0, Actions: tc.actions}}, nil, Options{})
		if _, err := tr.Trace(tcp(1, clientIP, 1000, vipIP, 80), nil); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: want ErrUnsupported, got %v", tc.name, err)
		}
	}
	tr := mustTracer(t, []of.Flow{{Table: 0, Actions: []of.Action{of.GroupAction{ID: 5}}}}, nil, Options{})
	if _, err := tr.Trace(tcp(1, clientIP, 1000, vipIP, 80), nil); err == nil || !strings.Contains(err.Error(), "group 5 does not exist") {
		t.Errorf("missing group: got %v", err)
	}
	loop := []of.Flow{{Table: 0, Actions: []of.Action{of.Resubmit{Table: 0}}}}
	if _, err := mustTracer(t, loop, nil, Options{}).Trace(tcp(1, clientIP, 1000, vipIP, 80), nil); err == nil {
		t.Error("resubmit loop: want an error")
	}
	if _, err := tr.Trace(Packet{EthType: of.EthTypeIP, Proto: of.ProtoTCP, Src: clientIP}, nil); err == nil {
		t.Error("packet without Dst: want an error")
	}
}

// TestConntrackKeepsAssociationAfterNAT: a commit in the same zone after NAT applies to the
// NATed connection (the datapath keeps the packet's connection), rather than to a new one; a
// second packet before any reply is +new unless EstablishedBeforeReply (non-TCP only).
func TestConntrackKeepsAssociationAfterNAT(t *testing.T) {
	ct := func(commit bool, nat *of.NAT, table uint8, exec ...of.Action) of.CT {
		return of.CT{Commit: commit, Zone: 1, NAT: nat, Table: table, HasTable: true, Exec: exec}
	}
	flows := []of.Flow{
		{Table: 0, Priority: 0, Match: of.Match{EthType: of.EthTypeIP}, Actions: []of.Action{ct(false, &of.NAT{Kind: of.NATReply}, 1)}},
		{Table: 1, Priority: 10, Match: of.Match{EthType: of.EthTypeIP, Dst: host(vipIP), CtState: &of.CtState{Set: of.CtNew | of.CtTrk}},
			Actions: []of.Action{ct(true, &of.NAT{Kind: of.NATDst, Addr: ep1IP}, 2)}},
		{Table: 1, Priority: 0, Actions: []of.Action{of.GotoTable{Table: 2}}},
		{Table: 2, Priority: 0, Match: of.Match{EthType: of.EthTypeIP}, Actions: []of.Action{ct(true, nil, 3, of.SetCtMark{Value: 4})}},
		{Table: 3, Priority: 0, Actions: []of.Action{of.Output{Port: 9}}},
	}
	tr := mustTracer(t, flows, nil, Options{})
	for _, est := range []bool{false, true} {
		conns := NewConntrack()
		conns.EstablishedBeforeReply = est
		p := Packet{InPort: 1, EthType: of.EthTypeIP, Proto: of.ProtoUDP, Src: clientIP, Dst: vipIP, SrcPort: 1000, DstPort: 53}
		if o := single(t, mustTrace(t, tr, p, conns)); o.Packet.Dst != ep1IP || o.Packet.CtMark != 4 || len(conns.Conns()) != 1 {
			t.Fatalf("want one connection, DNATed and marked by the second commit; got %v, %+v", o, conns.Conns())
		}
		o := single(t, mustTrace(t, tr, p, conns))
		wantState := of.CtNew | of.CtTrk
		if est {
			wantState = of.CtEst | of.CtTrk
		}
		if o.Packet.Dst != ep1IP || o.Packet.CtState&^(of.CtDNAT|of.CtSNAT) != wantState {
			t.Errorf("EstablishedBeforeReply=%v: second packet: want %s, got %v", est, of.FormatCtState(of.CtState{Set: wantState}), o)
		}
	}
}
