package native

import (
	"fmt"
	"strings"
)

// oxmHeader is a 32-bit NXM/OXM field header: class (16 bits), field (7 bits), has-mask (1 bit)
// and payload length (8 bits).
type oxmHeader uint32

func mkHeader(class uint16, field uint8, size int) oxmHeader {
	return oxmHeader(uint32(class)<<16 | uint32(field)<<9 | uint32(size))
}

// size is the field's width in bytes (the payload of an unmasked header).
func (h oxmHeader) size() int { return int(h & 0xff) }

// masked returns the header of the masked form: has-mask set and the payload doubled.
func (h oxmHeader) masked() oxmHeader { return (h &^ 0xff) | 1<<8 | oxmHeader(2*h.size()) }

// OXM and NXM classes.
const (
	classNXM0    uint16 = 0x0000 // NXM_OF_*
	classNXM1    uint16 = 0x0001 // NXM_NX_*
	classOXM     uint16 = 0x8000 // OXM_OF_* (OpenFlow basic)
	classPktRegs uint16 = 0x8001 // OXM_OF_PKT_REG* (OpenFlow 1.5 packet registers)
)

// Headers of the match fields this package encodes (OpenFlow 1.5 flow matches).
var (
	oxmInPort     = mkHeader(classOXM, 0, 4)
	oxmEthDst     = mkHeader(classOXM, 3, 6)
	oxmEthSrc     = mkHeader(classOXM, 4, 6)
	oxmEthType    = mkHeader(classOXM, 5, 2)
	oxmIPProto    = mkHeader(classOXM, 10, 1)
	oxmIPv4Src    = mkHeader(classOXM, 11, 4)
	oxmIPv4Dst    = mkHeader(classOXM, 12, 4)
	oxmTCPSrc     = mkHeader(classOXM, 13, 2)
	oxmTCPDst     = mkHeader(classOXM, 14, 2)
	oxmUDPSrc     = mkHeader(classOXM, 15, 2)
	oxmUDPDst     = mkHeader(classOXM, 16, 2)
	oxmSCTPSrc    = mkHeader(classOXM, 17, 2)
	oxmSCTPDst    = mkHeader(classOXM, 18, 2)
	oxmICMPv4Type = mkHeader(classOXM, 19, 1)
	oxmICMPv4Code = mkHeader(classOXM, 20, 1)
	oxmARPOp      = mkHeader(classOXM, 21, 2)
	oxmARPSPA     = mkHeader(classOXM, 22, 4)
	oxmARPTPA     = mkHeader(classOXM, 23, 4)
	oxmARPSHA     = mkHeader(classOXM, 24, 6)
	oxmIPv6Src    = mkHeader(classOXM, 26, 16)
	oxmIPv6Dst    = mkHeader(classOXM, 27, 16)
	oxmICMPv6Type = mkHeader(classOXM, 29, 1)
	oxmICMPv6Code = mkHeader(classOXM, 30, 1)
	oxmNDTarget   = mkHeader(classOXM, 31, 16)
	oxmNDSLL      = mkHeader(classOXM, 32, 6)
	oxmNDTLL      = mkHeader(classOXM, 33, 6)
	oxmTCPFlags   = mkHeader(classOXM, 42, 2)
	nxmPktMark    = mkHeader(classNXM1, 33, 4)
	nxmCtState    = mkHeader(classNXM1, 105, 4)
	nxmCtMark     = mkHeader(classNXM1, 107, 4)
)

func oxmXReg(n int) oxmHeader { return mkHeader(classPktRegs, uint8(n), 8) }
func nxmReg(n int) oxmHeader  { return mkHeader(classNXM1, uint8(n), 4) }

// fieldDef is one field that actions and learn specs may name.
type fieldDef struct {
	// nxm is the header Open vSwitch writes in NXM contexts (learn specs); oxm the one it writes
	// in OpenFlow 1.5 contexts (copy-field). They differ for fields OpenFlow standardised.
	nxm, oxm oxmHeader
	bits     int
}

// fieldByName resolves an NXM_OF_*, NXM_NX_* or OXM_OF_* field name (as openflow.Subfield
// spells it).
func fieldByName(name string) (fieldDef, error) {
	if f, ok := namedFields[name]; ok {
		return f, nil
	}
	var n int
	switch {
	case scanIndex(name, "NXM_NX_REG", &n) && n < 16:
		h := nxmReg(n)
		return fieldDef{nxm: h, oxm: h, bits: 32}, nil
	case scanIndex(name, "NXM_NX_XXREG", &n) && n < 4:
		h := mkHeader(classNXM1, uint8(111+n), 16)
		return fieldDef{nxm: h, oxm: h, bits: 128}, nil
	case scanIndex(name, "OXM_OF_PKT_REG", &n) && n < 8:
		h := oxmXReg(n)
		return fieldDef{nxm: h, oxm: h, bits: 64}, nil
	}
	return fieldDef{}, fmt.Errorf("unknown field %q", name)
}

func scanIndex(name, prefix string, n *int) bool {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok || rest == "" || len(rest) > 2 {
		return false
	}
	v := 0
	for _, c := range rest {
		if c < '0' || c > '9' {
			return false
		}
		v = v*10 + int(c-'0')
	}
	*n = v
	return true
}

