package openflow_test

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/test/ovssandbox"
)

// ovsCorpusFlows covers every flow shape the model renders: every match field (IPv4 and
// IPv6) and every action, including learn with every spec kind, ct nat src/dst/reply with and
// without ports, exec set ct_mark, masked and unmasked set_field, move, output, IN_PORT,
// NORMAL, drop, controller with options, goto_table, resubmit and group. Every flow is valid
// to OVS (prerequisites are met), and (table, priority, match) is unique. Some flows are
// deliberately not in canonical form (xxreg matches, host bits in prefixes, all-ones masks)
// so that the test also checks CanonicalFlow against what OVS really prints.
func ovsCorpusFlows() []of.Flow {
	ip, ip6 := of.EthTypeIP, of.EthTypeIPv6
	pfx := netip.MustParsePrefix
	addr := netip.MustParseAddr
	bigLearn := of.Learn{Table: 7, IdleTimeout: 60, HardTimeout: 30, FinIdleTimeout: 5, FinHardTimeout: 6,
		Priority: 200, DeleteLearned: true, Cookie: 5, EthType: ip, IPProto: of.ProtoTCP, Specs: []of.LearnSpec{
			{Kind: of.LearnMatch, Dst: whole("NXM_OF_TCP_DST")},
			{Kind: of.LearnMatch, Dst: bitsOf("NXM_NX_REG0", 0, 15), Src: whole("NXM_OF_TCP_SRC")},
			{Kind: of.LearnMatch, Dst: whole("NXM_OF_IP_DST"), Src: whole("NXM_OF_IP_SRC")},
			{Kind: of.LearnMatchValue, Dst: whole("NXM_OF_IP_SRC"), Value: 0x0a000001},
			{Kind: of.LearnMatchValue, Dst: whole("NXM_OF_TCP_SRC"), Value: 80},
			{Kind: of.LearnMatchValue, Dst: whole("NXM_OF_ETH_DST"), Value: 0x00aabbccddee},
			{Kind: of.LearnMatchValue, Dst: reg(5), Value: 0x1234},
			{Kind: of.LearnMatchValue, Dst: bitsOf("NXM_NX_REG1", 3, 3), Value: 1},
			{Kind: of.LearnMatchValue, Dst: whole("NXM_NX_CT_MARK"), Value: 0},
			{Kind: of.LearnLoad, Src: reg(3), Dst: reg(3)},
			{Kind: of.LearnLoad, Src: bitsOf("NXM_OF_IP_SRC", 0, 15), Dst: bitsOf("NXM_NX_REG6", 16, 31)},
			{Kind: of.LearnLoadValue, Dst: bitsOf("NXM_NX_REG0", 19, 19), Value: 1},
			{Kind: of.LearnLoadValue, Dst: bitsOf("NXM_NX_REG4", 0, 15), Value: 0xffff},
			{Kind: of.LearnLoadValue, Dst: reg(2), Value: 0},
		}}
	return []of.Flow{
		{Table: 0, Priority: 200, Cookie: 0x1, Match: of.Match{
			CtState: &of.CtState{Set: of.CtNew | of.CtTrk, Unset: of.CtEst}, CtMark: &of.Masked32{Value: 2, Mask: 2},
			EthType: ip, IPProto: of.ProtoTCP, Regs: []of.RegMatch{{Reg: 0, Value: 1, Mask: 0xf}}, Dst: pfx("10.96.0.1/32"), TpDst: 80,
		}, Actions: []of.Action{of.GroupAction{ID: 1}}},
		{Table: 1, Priority: 180, Match: of.Match{
			PktMark: &of.Masked32{Value: 3, Mask: 0xff}, EthType: ip, IPProto: of.ProtoUDP,
			Regs: []of.RegMatch{{Reg: 7, Value: 1, Mask: 0xff}}, InPort: 3, Src: pfx("10.0.0.0/24"), TpSrc: 53, Extra: &of.MatchExtra{EthSrc: mac("aa:bb:cc:dd:ee:01")},
		}, Actions: []of.Action{of.Output{Port: 3}, of.OutputInPort{}, of.Normal{},
			of.Controller{Reason: "no_match", MaxLen: 128, UserData: []byte{1, 2}}}},
		{Table: 1, Priority: 170, Match: of.Match{EthType: ip, IPProto: of.ProtoTCP},
			Actions: []of.Action{bigLearn, of.Resubmit{Table: 8}}},
		{Table: 1, Priority: 169, Match: of.Match{EthType: of.EthTypeARP, Extra: &of.MatchExtra{ARPOp: 1}}, Actions: []of.Action{of.Learn{
			Table: 9, Priority: 32768, EthType: of.EthTypeARP, Specs: []of.LearnSpec{
				{Kind: of.LearnMatchValue, Dst: whole("NXM_OF_ARP_TPA"), Value: 0x0a000009},
				{Kind: of.LearnMatch, Dst: whole("NXM_OF_ETH_SRC")},
				{Kind: of.LearnMatchValue, Dst: whole("NXM_OF_IN_PORT"), Value: 4},
			}}}},
		{Table: 1, Priority: 167, Match: of.Match{EthType: ip, IPProto: of.ProtoUDP}, Actions: []of.Action{of.Learn{
			Table: 9, IdleTimeout: 10, Cookie: 0x77, Limit: 64, ResultDst: bitsOf("NXM_NX_REG0", 17, 17), EthType: ip, IPProto: of.ProtoUDP,
			Specs: []of.LearnSpec{{Kind: of.LearnMatch, Dst: whole("NXM_OF_IP_SRC")}}},
			of.Learn{Table: 9, Limit: 3, EthType: ip, Specs: []of.LearnSpec{{Kind: of.LearnMatch, Dst: whole("NXM_OF_IP_DST")}}}}},
		{Table: 1, Priority: 166, Match: of.Match{EthType: ip, IPProto: of.ProtoSCTP},
			Actions: []of.Action{of.MeterAction{ID: 3}, of.Controller{MaxLen: 128}}},
		{Table: 1, Priority: 168, Match: of.Match{EthType: ip6, IPProto: of.ProtoTCP}, Actions: []of.Action{of.Learn{
			Table: 9, Priority: 0, EthType: ip6, IPProto: of.ProtoTCP, Specs: []of.LearnSpec{
				{Kind: of.LearnMatch, Dst: whole("NXM_NX_IPV6_SRC"), Src: whole("NXM_NX_IPV6_SRC")},
				{Kind: of.LearnMatch, Dst: bitsOf("NXM_NX_IPV6_DST", 0, 63), Src: bitsOf("NXM_NX_XXREG0", 64, 127)},
				{Kind: of.LearnLoad, Src: whole("NXM_NX_IPV6_DST"), Dst: whole("NXM_NX_XXREG1")},
				{Kind: of.LearnLoad, Src: bitsOf("NXM_NX_REG2", 0, 31), Dst: bitsOf("NXM_NX_REG3", 0, 31)},
			}}}},
		{Table: 3, Priority: 5, Match: of.Match{EthType: ip}, Actions: []of.Action{
			of.CT{Commit: true, Zone: 65521, NAT: &of.NAT{Kind: of.NATSrc, Addr: addr("10.0.0.254")}}, of.Controller{}}},
		{Table: 0, Priority: 190, Match: of.Match{EthType: ip, Dst: pfx("10.96.0.0/16")},
			Actions: []of.Action{of.CT{HasTable: true, Table: 1, Zone: 65520, NAT: &of.NAT{Kind: of.NATReply}}}},
		{Table: 2, Priority: 100, Match: of.Match{EthType: ip, IPProto: of.ProtoTCP, Dst: pfx("10.96.0.10/32"), TpDst: 443},
			Actions: []of.Action{of.CT{Commit: true, HasTable: true, Table: 6, Zone: 65520,
				NAT:  &of.NAT{Kind: of.NATDst, Addr: addr("10.0.0.2"), Port: 8080},
				Exec: []of.Action{of.SetCtMark{Value: 1, Mask: 1}}}}},
		{Table: 2, Priority: 99, Match: of.Match{EthType: ip, IPProto: of.ProtoTCP, Dst: pfx("10.96.0.11/32")},
			Actions: []of.Action{of.CT{Commit: true, HasTable: true, Table: 0, Zone: 65520,
				NAT: &of.NAT{Kind: of.NATDst, Addr: addr("10.0.0.3")}}}},
		{Table: 2, Priority: 98, Match: of.Match{EthType: ip, IPProto: of.ProtoUDP, Src: pfx("10.0.0.0/8")},
			Actions: []of.Action{of.CT{Commit: true, Zone: 65521, NAT: &of.NAT{Kind: of.NATSrc, Addr: addr("192.168.1.1"), Port: 3000}}}},
		{Table: 2, Priority: 97, Match: of.Match{EthType: ip6, IPProto: of.ProtoTCP, Dst: pfx("fd00::1/128"), TpDst: 80},
			Actions: []of.Action{of.CT{Commit: true, Zone: 1, NAT: &of.NAT{Kind: of.NATDst, Addr: addr("fd00::2"), Port: 8080}}}},
		{Table: 2, Priority: 96, Match: of.Match{EthType: ip6, IPProto: of.ProtoUDP, TpSrc: 53},
			Actions: []of.Action{of.CT{Commit: true, HasTable: true, Table: 2, Zone: 1, NAT: &of.NAT{Kind: of.NATSrc, Addr: addr("fd00::2")}}}},
		{Table: 2, Priority: 95, Match: of.Match{EthType: ip6, IPProto: of.ProtoUDP, Dst: pfx("fd00::10/128"), TpDst: 53},
			Actions: []of.Action{of.CT{Commit: true, Zone: 1, NAT: &of.NAT{Kind: of.NATDst, Addr: addr("fd00::3")}}}},
		{Table: 2, Priority: 94, Match: of.Match{EthType: ip6, IPProto: of.ProtoTCP, Src: pfx("fd00::/64")},
			Actions: []of.Action{of.CT{Commit: true, Zone: 1, NAT: &of.NAT{Kind: of.NATSrc, Addr: addr("fd00::9"), Port: 9000}}}},
		{Table: 2, Priority: 92, Match: of.Match{EthType: ip, IPProto: of.ProtoTCP, Src: pfx("10.0.0.1/32"), TpSrc: 0x8000, TpSrcMask: 0x8000, Extra: &of.MatchExtra{TCPFlags: &of.TCPFlags{Set: of.TCPSyn, Unset: of.TCPAck}}},
			Actions: []of.Action{of.CT{Commit: true, Zone: 1, NAT: &of.NAT{Kind: of.NATSrc, Addr: addr("10.0.0.1"), Port: 1024, PortMax: 32767}}}},
		{Table: 2, Priority: 91, Match: of.Match{EthType: ip6, IPProto: of.ProtoTCP, TpSrcMask: 0xfc00},
			Actions: []of.Action{of.CT{Commit: true, Zone: 1, NAT: &of.NAT{Kind: of.NATSrc, Addr: addr("fd00::1"), Port: 32768, PortMax: 65535}}}},
		{Table: 2, Priority: 93, Match: of.Match{EthType: ip6},
			Actions: []of.Action{of.CT{HasTable: true, Table: 3, Zone: 2, NAT: &of.NAT{Kind: of.NATReply}}}},
		{Table: 4, Priority: 11, Match: of.Match{EthType: ip6, Src: pfx("fd00::/64"), Dst: pfx("fd00::1/128")}, Actions: []of.Action{of.Normal{}}},
		{Table: 4, Priority: 14, Match: of.Match{EthType: ip, IPProto: of.ProtoSCTP, TpDst: 99, TpSrc: 98}, Actions: []of.Action{of.OutputInPort{}}},
		{Table: 4, Priority: 15, Match: of.Match{EthType: ip6, IPProto: of.ProtoSCTP}, Actions: []of.Action{of.Output{Port: 3}}},
		{Table: 4, Priority: 16, Match: of.Match{EthType: ip, IPProto: of.ProtoICMP}, Actions: []of.Action{of.GotoTable{Table: 5}}},
		{Table: 4, Priority: 17, Match: of.Match{EthType: ip6, IPProto: of.ProtoICMPv6}, Actions: []of.Action{of.Controller{}}},
		{Table: 4, Priority: 18, Match: of.Match{EthType: of.EthTypeARP, Extra: &of.MatchExtra{ARPTPA: addr("10.0.0.1"), ARPOp: 1}},
			Actions: []of.Action{of.Controller{MaxLen: 100}}},
		{Table: 4, Priority: 19, Match: of.Match{EthType: 0x1234}, Actions: []of.Action{of.Controller{Pause: true}}},
		{Table: 4, Priority: 20, Match: of.Match{EthType: ip, IPProto: 47, Src: pfx("10.0.0.1/32"), Dst: pfx("10.0.0.2/32")},
			Actions: []of.Action{of.Controller{Reason: "action", MaxLen: 100, UserData: []byte{1, 2, 3}, Pause: true}}},
		{Table: 4, Priority: 21, Match: of.Match{EthType: ip6, IPProto: 89},
			Actions: []of.Action{of.SetEthDst{MAC: mac("aa:bb:cc:dd:ee:ff")}, of.SetEthSrc{MAC: mac("00:11:22:33:44:55")}}},
		{Table: 4, Priority: 22, Match: of.Match{EthType: ip6, IPProto: of.ProtoICMP, Src: pfx("fd00::1/128")},
			Actions: []of.Action{of.Controller{Reason: "invalid_ttl", MaxLen: 65535}}},
		{Table: 5, Priority: 22, Match: of.Match{Extra: &of.MatchExtra{XXRegs: []of.XXRegMatch{
			{XXReg: 0, Value: of.Uint128{Lo: 1}, Mask: of.Uint128{Lo: 0xff}},
			{XXReg: 1, Value: of.Uint128{Hi: 0x0000100000000000}, Mask: of.Uint128{Hi: ^uint64(0), Lo: 0xffffffffffffff00}},
		}}}, Actions: []of.Action{of.SetReg{Reg: 0, Value: 5}, of.SetReg{Reg: 1, Value: 5, Mask: 0xf}, of.SetReg{Reg: 2, Value: 0x3, Mask: 1},
			of.SetReg{Reg: 15, Value: 0xffffffff, Mask: 0xffffffff}}},
		{Table: 5, Priority: 23, Match: of.Match{Extra: &of.MatchExtra{XXRegs: []of.XXRegMatch{{XXReg: 2, Value: of.Uint128{Lo: 5}}}}}, Actions: []of.Action{of.Drop{}}},
		{Table: 5, Priority: 24, Match: of.Match{
			PktMark: &of.Masked32{Value: 4, Mask: 0xffffffff}, EthType: ip, CtMark: &of.Masked32{Value: 1},
			CtState: &of.CtState{Set: of.CtNew | of.CtTrk | of.CtSNAT | of.CtDNAT, Unset: of.CtEst | of.CtRel | of.CtRpl | of.CtInv},
		}, Actions: []of.Action{of.CT{Commit: true, Zone: 5, Exec: []of.Action{of.SetCtMark{Value: 1}}}}},
		{Table: 5, Priority: 25, Match: of.Match{EthType: ip, Src: pfx("10.0.0.1/16")}, Actions: []of.Action{
			of.Move{Src: whole("NXM_OF_IP_SRC"), Dst: reg(0)},
			of.Move{Src: bitsOf("NXM_NX_REG1", 0, 15), Dst: bitsOf("NXM_NX_REG2", 16, 31)},
			of.Move{Src: bitsOf("NXM_NX_REG1", 3, 3), Dst: bitsOf("NXM_NX_REG2", 5, 5)},
			of.Move{Src: bitsOf("NXM_NX_REG3", 0, 31), Dst: reg(4)},
			of.Move{Src: whole("NXM_OF_ETH_SRC"), Dst: whole("NXM_OF_ETH_DST")},
		}},
		{Table: 5, Priority: 26, Match: of.Match{EthType: ip, IPProto: of.ProtoTCP}, Actions: []of.Action{
			of.Move{Src: whole("NXM_OF_TCP_DST"), Dst: bitsOf("NXM_NX_REG4", 0, 15)},
			of.SetReg{Reg: 4, Value: 0x10000, Mask: 0x10000}, of.Resubmit{Table: 6}}},
		{Table: 5, Priority: 27, Match: of.Match{EthType: ip}, Actions: []of.Action{
			of.CT{Zone: 3, NAT: &of.NAT{Kind: of.NATReply}}, of.Resubmit{Table: 4}, of.GroupAction{ID: 2}}},
		{Table: 5, Priority: 28, Match: of.Match{InPort: 5, Extra: &of.MatchExtra{EthSrc: mac("aa:bb:cc:dd:ee:01"), EthDst: mac("aa:bb:cc:dd:ee:02")}},
			Actions: []of.Action{of.Drop{}}},
		{Table: 5, Priority: 29, Cookie: 0x1234, IdleTimeout: 30, HardTimeout: 60, Match: of.Match{Regs: []of.RegMatch{
			{Reg: 15, Value: 0xffffffff}, {Reg: 0, Value: 1}, {Reg: 3, Value: 0, Mask: 1}, {Reg: 8, Value: 0x7, Mask: 0x3}}},
			Actions: nil},
		{Table: 6, Priority: 1, Match: of.Match{PktMark: &of.Masked32{}, CtMark: &of.Masked32{}, Regs: []of.RegMatch{{Reg: 0}}},
			Actions: []of.Action{of.SetReg{Reg: 0}, of.SetReg{Reg: 1, Mask: 1}}},
		{Table: 6, Priority: 2, Match: of.Match{EthType: ip, CtState: &of.CtState{Unset: of.CtNew | of.CtEst | of.CtRel | of.CtRpl | of.CtInv | of.CtTrk | of.CtSNAT | of.CtDNAT}},
			Actions: []of.Action{of.CT{Commit: true, Exec: []of.Action{of.SetCtMark{Value: 0, Mask: 1}}}}},
		{Table: 6, Priority: 3, Match: of.Match{EthType: ip, CtState: &of.CtState{Set: of.CtTrk, Unset: of.CtInv}},
			Actions: []of.Action{of.CT{Commit: true, Zone: 7, Exec: []of.Action{of.SetCtMark{Value: 0x10, Mask: 0xf0}, of.SetCtMark{Value: 0xffffffff, Mask: 0x1}}}}},
		{Table: 6, Priority: 4, Match: of.Match{InPort: of.PortLocal}, Actions: []of.Action{of.Output{Port: of.PortLocal}}},
		{Table: 6, Priority: 5, Match: of.Match{InPort: 7, Extra: &of.MatchExtra{EthDst: mac("ff:ff:ff:ff:ff:ff")}}, Actions: []of.Action{of.Output{Port: 1}, of.Output{Port: 2}}},
		{Table: 7, Priority: 0, Actions: []of.Action{of.Drop{}}},
		{Table: 7, Priority: 32768, Match: of.Match{EthType: ip, Src: pfx("0.0.0.0/0"), Dst: pfx("172.16.0.0/12")}, Actions: []of.Action{of.GotoTable{Table: 8}}},
		{Table: 8, Priority: 65535, Match: of.Match{EthType: of.EthTypeARP, Extra: &of.MatchExtra{ARPTPA: addr("10.0.0.254")}}, Actions: []of.Action{of.Normal{}}},
		// The neighbour spoof guard's shapes: ARP sender fields, ND target and link-layer
		// options (an all-zero option matches a message without it).
		{Table: 8, Priority: 230, Match: of.Match{InPort: 4, EthType: of.EthTypeARP, Extra: &of.MatchExtra{EthSrc: mac("aa:bb:cc:dd:ee:01"), ARPSPA: addr("10.0.0.4"), ARPSHA: mac("aa:bb:cc:dd:ee:01")}}, Actions: []of.Action{of.Normal{}}},
		{Table: 8, Priority: 229, Match: of.Match{EthType: of.EthTypeARP, Extra: &of.MatchExtra{ARPSPA: addr("0.0.0.0"), ARPTPA: addr("10.0.0.4"), ARPOp: 1, ARPSHA: mac("aa:bb:cc:dd:ee:01")}}, Actions: []of.Action{of.Normal{}}},
		{Table: 8, Priority: 228, Match: of.Match{EthType: ip6, IPProto: of.ProtoICMPv6, Src: pfx("fd00::4/128"), Extra: &of.MatchExtra{EthSrc: mac("aa:bb:cc:dd:ee:01"), ICMPType: u8(135), ICMPCode: u8(0), NDSLL: mac("aa:bb:cc:dd:ee:01")}}, Actions: []of.Action{of.Normal{}}},
		{Table: 8, Priority: 227, Match: of.Match{EthType: ip6, IPProto: of.ProtoICMPv6, Src: pfx("::/128"), Extra: &of.MatchExtra{ICMPType: u8(135), ICMPCode: u8(0), NDTarget: addr("fd00::4"), NDSLL: mac("00:00:00:00:00:00")}}, Actions: []of.Action{of.Normal{}}},
		{Table: 8, Priority: 226, Match: of.Match{EthType: ip6, IPProto: of.ProtoICMPv6, Extra: &of.MatchExtra{ICMPType: u8(136), ICMPCode: u8(0), NDTarget: addr("fe80::a8bb:ccff:fedd:ee01"), NDTLL: mac("aa:bb:cc:dd:ee:01")}}, Actions: []of.Action{of.Normal{}}},
		{Table: 8, Priority: 225, Match: of.Match{EthType: ip6, IPProto: of.ProtoICMPv6, Extra: &of.MatchExtra{ICMPType: u8(136), NDTarget: addr("fd00::4")}},
			Actions: []of.Action{of.Normal{}}},
	}
}

