package oftrace

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// u128 is a value of up to 128 bits (fields read and written by move and learn).
type u128 struct{ hi, lo uint64 }

func (v u128) shr(n uint) u128 {
	switch {
	case n == 0:
		return v
	case n >= 128:
		return u128{}
	case n >= 64:
		return u128{lo: v.hi >> (n - 64)}
	}
	return u128{hi: v.hi >> n, lo: v.lo>>n | v.hi<<(64-n)}
}

func (v u128) shl(n uint) u128 {
	switch {
	case n == 0:
		return v
	case n >= 128:
		return u128{}
	case n >= 64:
		return u128{hi: v.lo << (n - 64)}
	}
	return u128{hi: v.hi<<n | v.lo>>(64-n), lo: v.lo << n}
}

func (v u128) and(m u128) u128 { return u128{v.hi & m.hi, v.lo & m.lo} }
func (v u128) or(m u128) u128  { return u128{v.hi | m.hi, v.lo | m.lo} }
func (v u128) not() u128       { return u128{^v.hi, ^v.lo} }

// ones returns a value with the low n bits set.
func ones(n uint) u128 {
	if n >= 128 {
		return u128{^uint64(0), ^uint64(0)}
	}
	return u128{lo: 1}.shl(n).sub1()
}

func (v u128) sub1() u128 {
	if v.lo == 0 {
		return u128{v.hi - 1, ^uint64(0)}
	}
	return u128{v.hi, v.lo - 1}
}

// field is one packet field that move and learn can name.
type field struct {
	name     string // NXM/OXM name
	bits     uint
	readOnly bool
	// ok reports whether the packet has the field (OVS prerequisites).
	ok  func(p *Packet) bool
	get func(p *Packet) u128
	set func(p *Packet, v u128)
}

func always(*Packet) bool { return true }

func regField(name string, r int) field {
	return field{name: name, bits: 32, ok: always,
		get: func(p *Packet) u128 { return u128{lo: uint64(p.Regs[r])} },
		set: func(p *Packet, v u128) { p.Regs[r] = uint32(v.lo) }}
}

func xxregField(name string, x int) field {
	return field{name: name, bits: 128, ok: always,
		get: func(p *Packet) u128 {
			r := p.Regs[4*x : 4*x+4]
			return u128{hi: uint64(r[0])<<32 | uint64(r[1]), lo: uint64(r[2])<<32 | uint64(r[3])}
		},
		set: func(p *Packet, v u128) {
			p.Regs[4*x], p.Regs[4*x+1] = uint32(v.hi>>32), uint32(v.hi)
			p.Regs[4*x+2], p.Regs[4*x+3] = uint32(v.lo>>32), uint32(v.lo)
		}}
}

func addrToU128(a netip.Addr) u128 {
	b := a.AsSlice()
	var v u128
	for _, x := range b {
		v = v.shl(8).or(u128{lo: uint64(x)})
	}
	return v
}

func u128ToAddr(v u128, bits uint) netip.Addr {
	if bits == 32 {
		x := uint32(v.lo)
		return netip.AddrFrom4([4]byte{byte(x >> 24), byte(x >> 16), byte(x >> 8), byte(x)})
	}
	var b [16]byte
	for i := 15; i >= 0; i-- {
		b[i] = byte(v.lo)
		v = v.shr(8)
	}
	return netip.AddrFrom16(b)
}

func macToU128(m net.HardwareAddr) u128 {
	var v u128
	for _, x := range m {
		v = v.shl(8).or(u128{lo: uint64(x)})
	}
	return v
}

func u128ToMAC(v u128) net.HardwareAddr {
	m := make(net.HardwareAddr, 6)
	for i := 5; i >= 0; i-- {
		m[i] = byte(v.lo)
		v = v.shr(8)
	}
	return m
}