// namedFields are the fixed fields, under every name Open vSwitch accepts for them.
var namedFields = func() map[string]fieldDef {
	m := map[string]fieldDef{}
	add := func(nxm, oxm oxmHeader, names ...string) {
		for _, n := range names {
			m[n] = fieldDef{nxm: nxm, oxm: oxm, bits: 8 * nxm.size()}
		}
	}
	std := func(class uint16, field uint8, size int, oxmField uint8, names ...string) {
		add(mkHeader(class, field, size), mkHeader(classOXM, oxmField, size), names...)
	}
	std(classNXM0, 1, 6, 3, "NXM_OF_ETH_DST", "OXM_OF_ETH_DST")
	std(classNXM0, 2, 6, 4, "NXM_OF_ETH_SRC", "OXM_OF_ETH_SRC")
	std(classNXM0, 3, 2, 5, "NXM_OF_ETH_TYPE", "OXM_OF_ETH_TYPE")
	std(classNXM0, 6, 1, 10, "NXM_OF_IP_PROTO", "OXM_OF_IP_PROTO")
	std(classNXM0, 7, 4, 11, "NXM_OF_IP_SRC", "OXM_OF_IPV4_SRC")
	std(classNXM0, 8, 4, 12, "NXM_OF_IP_DST", "OXM_OF_IPV4_DST")
	std(classNXM0, 9, 2, 13, "NXM_OF_TCP_SRC", "OXM_OF_TCP_SRC")
	std(classNXM0, 10, 2, 14, "NXM_OF_TCP_DST", "OXM_OF_TCP_DST")
	std(classNXM0, 11, 2, 15, "NXM_OF_UDP_SRC", "OXM_OF_UDP_SRC")
	std(classNXM0, 12, 2, 16, "NXM_OF_UDP_DST", "OXM_OF_UDP_DST")
	std(classNXM0, 13, 1, 19, "NXM_OF_ICMP_TYPE", "OXM_OF_ICMPV4_TYPE")
	std(classNXM0, 14, 1, 20, "NXM_OF_ICMP_CODE", "OXM_OF_ICMPV4_CODE")
	std(classNXM0, 15, 2, 21, "NXM_OF_ARP_OP", "OXM_OF_ARP_OP")
	std(classNXM0, 16, 4, 22, "NXM_OF_ARP_SPA", "OXM_OF_ARP_SPA")
	std(classNXM0, 17, 4, 23, "NXM_OF_ARP_TPA", "OXM_OF_ARP_TPA")
	std(classNXM1, 17, 6, 24, "NXM_NX_ARP_SHA", "OXM_OF_ARP_SHA")
	std(classNXM1, 18, 6, 25, "NXM_NX_ARP_THA", "OXM_OF_ARP_THA")
	std(classNXM1, 19, 16, 26, "NXM_NX_IPV6_SRC", "OXM_OF_IPV6_SRC")
	std(classNXM1, 20, 16, 27, "NXM_NX_IPV6_DST", "OXM_OF_IPV6_DST")
	std(classNXM1, 21, 1, 29, "NXM_NX_ICMPV6_TYPE", "OXM_OF_ICMPV6_TYPE")
	std(classNXM1, 22, 1, 30, "NXM_NX_ICMPV6_CODE", "OXM_OF_ICMPV6_CODE")
	std(classNXM1, 16, 8, 38, "NXM_NX_TUN_ID", "OXM_OF_TUNNEL_ID")
	// SCTP ports have only OpenFlow basic headers.
	add(oxmSCTPSrc, oxmSCTPSrc, "OXM_OF_SCTP_SRC")
	add(oxmSCTPDst, oxmSCTPDst, "OXM_OF_SCTP_DST")
	for _, f := range []struct {
		field uint8
		size  int
		name  string
	}{{33, 4, "NXM_NX_PKT_MARK"}, {105, 4, "NXM_NX_CT_STATE"}, {106, 2, "NXM_NX_CT_ZONE"},
		{107, 4, "NXM_NX_CT_MARK"}, {108, 16, "NXM_NX_CT_LABEL"}} {
		h := mkHeader(classNXM1, f.field, f.size)
		add(h, h, f.name)
	}
	return m
}()

// hashFieldHeaders are the OXM headers of the fields a select group may hash
// (selection_method=hash,fields(...)), by the names ovs-ofctl accepts.
var hashFieldHeaders = map[string]oxmHeader{
	"eth_src": oxmEthSrc, "dl_src": oxmEthSrc,
	"eth_dst": oxmEthDst, "dl_dst": oxmEthDst,
	"eth_type": oxmEthType, "dl_type": oxmEthType,
	"ip_proto": oxmIPProto, "nw_proto": oxmIPProto,
	"ip_src": oxmIPv4Src, "nw_src": oxmIPv4Src,
	"ip_dst": oxmIPv4Dst, "nw_dst": oxmIPv4Dst,
	"ipv6_src": oxmIPv6Src, "ipv6_dst": oxmIPv6Dst,
	"tcp_src": oxmTCPSrc, "tcp_dst": oxmTCPDst,
	"udp_src": oxmUDPSrc, "udp_dst": oxmUDPDst,
	"sctp_src": oxmSCTPSrc, "sctp_dst": oxmSCTPDst,
}
