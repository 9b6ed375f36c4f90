package native

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// The match encoder writes an OpenFlow 1.5 OXM match (struct ofp_match of type OFPMT_OXM) in
// the field order Open vSwitch's nx_put_raw() uses, so that its output is byte-for-byte what
// `ovs-ofctl -O OpenFlow15` sends for the same flow: in_port, Ethernet addresses and type, the
// L3 fields (addresses, then the protocol and its L4 fields), the registers as 64-bit
// OpenFlow 1.5 packet registers, pkt_mark, and the conntrack fields. Values are sent masked.

// appendMatch writes m as an ofp_match, padded to 8 bytes.
func appendMatch(w *buf, m *openflow.Match) error {
	mx := m.Ext()
	start := len(w.b)
	w.u16(1) // OFPMT_OXM
	w.u16(0) // length, set below
	if m.InPort != 0 {
		putExact(w, oxmInPort, be32(m.InPort))
	}
	if len(mx.EthSrc) != 0 {
		if len(mx.EthSrc) != 6 {
			return fmt.Errorf("dl_src %v: not a 48-bit MAC address", mx.EthSrc)
		}
		putExact(w, oxmEthSrc, mx.EthSrc)
	}
	if len(mx.EthDst) != 0 {
		if len(mx.EthDst) != 6 {
			return fmt.Errorf("dl_dst %v: not a 48-bit MAC address", mx.EthDst)
		}
		putExact(w, oxmEthDst, mx.EthDst)
	}
	if m.EthType != openflow.EthTypeAny {
		putExact(w, oxmEthType, be16(uint16(m.EthType)))
	}
	if err := appendL3(w, m); err != nil {
		return err
	}
	if err := appendRegs(w, m); err != nil {
		return err
	}
	if m.PktMark != nil {
		putMasked32(w, nxmPktMark, m.PktMark.Value, exactMask32(m.PktMark.Mask))
	}
	if m.CtState != nil && *m.CtState != (openflow.CtState{}) {
		s := m.CtState
		putMasked32(w, nxmCtState, uint32(s.Set), uint32(s.Set|s.Unset))
	}
	if m.CtMark != nil {
		putMasked32(w, nxmCtMark, m.CtMark.Value, exactMask32(m.CtMark.Mask))
	}
	w.setLen16(start, 2)
	w.pad8(start)
	return nil
}

// appendL3 writes the IPv4, IPv6 or ARP fields and the L4 fields of m.
func appendL3(w *buf, m *openflow.Match) error {
	mx := m.Ext()
	if (mx.ARPSPA.IsValid() || len(mx.ARPSHA) != 0 || mx.ARPTPA.IsValid() || mx.ARPOp != 0) && m.EthType != openflow.EthTypeARP {
		return fmt.Errorf("ARP fields need eth type ARP, have 0x%04x", uint16(m.EthType))
	}
	switch m.EthType {
	case openflow.EthTypeIP, openflow.EthTypeIPv6:
		src, dst := oxmIPv4Src, oxmIPv4Dst
		if m.EthType == openflow.EthTypeIPv6 {
			src, dst = oxmIPv6Src, oxmIPv6Dst
		}
		if err := putPrefix(w, src, m.Src, m.EthType); err != nil {
			return fmt.Errorf("source: %w", err)
		}
		if err := putPrefix(w, dst, m.Dst, m.EthType); err != nil {
			return fmt.Errorf("destination: %w", err)
		}
		if m.IPProto != openflow.ProtoAny {
			putExact(w, oxmIPProto, []byte{byte(m.IPProto)})
			return appendL4(w, m)
		}
		return appendL4(w, m)
	case openflow.EthTypeARP:
		if err := appendARP(w, m); err != nil {
			return err
		}
	}
	if m.Src.IsValid() && m.Src.Bits() > 0 || m.Dst.IsValid() && m.Dst.Bits() > 0 || m.IPProto != openflow.ProtoAny {
		return fmt.Errorf("IP fields need eth type IPv4 or IPv6, have 0x%04x", uint16(m.EthType))
	}
	return nil
}