func u8(v uint8) *uint8 { return &v }

// ovsCorpusGroups are select groups in the shapes the agent builds, plus one with a single
// hash field, weights 0 and 1 (OVS omits the default), and a selection_method_param.
func ovsCorpusGroups() []of.Group {
	return []of.Group{
		{ID: 1, Type: of.GroupTypeSelect, HashFields: []string{"ip_src", "ip_dst", "tcp_src", "tcp_dst"}, Buckets: []of.Bucket{
			{ID: 0, Weight: 100, Actions: []of.Action{of.SetReg{Reg: 3, Value: 0xa000001}, of.SetReg{Reg: 4, Value: 0x50, Mask: 0xffff}, of.Resubmit{Table: 5}}},
			{ID: 1, Weight: 100, Actions: []of.Action{of.CT{Commit: true, HasTable: true, Table: 6, Zone: 65520,
				NAT:  &of.NAT{Kind: of.NATDst, Addr: netip.MustParseAddr("10.0.0.2"), Port: 8080},
				Exec: []of.Action{of.SetCtMark{Value: 1, Mask: 1}}}}},
		}},
		{ID: 2, HashFields: []string{"ip_src"}, Buckets: []of.Bucket{
			{ID: 5, Weight: 1, Actions: []of.Action{of.Output{Port: 1}}},
			{ID: 6, Weight: 0, Actions: []of.Action{of.Drop{}}},
		}},
		{ID: 3, Type: of.GroupTypeSelect, SelectionMethod: "hash", SelectionParam: 20, HashFields: []string{"ipv6_src", "ipv6_dst", "udp_dst"},
			Buckets: []of.Bucket{{ID: 0, Weight: 50, Actions: []of.Action{
				of.CT{Commit: true, HasTable: true, Table: 6, Zone: 65520, NAT: &of.NAT{Kind: of.NATDst, Addr: netip.MustParseAddr("fd00::5"), Port: 53}}}}}},
		{ID: 4, Type: of.GroupTypeSelect, HashFields: []string{"ip_dst"}},
	}
}