func ipField(name string, ethType of.EthType, bits uint, src bool) field {
	at := func(p *Packet) *netip.Addr {
		if src {
			return &p.Src
		}
		return &p.Dst
	}
	return field{name: name, bits: bits,
		ok:  func(p *Packet) bool { return p.EthType == ethType },
		get: func(p *Packet) u128 { return addrToU128(*at(p)) },
		set: func(p *Packet, v u128) { *at(p) = u128ToAddr(v, bits) }}
}

func portField(name string, proto of.IPProto, src bool) field {
	at := func(p *Packet) *uint16 {
		if src {
			return &p.SrcPort
		}
		return &p.DstPort
	}
	return field{name: name, bits: 16,
		ok:  func(p *Packet) bool { return p.isIP() && p.Proto == proto },
		get: func(p *Packet) u128 { return u128{lo: uint64(*at(p))} },
		set: func(p *Packet, v u128) { *at(p) = uint16(v.lo) }}
}

func macField(name string, src bool) field {
	at := func(p *Packet) *net.HardwareAddr {
		if src {
			return &p.EthSrc
		}
		return &p.EthDst
	}
	return field{name: name, bits: 48, ok: always,
		get: func(p *Packet) u128 { return macToU128(*at(p)) },
		set: func(p *Packet, v u128) { *at(p) = u128ToMAC(v) }}
}

func readOnly(name string, bits uint, ok func(*Packet) bool, get func(p *Packet) uint64) field {
	return field{name: name, bits: bits, readOnly: true, ok: ok,
		get: func(p *Packet) u128 { return u128{lo: get(p)} }}
}

// fieldNamed returns the field an NXM/OXM name (or OVS short name) designates.
func fieldNamed(name string) (field, error) {
	n := strings.ToUpper(name)
	for _, pre := range []string{"NXM_NX_XXREG", "XXREG"} {
		if i, err := strconv.Atoi(strings.TrimPrefix(n, pre)); strings.HasPrefix(n, pre) && err == nil && i >= 0 && i < NumRegs/4 {
			return xxregField("NXM_NX_XXREG"+strconv.Itoa(i), i), nil
		}
	}
	for _, pre := range []string{"NXM_NX_REG", "REG"} {
		if i, err := strconv.Atoi(strings.TrimPrefix(n, pre)); strings.HasPrefix(n, pre) && err == nil && i >= 0 && i < NumRegs {
			return regField("NXM_NX_REG"+strconv.Itoa(i), i), nil
		}
	}
	switch n {
	case "NXM_OF_IP_SRC", "IP_SRC", "NW_SRC":
		return ipField("NXM_OF_IP_SRC", of.EthTypeIP, 32, true), nil
	case "NXM_OF_IP_DST", "IP_DST", "NW_DST":
		return ipField("NXM_OF_IP_DST", of.EthTypeIP, 32, false), nil
	case "NXM_NX_IPV6_SRC", "IPV6_SRC":
		return ipField("NXM_NX_IPV6_SRC", of.EthTypeIPv6, 128, true), nil
	case "NXM_NX_IPV6_DST", "IPV6_DST":
		return ipField("NXM_NX_IPV6_DST", of.EthTypeIPv6, 128, false), nil
	case "NXM_OF_TCP_SRC", "TCP_SRC":
		return portField("NXM_OF_TCP_SRC", of.ProtoTCP, true), nil
	case "NXM_OF_TCP_DST", "TCP_DST":
		return portField("NXM_OF_TCP_DST", of.ProtoTCP, false), nil
	case "NXM_OF_UDP_SRC", "UDP_SRC":
		return portField("NXM_OF_UDP_SRC", of.ProtoUDP, true), nil
	case "NXM_OF_UDP_DST", "UDP_DST":
		return portField("NXM_OF_UDP_DST", of.ProtoUDP, false), nil
	case "OXM_OF_SCTP_SRC", "SCTP_SRC":
		return portField("OXM_OF_SCTP_SRC", of.ProtoSCTP, true), nil
	case "OXM_OF_SCTP_DST", "SCTP_DST":
		return portField("OXM_OF_SCTP_DST", of.ProtoSCTP, false), nil
	case "NXM_OF_ETH_SRC", "ETH_SRC", "DL_SRC":
		return macField("NXM_OF_ETH_SRC", true), nil
	case "NXM_OF_ETH_DST", "ETH_DST", "DL_DST":
		return macField("NXM_OF_ETH_DST", false), nil
	case "NXM_NX_PKT_MARK", "PKT_MARK":
		return field{name: "NXM_NX_PKT_MARK", bits: 32, ok: always,
			get: func(p *Packet) u128 { return u128{lo: uint64(p.PktMark)} },
			set: func(p *Packet, v u128) { p.PktMark = uint32(v.lo) }}, nil
	case "OXM_OF_METADATA", "METADATA":
		return field{name: "OXM_OF_METADATA", bits: 64, ok: always,
			get: func(p *Packet) u128 { return u128{lo: p.Metadata} },
			set: func(p *Packet, v u128) { p.Metadata = v.lo }}, nil
	case "NXM_OF_IN_PORT", "IN_PORT":
		return readOnly("NXM_OF_IN_PORT", 16, always, func(p *Packet) uint64 { return uint64(p.InPort) }), nil
	case "NXM_OF_ETH_TYPE", "ETH_TYPE", "DL_TYPE":
		return readOnly("NXM_OF_ETH_TYPE", 16, always, func(p *Packet) uint64 { return uint64(p.EthType) }), nil
	case "NXM_OF_IP_PROTO", "NW_PROTO", "IP_PROTO":
		return readOnly("NXM_OF_IP_PROTO", 8, (*Packet).isIP, func(p *Packet) uint64 { return uint64(p.Proto) }), nil
	case "NXM_NX_CT_MARK", "CT_MARK":
		return readOnly("NXM_NX_CT_MARK", 32, always, func(p *Packet) uint64 { return uint64(p.CtMark) }), nil
	case "NXM_NX_CT_ZONE", "CT_ZONE":
		return readOnly("NXM_NX_CT_ZONE", 16, always, func(p *Packet) uint64 { return uint64(p.CtZone) }), nil
	}
	return field{}, fmt.Errorf("field %q: %w", name, ErrUnsupported)
}

