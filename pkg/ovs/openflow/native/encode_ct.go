package native

import (
	"fmt"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// Flags of NXAST_CT, NXAST_NAT and NXAST_LEARN.
const (
	ctCommit         uint16 = 1
	ctRecircNone     uint8  = 0xff
	natSrc           uint16 = 1
	natDst           uint16 = 2
	natIPv4Min       uint16 = 1
	natIPv6Min       uint16 = 4
	natProtoMin      uint16 = 16
	natProtoMax      uint16 = 32
	learnDelLearned  uint16 = 2
	learnWriteResult uint16 = 4
	learnSrcImmed    uint16 = 1 << 13
	learnDstLoad     uint16 = 1 << 11
	learnMaxSpecBits        = 0x3ff
)

// putCT writes NXAST_CT with its nested actions: the NAT first, then the exec actions.
func putCT(w *buf, a openflow.CT) error {
	start := vendorHeader(w, nxCT)
	var flags uint16
	if a.Commit {
		flags |= ctCommit
	}
	w.u16(flags)
	w.u32(0) // zone_src: an immediate zone
	w.u16(a.Zone)
	table := ctRecircNone
	if a.HasTable {
		table = a.Table
	}
	w.u8(table)
	w.zeros(3)
	w.u16(0) // alg
	if a.NAT != nil {
		if err := putNAT(w, *a.NAT); err != nil {
			return err
		}
	}
	for _, e := range a.Exec {
		m, ok := e.(openflow.SetCtMark)
		if !ok {
			return fmt.Errorf("ct exec: %T is not allowed (only set_field:->ct_mark)", e)
		}
		putSetField(w, nxmCtMark, be32(m.Value), be32(exactMask32(m.Mask)))
	}
	w.setLen16(start, 2)
	return nil
}

func putNAT(w *buf, n openflow.NAT) error {
	start := vendorHeader(w, nxNAT)
	w.zeros(2)
	var flags, ranges uint16
	switch n.Kind {
	case openflow.NATReply:
		w.u16(0)
		w.u16(0)
		w.pad8(start)
		w.setLen16(start, 2)
		return nil
	case openflow.NATSrc:
		flags = natSrc
	case openflow.NATDst:
		flags = natDst
	default:
		return fmt.Errorf("nat: unknown kind %d", n.Kind)
	}
	if !n.Addr.IsValid() || n.Addr.IsUnspecified() {
		// "nat(src)": OVS sends no range for an all-zero address and refuses one.
		if n.Port != 0 {
			return fmt.Errorf("nat: a port without an address")
		}
		w.u16(flags)
		w.u16(0)
		w.pad8(start)
		w.setLen16(start, 2)
		return nil
	}
	if n.Addr.Is4() {
		ranges |= natIPv4Min
	} else {
		ranges |= natIPv6Min
	}
	if n.Port != 0 {
		ranges |= natProtoMin
		if n.PortMax > n.Port {
			ranges |= natProtoMax
		}
	}
	w.u16(flags)
	w.u16(ranges)
	w.bytes(n.Addr.AsSlice())
	if n.Port != 0 {
		w.u16(n.Port)
		if n.PortMax > n.Port {
			w.u16(n.PortMax)
		}
	}
	w.pad8(start)
	w.setLen16(start, 2)
	return nil
}

// putLearn writes NXAST_LEARN (NXAST_LEARN2 with a limit or a result_dst): the fixed part,
// then the eth_type and nw_proto immediate matches, then the specs, as Open vSwitch encodes
// what ovs-ofctl parses from its text.
func putLearn(w *buf, l openflow.Learn) error {
	learn2 := l.Limit != 0 || l.ResultDst.Field != ""
	subtype := nxLearn
	if learn2 {
		subtype = nxLearn2
	}
	start := vendorHeader(w, subtype)
	w.u16(l.IdleTimeout)
	w.u16(l.HardTimeout)
	w.u16(l.Priority)
	w.u64(l.Cookie)
	var flags uint16
	if l.DeleteLearned {
		flags |= learnDelLearned
	}
	if l.ResultDst.Field != "" {
		flags |= learnWriteResult
	}
	w.u16(flags)
	w.u8(l.Table)
	w.u8(0)
	w.u16(l.FinIdleTimeout)
	w.u16(l.FinHardTimeout)
	if learn2 {
		if err := putLearn2(w, l); err != nil {
			return err
		}
	}
	if l.EthType != openflow.EthTypeAny {
		f := namedFields["NXM_OF_ETH_TYPE"]
		putLearnImmediate(w, 0, f, 0, 16, uint64(l.EthType))
	}
	if l.IPProto != openflow.ProtoAny {
		f := namedFields["NXM_OF_IP_PROTO"]
		putLearnImmediate(w, 0, f, 0, 8, uint64(l.IPProto))
	}
	for i, s := range l.Specs {
		if err := putLearnSpec(w, s); err != nil {
			return fmt.Errorf("learn spec %d: %w", i, err)
		}
	}
	w.pad8(start)
	w.setLen16(start, 2)
	return nil
}

// putLearn2 writes what NXAST_LEARN2 adds to NXAST_LEARN's fixed part: the limit, the
// result_dst bit offset and 2 bytes of padding, then, with a result_dst, its field header.
func putLearn2(w *buf, l openflow.Learn) error {
	w.u32(l.Limit)
	if l.ResultDst.Field == "" {
		w.u16(0)
		w.zeros(2)
		return nil
	}
	dst, ofs, n, err := subfield(l.ResultDst)
	if err != nil {
		return fmt.Errorf("learn result_dst: %w", err)
	}
	if n != 1 {
		return fmt.Errorf("learn result_dst %s: %d bits, want a single bit", openflow.FormatSubfield(l.ResultDst), n)
	}
	w.u16(uint16(ofs))
	w.zeros(2)
	w.u32(uint32(dst.nxm))
	return nil
}

func putLearnSpec(w *buf, s openflow.LearnSpec) error {
	dst, dstOfs, n, err := subfield(s.Dst)
	if err != nil {
		return err
	}
	if n > learnMaxSpecBits {
		return fmt.Errorf("%d bits is too wide", n)
	}
	switch s.Kind {
	case openflow.LearnMatch, openflow.LearnLoad:
		src, srcOfs, sn := dst, dstOfs, n
		if s.Src.Field != "" {
			if src, srcOfs, sn, err = subfield(s.Src); err != nil {
				return err
			}
		}
		if sn != n {
			return fmt.Errorf("source has %d bits, destination %d", sn, n)
		}
		dstType := uint16(0)
		if s.Kind == openflow.LearnLoad {
			dstType = learnDstLoad
		}
		w.u16(uint16(n) | dstType)
		w.u32(uint32(src.nxm))
		w.u16(uint16(srcOfs))
		w.u32(uint32(dst.nxm))
		w.u16(uint16(dstOfs))
	case openflow.LearnMatchValue:
		putLearnImmediate(w, 0, dst, dstOfs, n, s.Value)
	case openflow.LearnLoadValue:
		putLearnImmediate(w, learnDstLoad, dst, dstOfs, n, s.Value)
	default:
		return fmt.Errorf("unknown kind %d", s.Kind)
	}
	return nil
}

// putLearnImmediate writes a spec with an immediate source: the value right-aligned in
// 2×⌈n/16⌉ bytes.
func putLearnImmediate(w *buf, dstType uint16, dst fieldDef, dstOfs, n int, v uint64) {
	w.u16(uint16(n) | learnSrcImmed | dstType)
	size := 2 * ((n + 15) / 16)
	if n < 64 {
		v &= 1<<uint(n) - 1
	}
	for i := size - 1; i >= 0; i-- {
		if i >= 8 {
			w.u8(0)
			continue
		}
		w.u8(byte(v >> (8 * uint(i))))
	}
	w.u32(uint32(dst.nxm))
	w.u16(uint16(dstOfs))
}