// appendL4 writes the transport ports or ICMP type and code.
func appendL4(w *buf, m *openflow.Match) error {
	mx := m.Ext()
	var src, dst oxmHeader
	switch m.IPProto {
	case openflow.ProtoTCP:
		src, dst = oxmTCPSrc, oxmTCPDst
	case openflow.ProtoUDP:
		src, dst = oxmUDPSrc, oxmUDPDst
	case openflow.ProtoSCTP:
		src, dst = oxmSCTPSrc, oxmSCTPDst
	case openflow.ProtoICMP, openflow.ProtoICMPv6:
		typ, code := oxmICMPv4Type, oxmICMPv4Code
		if m.IPProto == openflow.ProtoICMPv6 {
			if m.EthType != openflow.EthTypeIPv6 {
				return fmt.Errorf("icmpv6 needs eth type IPv6")
			}
			typ, code = oxmICMPv6Type, oxmICMPv6Code
		} else if m.EthType != openflow.EthTypeIP {
			return fmt.Errorf("icmp needs eth type IPv4")
		}
		if mx.ICMPType != nil {
			putExact(w, typ, []byte{*mx.ICMPType})
		}
		if mx.ICMPCode != nil {
			putExact(w, code, []byte{*mx.ICMPCode})
		}
		if err := appendND(w, m); err != nil {
			return err
		}
	}
	if m.IPProto != openflow.ProtoICMPv6 && (mx.NDTarget.IsValid() || len(mx.NDSLL) != 0 || len(mx.NDTLL) != 0) {
		return fmt.Errorf("nd_target/nd_sll/nd_tll need ICMPv6, have protocol %d", m.IPProto)
	}
	if m.MatchesTpSrc() || m.TpDst != 0 {
		if src == 0 {
			return fmt.Errorf("tp_src/tp_dst need TCP, UDP or SCTP, have protocol %d", m.IPProto)
		}
		if v, mask := m.TpSrcMasked(); mask == 0xffff {
			putExact(w, src, be16(v))
		} else if mask != 0 {
			w.u32(uint32(src.masked()))
			w.bytes(be16(v))
			w.bytes(be16(mask))
		}
		if m.TpDst != 0 {
			putExact(w, dst, be16(m.TpDst))
		}
	}
	if mx.TCPFlags != nil && *mx.TCPFlags != (openflow.TCPFlags{}) {
		if m.IPProto != openflow.ProtoTCP {
			return fmt.Errorf("tcp_flags needs TCP, have protocol %d", m.IPProto)
		}
		// OVS sends tcp_flags masked even when every flag is given (the field has 12 bits).
		w.u32(uint32(oxmTCPFlags.masked()))
		w.bytes(be16(uint16(mx.TCPFlags.Set)))
		w.bytes(be16(uint16(mx.TCPFlags.Set | mx.TCPFlags.Unset)))
	}
	if (mx.ICMPType != nil || mx.ICMPCode != nil) && m.IPProto != openflow.ProtoICMP && m.IPProto != openflow.ProtoICMPv6 {
		return fmt.Errorf("icmp_type/icmp_code need ICMP, have protocol %d", m.IPProto)
	}
	return nil
}

// appendARP writes the ARP fields in Open vSwitch's order: op, sender and target protocol
// address, sender hardware address.
func appendARP(w *buf, m *openflow.Match) error {
	mx := m.Ext()
	if mx.ARPOp != 0 {
		putExact(w, oxmARPOp, be16(mx.ARPOp))
	}
	for _, f := range []struct {
		h    oxmHeader
		name string
		a    netip.Addr
	}{{oxmARPSPA, "arp_spa", mx.ARPSPA}, {oxmARPTPA, "arp_tpa", mx.ARPTPA}} {
		if !f.a.IsValid() {
			continue
		}
		if !f.a.Is4() {
			return fmt.Errorf("%s %v: not IPv4", f.name, f.a)
		}
		a := f.a.As4()
		putExact(w, f.h, a[:])
	}
	return putMAC(w, oxmARPSHA, "arp_sha", mx.ARPSHA)
}

// appendND writes the neighbour discovery fields (after the ICMPv6 type and code): the target
// address, then the link-layer address option of a solicitation or of an advertisement.
func appendND(w *buf, m *openflow.Match) error {
	mx := m.Ext()
	if !mx.NDTarget.IsValid() && len(mx.NDSLL) == 0 && len(mx.NDTLL) == 0 {
		return nil
	}
	typ := uint8(0)
	if mx.ICMPType != nil {
		typ = *mx.ICMPType
	}
	if typ != 135 && typ != 136 || mx.ICMPCode != nil && *mx.ICMPCode != 0 {
		return fmt.Errorf("nd_target/nd_sll/nd_tll need ICMPv6 type 135 or 136 with code 0")
	}
	if mx.NDTarget.IsValid() {
		if !mx.NDTarget.Is6() || mx.NDTarget.Is4In6() {
			return fmt.Errorf("nd_target %v: not IPv6", mx.NDTarget)
		}
		a := mx.NDTarget.As16()
		putExact(w, oxmNDTarget, a[:])
	}
	if len(mx.NDSLL) != 0 && typ != 135 || len(mx.NDTLL) != 0 && typ != 136 {
		return fmt.Errorf("nd_sll needs ICMPv6 type 135, nd_tll type 136")
	}
	if err := putMAC(w, oxmNDSLL, "nd_sll", mx.NDSLL); err != nil {
		return err
	}
	return putMAC(w, oxmNDTLL, "nd_tll", mx.NDTLL)
}