// subfield is a resolved bit range [start, start+n) of a field.
type subfield struct {
	f        field
	start, n uint
}

func resolve(s of.Subfield) (subfield, error) {
	f, err := fieldNamed(s.Field)
	if err != nil {
		return subfield{}, err
	}
	if s.Whole {
		return subfield{f: f, n: f.bits}, nil
	}
	if s.End < s.Start || uint(s.End) >= f.bits {
		return subfield{}, fmt.Errorf("subfield %s[%d..%d] is outside the field's %d bits", f.name, s.Start, s.End, f.bits)
	}
	return subfield{f: f, start: uint(s.Start), n: uint(s.End-s.Start) + 1}, nil
}

func (s subfield) String() string {
	if s.start == 0 && s.n == s.f.bits {
		return s.f.name + "[]"
	}
	return fmt.Sprintf("%s[%d..%d]", s.f.name, s.start, s.start+s.n-1)
}

// read returns the subfield's bits, shifted down to bit 0.
func (s subfield) read(p *Packet) (u128, error) {
	if !s.f.ok(p) {
		return u128{}, fmt.Errorf("%s: the packet (%v) has no such field", s, *p)
	}
	return s.f.get(p).shr(s.start).and(ones(s.n)), nil
}

// write stores v (bit 0 up) into the subfield.
func (s subfield) write(p *Packet, v u128) error {
	if s.f.readOnly {
		return fmt.Errorf("writing %s: %w", s, ErrUnsupported)
	}
	if !s.f.ok(p) {
		return fmt.Errorf("%s: the packet (%v) has no such field", s, *p)
	}
	mask := ones(s.n).shl(s.start)
	cur := s.f.get(p)
	s.f.set(p, cur.and(mask.not()).or(v.shl(s.start).and(mask)))
	return nil
}
