package oftrace

import (
	"bytes"
	"net"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// masked reports whether v matches value under mask (a zero mask is an exact match).
func masked(v, value, mask uint32) bool {
	if mask == 0 {
		mask = ^uint32(0)
	}
	return v&mask == value&mask
}

// matches reports whether the packet satisfies every field of m, with OVS's prerequisites: a
// field the packet does not have (e.g. tcp_dst on a UDP packet) does not match.
func matches(m *of.Match, p *Packet) bool {
	mx := m.Ext()
	if m.InPort != 0 && m.InPort != p.InPort {
		return false
	}
	if m.EthType != of.EthTypeAny && m.EthType != p.EthType {
		return false
	}
	if len(mx.EthSrc) != 0 && !bytes.Equal(mx.EthSrc, p.EthSrc) {
		return false
	}
	if len(mx.EthDst) != 0 && !bytes.Equal(mx.EthDst, p.EthDst) {
		return false
	}
	if !matchL3(m, p) || !matchL4(m, p) || !matchND(m, p) {
		return false
	}
	if m.CtState != nil && (p.CtState&m.CtState.Set != m.CtState.Set || p.CtState&m.CtState.Unset != 0) {
		return false
	}
	if m.CtMark != nil && !masked(p.CtMark, m.CtMark.Value, m.CtMark.Mask) {
		return false
	}
	if m.PktMark != nil && !masked(p.PktMark, m.PktMark.Value, m.PktMark.Mask) {
		return false
	}
	return matchRegs(m, p)
}

func matchL3(m *of.Match, p *Packet) bool {
	mx := m.Ext()
	if m.IPProto != of.ProtoAny && (!p.isIP() || m.IPProto != p.Proto) {
		return false
	}
	if p.EthType == of.EthTypeARP {
		if (m.Src.IsValid() && !m.Src.Contains(p.ARPSPA)) || (m.Dst.IsValid() && !m.Dst.Contains(p.ARPTPA)) {
			return false
		}
	} else {
		if m.Src.IsValid() && (!p.isIP() || !m.Src.Contains(p.Src)) {
			return false
		}
		if m.Dst.IsValid() && (!p.isIP() || !m.Dst.Contains(p.Dst)) {
			return false
		}
	}
	if mx.ARPTPA.IsValid() && (p.EthType != of.EthTypeARP || mx.ARPTPA != p.ARPTPA) {
		return false
	}
	if mx.ARPOp != 0 && (p.EthType != of.EthTypeARP || mx.ARPOp != p.ARPOp) {
		return false
	}
	if mx.ARPSPA.IsValid() && (p.EthType != of.EthTypeARP || mx.ARPSPA != p.ARPSPA) {
		return false
	}
	if len(mx.ARPSHA) != 0 && (p.EthType != of.EthTypeARP || !sameMAC(mx.ARPSHA, p.ARPSHA)) {
		return false
	}
	return true
}

// matchND matches the neighbour discovery fields: the target of a solicitation or an
// advertisement, the source link-layer option of a solicitation, the target link-layer option
// of an advertisement.
func matchND(m *of.Match, p *Packet) bool {
	mx := m.Ext()
	if !mx.NDTarget.IsValid() && len(mx.NDSLL) == 0 && len(mx.NDTLL) == 0 {
		return true
	}
	if !p.isND() || mx.NDTarget.IsValid() && mx.NDTarget != p.NDTarget {
		return false
	}
	if len(mx.NDSLL) != 0 && (p.ICMPType != 135 || !sameMAC(mx.NDSLL, p.NDSLL)) {
		return false
	}
	return len(mx.NDTLL) == 0 || p.ICMPType == 136 && sameMAC(mx.NDTLL, p.NDTLL)
}

// sameMAC compares a matched MAC with a packet's, an absent (nil) one being all-zero.
func sameMAC(want, have net.HardwareAddr) bool {
	if len(have) == 0 {
		have = make(net.HardwareAddr, 6)
	}
	return bytes.Equal(want, have)
}

func matchL4(m *of.Match, p *Packet) bool {
	mx := m.Ext()
	if v, mask := m.TpSrcMasked(); mask != 0 && (!p.hasPorts() || p.SrcPort&mask != v) {
		return false
	}
	if m.TpDst != 0 && (!p.hasPorts() || m.TpDst != p.DstPort) {
		return false
	}
	if f := mx.TCPFlags; f != nil && (p.Proto != of.ProtoTCP || p.TCPFlags&f.Set != f.Set || p.TCPFlags&f.Unset != 0) {
		return false
	}
	if mx.ICMPType != nil && (!p.isICMP() || *mx.ICMPType != p.ICMPType) {
		return false
	}
	if mx.ICMPCode != nil && (!p.isICMP() || *mx.ICMPCode != p.ICMPCode) {
		return false
	}
	return true
}

func matchRegs(m *of.Match, p *Packet) bool {
	mx := m.Ext()
	for _, r := range m.Regs {
		if int(r.Reg) >= NumRegs || !masked(p.Regs[r.Reg], r.Value, r.Mask) {
			return false
		}
	}
	for _, x := range mx.XXRegs {
		if int(x.XXReg) >= NumRegs/4 {
			return false
		}
		mask := x.Mask
		if mask == (of.Uint128{}) {
			mask = of.Uint128{Hi: ^uint64(0), Lo: ^uint64(0)}
		}
		v := xxregField("", int(x.XXReg)).get(p)
		if v.hi&mask.Hi != x.Value.Hi&mask.Hi || v.lo&mask.Lo != x.Value.Lo&mask.Lo {
			return false
		}
	}
	return true
}