func flowKey(f *of.Flow) string { return of.FormatFlowKey(f) }

func sortFlows(flows []of.Flow) {
	slices.SortFunc(flows, func(a, b of.Flow) int {
		return cmp.Or(cmp.Compare(a.Table, b.Table), cmp.Compare(a.Priority, b.Priority), strings.Compare(flowKey(&a), flowKey(&b)))
	})
}

func canonicalFlows(flows []of.Flow) []of.Flow {
	out := make([]of.Flow, len(flows))
	for i, f := range flows {
		out[i] = of.CanonicalFlow(f)
	}
	sortFlows(out)
	return out
}

func canonicalGroups(groups []of.Group) []of.Group {
	out := make([]of.Group, len(groups))
	for i, g := range groups {
		out[i] = of.CanonicalGroup(g)
	}
	slices.SortFunc(out, func(a, b of.Group) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// TestRoundTripRealOVS installs the whole corpus through one OpenFlow bundle, dumps it back
// (with and without statistics) and requires every flow and group to parse back to its
// canonical model. It also requires FormatMatch/FormatActions of every dumped flow to equal
// OVS's own text, so rendered and dumped flows read alike.
func TestRoundTripRealOVS(t *testing.T) {
	ovssandbox.Require(t)
	// A private namespace: the userspace datapath creates a tap device named ovs-netdev, which
	// collides with any other OVS running in the same namespace.
	ns := ovssandbox.NewNetNS(t, "ofrt")
	o := ovssandbox.Start(t, ovssandbox.Options{NetNS: ns.Name})
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	br := "br" + hex.EncodeToString(b)
	_, err := o.Vsctl("add-br", br, "--", "set", "bridge", br, "datapath_type=netdev",
		"protocols=OpenFlow10,OpenFlow13,OpenFlow15", "fail_mode=secure")
	require.NoError(t, err)
	require.NoError(t, o.WaitForBridge(br))

	// The corpus's meter action needs its meter.
	_, err = o.Ofctl("add-meter", br, of.FormatMeter(of.Meter{ID: 3, Rate: 10, Burst: 5}))
	require.NoError(t, err)
	flows, groups := ovsCorpusFlows(), ovsCorpusGroups()
	var bundle strings.Builder
	for i := range groups {
		bundle.WriteString("group add " + of.FormatGroup(&groups[i]) + "\n")
	}
	for i := range flows {
		bundle.WriteString("flow add " + of.FormatFlow(&flows[i]) + "\n")
	}
	file := filepath.Join(t.TempDir(), "bundle.txt")
	require.NoError(t, os.WriteFile(file, []byte(bundle.String()), 0o600))
	if _, err := o.Ofctl("bundle", br, file); err != nil {
		t.Fatalf("installing corpus: %v\nbundle:\n%s", err, bundle.String())
	}

	want := canonicalFlows(flows)
	for _, args := range [][]string{nil, {"--no-stats"}} {
		out, err := o.Ofctl("dump-flows", br, args...)
		require.NoError(t, err)
		got, err := of.ParseFlowDump(out)
		require.NoError(t, err, "dump:\n%s", out)
		sortFlows(got)
		if d := gocmp.Diff(want, got, cmpModel()); d != "" {
			t.Errorf("dump-flows %v did not round-trip (-want +got):\n%s\ndump:\n%s", args, d, out)
		}
		if args == nil {
			continue
		}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			checkRenderMatchesOVS(t, line)
		}
	}

	out, err := o.Ofctl("dump-groups", br)
	require.NoError(t, err)
	gotGroups, err := of.ParseGroupDump(out)
	require.NoError(t, err, "dump:\n%s", out)
	if d := gocmp.Diff(canonicalGroups(groups), canonicalGroups(gotGroups), cmpModel()); d != "" {
		t.Errorf("dump-groups did not round-trip (-want +got):\n%s\ndump:\n%s", d, out)
	}
	for i, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		if s := of.FormatGroup(&gotGroups[i]); s != strings.TrimSpace(line) {
			t.Errorf("FormatGroup renders %q, OVS printed %q", s, strings.TrimSpace(line))
		}
	}
}

