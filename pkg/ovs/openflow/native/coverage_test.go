package native

import (
	"net"
	"net/netip"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// coverageOps exercises every match field, action and op kind of the model that the golden
// files may not use.
func coverageOps() []of.Op {
	mac, _ := net.ParseMAC("0a:58:0a:0a:00:05")
	u8 := func(v uint8) *uint8 { return &v }
	v4 := netip.MustParseAddr("10.1.2.3")
	v6 := netip.MustParseAddr("fd00::5")
	flows := []of.Flow{
		{Table: 1, Priority: 10, Cookie: 0x77, IdleTimeout: 30, HardTimeout: 60,
			Match:   of.Match{InPort: of.PortLocal, EthType: of.EthTypeIP, IPProto: of.ProtoUDP, Src: netip.MustParsePrefix("10.0.0.0/8"), Dst: netip.MustParsePrefix("10.1.0.0/16"), TpSrc: 53, TpDst: 1053, Extra: &of.MatchExtra{EthSrc: mac, EthDst: mac}},
			Actions: []of.Action{of.Output{Port: 9}, of.Output{Port: of.PortLocal}, of.Normal{}, of.OutputInPort{}}},
		{Table: 2, Priority: 11, Match: of.Match{EthType: of.EthTypeIP, IPProto: of.ProtoICMP, Extra: &of.MatchExtra{ICMPType: u8(3), ICMPCode: u8(4)}},
			Actions: []of.Action{of.Controller{MaxLen: 128}, of.Controller{Reason: "no_match"}}},
		{Table: 2, Priority: 12, Match: of.Match{EthType: of.EthTypeIPv6, IPProto: of.ProtoICMPv6, Src: netip.MustParsePrefix("fe80::/10"), Dst: netip.PrefixFrom(v6, 128), Extra: &of.MatchExtra{ICMPType: u8(135), ICMPCode: u8(0)}},
			Actions: []of.Action{of.Controller{MaxLen: 200, UserData: []byte{1, 2, 3}, Pause: true}, of.Controller{Reason: "invalid_ttl", UserData: []byte{0xaa}}}},
		{Table: 3, Priority: 13, Match: of.Match{EthType: of.EthTypeARP, Extra: &of.MatchExtra{ARPOp: 1, ARPTPA: v4}}, Actions: []of.Action{of.Normal{}}},
		{Table: 3, Priority: 14, Match: of.Match{EthType: of.EthTypeARP}, Actions: []of.Action{of.Drop{}}},
		{Table: 4, Priority: 15, Match: of.Match{EthType: of.EthTypeIP, IPProto: of.ProtoSCTP, TpDst: 9, TpSrc: 8, PktMark: &of.Masked32{Value: 5}, CtMark: &of.Masked32{Value: 3},
			CtState: &of.CtState{Set: of.CtEst | of.CtRpl, Unset: of.CtInv | of.CtNew}},
			Actions: []of.Action{of.SetEthSrc{MAC: mac}, of.SetEthDst{MAC: mac}, of.GotoTable{Table: 9}}},
		{Table: 4, Priority: 16, Match: of.Match{EthType: of.EthTypeIPv6, IPProto: of.ProtoTCP, TpDst: 443, PktMark: &of.Masked32{Value: 0x10, Mask: 0xf0},
			CtState: &of.CtState{Set: of.CtTrk | of.CtSNAT | of.CtDNAT, Unset: of.CtNew | of.CtEst | of.CtRel | of.CtRpl | of.CtInv}},
			Actions: []of.Action{of.Move{Src: of.Subfield{Field: "NXM_NX_IPV6_SRC", Whole: true}, Dst: of.Subfield{Field: "NXM_NX_XXREG3", Whole: true}},
				of.Move{Src: of.Subfield{Field: "NXM_NX_REG3", Start: 0, End: 15}, Dst: of.Subfield{Field: "NXM_OF_TCP_DST", Whole: true}},
				of.Move{Src: of.Subfield{Field: "NXM_NX_REG3", Start: 5, End: 5}, Dst: of.Subfield{Field: "NXM_NX_REG0", Start: 9, End: 9}}}},
		{Table: 5, Priority: 17, Match: of.Match{Regs: []of.RegMatch{{Reg: 0, Value: 1}, {Reg: 1, Value: 2}, {Reg: 9, Value: 0x30, Mask: 0xf0}, {Reg: 15, Value: 7}}, Extra: &of.MatchExtra{XXRegs: []of.XXRegMatch{{XXReg: 3, Value: of.Uint128{Hi: 1, Lo: 2}}, {XXReg: 1, Value: of.Uint128{Lo: 0x80}, Mask: of.Uint128{Lo: 0xff}}}}},
			Actions: []of.Action{of.SetReg{Reg: 15, Value: 0xffffffff}, of.SetReg{Reg: 0, Value: 0x5, Mask: 0xff}, of.Resubmit{Table: 254}}},
		{Table: 6, Priority: 18, Match: of.Match{EthType: of.EthTypeIP},
			Actions: []of.Action{of.CT{Zone: 1, NAT: &of.NAT{Kind: of.NATSrc, Addr: v4}},
				of.CT{Commit: true, HasTable: true, Table: 0, NAT: &of.NAT{Kind: of.NATDst, Addr: v4, Port: 80}, Exec: []of.Action{of.SetCtMark{Value: 0xffffffff}}}, of.CT{}}},
		{Table: 6, Priority: 19, Match: of.Match{EthType: of.EthTypeIPv6},
			Actions: []of.Action{of.CT{Commit: true, Zone: 9, NAT: &of.NAT{Kind: of.NATDst, Addr: v6, Port: 80}},
				of.CT{HasTable: true, Table: 7, NAT: &of.NAT{Kind: of.NATSrc, Addr: v6}},
				of.CT{Commit: true, Zone: 9, NAT: &of.NAT{Kind: of.NATSrc, Addr: netip.IPv6Unspecified()}}}},
		{Table: 6, Priority: 20, Match: of.Match{EthType: of.EthTypeIP, IPProto: of.ProtoTCP, Src: netip.PrefixFrom(v4, 32), TpSrc: 0x8000, TpSrcMask: 0x8000, Extra: &of.MatchExtra{TCPFlags: &of.TCPFlags{Set: of.TCPSyn, Unset: of.TCPAck}}},
			Actions: []of.Action{of.CT{Commit: true, Zone: 9, NAT: &of.NAT{Kind: of.NATSrc, Addr: v4, Port: 1024, PortMax: 32767}}}},
		{Table: 6, Priority: 21, Match: of.Match{EthType: of.EthTypeIPv6, IPProto: of.ProtoTCP, TpSrcMask: 0xfc00, TpDst: 80, Extra: &of.MatchExtra{TCPFlags: &of.TCPFlags{Set: of.TCPFin | of.TCPRst | of.TCPPsh | of.TCPUrg | of.TCPEce | of.TCPCwr | of.TCPNs}}},
			Actions: []of.Action{of.CT{Commit: true, Zone: 9, NAT: &of.NAT{Kind: of.NATSrc, Addr: v6, Port: 32768, PortMax: 65535}}}},
		{Table: 6, Priority: 22, Match: of.Match{EthType: of.EthTypeIP, IPProto: of.ProtoUDP, TpSrc: 0x1234, TpSrcMask: 0xffff}, Actions: []of.Action{of.Drop{}}},
		{Table: 7, Priority: 19, Match: of.Match{EthType: of.EthTypeIPv6, IPProto: of.ProtoSCTP},
			Actions: []of.Action{of.Learn{Table: 8, Priority: 5, HardTimeout: 9, FinIdleTimeout: 2, FinHardTimeout: 3, Cookie: 0x42,
				EthType: of.EthTypeIPv6, IPProto: of.ProtoSCTP, Specs: []of.LearnSpec{
					{Kind: of.LearnMatch, Dst: of.Subfield{Field: "NXM_NX_IPV6_SRC", Whole: true}},
					{Kind: of.LearnMatch, Dst: of.Subfield{Field: "OXM_OF_SCTP_DST", Whole: true}},
					{Kind: of.LearnMatch, Dst: of.Subfield{Field: "NXM_NX_REG1", Start: 0, End: 7}, Src: of.Subfield{Field: "NXM_NX_REG2", Start: 8, End: 15}},
					{Kind: of.LearnMatchValue, Dst: of.Subfield{Field: "NXM_NX_REG5", Start: 0, End: 16}, Value: 0x1abcd},
					{Kind: of.LearnLoad, Src: of.Subfield{Field: "NXM_NX_IPV6_DST", Whole: true}, Dst: of.Subfield{Field: "NXM_NX_XXREG3", Whole: true}},
					{Kind: of.LearnLoadValue, Dst: of.Subfield{Field: "NXM_NX_REG6", Whole: true}, Value: 0xdeadbeef},
				}}}},
		{Table: 7, Priority: 20, Match: of.Match{EthType: of.EthTypeIP, IPProto: of.ProtoTCP},
			Actions: []of.Action{of.Learn{Table: 8, IdleTimeout: 10, Cookie: 0x43, DeleteLearned: true, Limit: 100,
				ResultDst: of.Subfield{Field: "NXM_NX_REG0", Start: 17, End: 17}, EthType: of.EthTypeIP, IPProto: of.ProtoTCP,
				Specs: []of.LearnSpec{{Kind: of.LearnMatch, Dst: of.Subfield{Field: "NXM_OF_IP_SRC", Whole: true}}}},
				of.Learn{Table: 8, Limit: 7, EthType: of.EthTypeIP, Specs: []of.LearnSpec{{Kind: of.LearnMatch, Dst: of.Subfield{Field: "NXM_OF_IP_DST", Whole: true}}}},
				of.Learn{Table: 8, ResultDst: of.Subfield{Field: "NXM_NX_REG9", Start: 31, End: 31}, EthType: of.EthTypeIP,
					Specs: []of.LearnSpec{{Kind: of.LearnMatch, Dst: of.Subfield{Field: "NXM_OF_IP_DST", Whole: true}}}}}},
		{Table: 8, Priority: 0},
		{Table: 9, Priority: 5, Match: of.Match{EthType: of.EthTypeIP, IPProto: of.ProtoTCP},
			Actions: []of.Action{of.MeterAction{ID: 7}, of.Controller{MaxLen: 128}}},
	}
	var ops []of.Op
	for i := range flows {
		ops = append(ops, of.Op{Kind: of.AddFlow, Flow: &flows[i]})
	}
	mod := flows[0]
	ops = append(ops,
		of.Op{Kind: of.ModifyFlowStrict, Flow: &mod},
		of.Op{Kind: of.DeleteFlowStrict, Flow: &flows[5]},
		of.Op{Kind: of.DeleteFlows, Flow: &of.Flow{Cookie: 0x1000, CookieMask: 0xff00}},
		of.Op{Kind: of.DeleteFlows, Flow: &of.Flow{Cookie: 0x55, Table: 4}, TableSet: true},
		of.Op{Kind: of.DeleteFlows, Flow: &of.Flow{}},
	)
	groups := []of.Group{
		{ID: 9, Type: of.GroupTypeSelect, HashFields: []string{"ipv6_src", "ipv6_dst", "sctp_src", "sctp_dst"}, Buckets: []of.Bucket{
			{ID: 0, Weight: 1, Actions: []of.Action{of.Output{Port: 1}}}, {ID: 3, Weight: 0, Actions: []of.Action{of.Drop{}}}}},
		{ID: 10, Type: of.GroupTypeSelect, HashFields: []string{"ip_src", "ip_dst", "udp_src", "udp_dst"}, SelectionParam: 77, Buckets: []of.Bucket{
			{ID: 1, Weight: 65535, Actions: []of.Action{of.SetReg{Reg: 3, Value: 1}, of.Resubmit{Table: 17}}}}},
		{ID: 11, Type: of.GroupTypeSelect, SelectionMethod: "dp_hash", Buckets: []of.Bucket{{ID: 0, Weight: 5, Actions: []of.Action{of.Normal{}}}}},
		{ID: 12, Type: of.GroupTypeSelect},
	}
	for i := range groups {
		ops = append(ops, of.Op{Kind: of.AddGroup, Group: &groups[i]}, of.Op{Kind: of.ModifyGroup, Group: &groups[i]})
	}
	ops = append(ops, of.Op{Kind: of.DeleteGroup, Group: &of.Group{ID: 12}})
	return ops
}