// putMAC writes an exact MAC field; nothing for an empty one.
func putMAC(w *buf, h oxmHeader, name string, mac net.HardwareAddr) error {
	if len(mac) == 0 {
		return nil
	}
	if len(mac) != 6 {
		return fmt.Errorf("%s %v: not a 48-bit MAC address", name, mac)
	}
	putExact(w, h, mac)
	return nil
}

// appendRegs writes the 32-bit and 128-bit register matches as the 64-bit OpenFlow 1.5 packet
// registers Open vSwitch sends: xreg N holds reg 2N in its upper and reg 2N+1 in its lower half,
// and xxreg N spans xreg 2N (upper) and 2N+1 (lower).
func appendRegs(w *buf, m *openflow.Match) error {
	mx := m.Ext()
	if len(m.Regs) == 0 && len(mx.XXRegs) == 0 {
		return nil
	}
	var val, mask [8]uint64
	for _, r := range m.Regs {
		if r.Reg >= 16 {
			return fmt.Errorf("reg%d: no such register", r.Reg)
		}
		mk := uint64(exactMask32(r.Mask))
		v := uint64(r.Value) & mk
		// Like Open vSwitch, a later match of the same bits replaces an earlier one.
		shift := 32 * (1 - uint(r.Reg)%2)
		keep := ^(uint64(0xffffffff) << shift)
		val[r.Reg/2] = val[r.Reg/2]&keep | v<<shift
		mask[r.Reg/2] = mask[r.Reg/2]&keep | mk<<shift
	}
	for _, r := range mx.XXRegs {
		if r.XXReg >= 4 {
			return fmt.Errorf("xxreg%d: no such register", r.XXReg)
		}
		mk := r.Mask
		if mk == (openflow.Uint128{}) {
			mk = openflow.Uint128{Hi: ^uint64(0), Lo: ^uint64(0)}
		}
		i := 2 * r.XXReg
		val[i], mask[i] = r.Value.Hi&mk.Hi, mk.Hi
		val[i+1], mask[i+1] = r.Value.Lo&mk.Lo, mk.Lo
	}
	for i := range val {
		switch mask[i] {
		case 0:
		case ^uint64(0):
			putExact(w, oxmXReg(i), be64(val[i]))
		default:
			w.u32(uint32(oxmXReg(i).masked()))
			w.u64(val[i])
			w.u64(mask[i])
		}
	}
	return nil
}

// putPrefix writes an address field under its prefix mask; an invalid or /0 prefix is left out.
func putPrefix(w *buf, h oxmHeader, p netip.Prefix, et openflow.EthType) error {
	if !p.IsValid() || p.Bits() == 0 {
		return nil
	}
	if p.Addr().Is4() != (et == openflow.EthTypeIP) {
		return fmt.Errorf("prefix %v does not match eth type 0x%04x", p, uint16(et))
	}
	p = p.Masked()
	addr := p.Addr().AsSlice()
	if p.Bits() == p.Addr().BitLen() {
		putExact(w, h, addr)
		return nil
	}
	mask := make([]byte, len(addr))
	for i := 0; i < p.Bits(); i++ {
		mask[i/8] |= 0x80 >> (i % 8)
	}
	w.u32(uint32(h.masked()))
	w.bytes(addr)
	w.bytes(mask)
	return nil
}

func putExact(w *buf, h oxmHeader, v []byte) {
	w.u32(uint32(h))
	w.bytes(v)
}

// putMasked32 writes a 32-bit field: nothing for a zero mask, the exact form for an all-ones
// mask, the masked form (with the value masked) otherwise.
func putMasked32(w *buf, h oxmHeader, v, mask uint32) {
	switch mask {
	case 0:
	case ^uint32(0):
		w.u32(uint32(h))
		w.u32(v)
	default:
		w.u32(uint32(h.masked()))
		w.u32(v & mask)
		w.u32(mask)
	}
}

// exactMask32 turns the model's "zero mask means exact" into a real mask.
func exactMask32(m uint32) uint32 {
	if m == 0 {
		return ^uint32(0)
	}
	return m
}

func be16(v uint16) []byte { return []byte{byte(v >> 8), byte(v)} }
func be32(v uint32) []byte { return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }
func be64(v uint64) []byte {
	return []byte{byte(v >> 56), byte(v >> 48), byte(v >> 40), byte(v >> 32), byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
}