// checkRenderMatchesOVS requires the renderer to print a dumped (--no-stats) flow's match and
// actions exactly as OVS did.
func checkRenderMatchesOVS(t *testing.T, line string) {
	t.Helper()
	line = strings.TrimSpace(line)
	f, err := of.ParseFlow(line)
	require.NoError(t, err)
	rendered := of.FormatActions(f.Actions)
	ovsActions := line[strings.Index(line, "actions=")+len("actions="):]
	if rendered != ovsActions {
		t.Errorf("FormatActions renders %q, OVS printed %q", rendered, ovsActions)
	}
	// The head is "hdr=v, hdr=v, priority=P,match": the match follows the last ", " unless
	// the flow has neither a priority nor a match.
	head := strings.TrimSuffix(strings.TrimSpace(line[:strings.Index(line, "actions=")]), ",")
	pieces := strings.Split(head, ", ")
	ovsMatch := pieces[len(pieces)-1]
	if !strings.Contains(ovsMatch, ",") {
		for _, k := range []string{"cookie=", "duration=", "table=", "n_packets=", "n_bytes=", "idle_timeout=",
			"hard_timeout=", "idle_age=", "hard_age=", "reset_counts"} {
			if strings.HasPrefix(ovsMatch, k) {
				ovsMatch = ""
			}
		}
	}
	if rest, ok := strings.CutPrefix(ovsMatch, "priority="); ok {
		_, ovsMatch, _ = strings.Cut(rest, ",")
	}
	if m := of.FormatMatch(&f.Match); m != ovsMatch {
		t.Errorf("FormatMatch renders %q, OVS printed %q (line %q)", m, ovsMatch, line)
	}
}
