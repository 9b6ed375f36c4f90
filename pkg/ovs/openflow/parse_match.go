package openflow

import (
	"fmt"
	"math/bits"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// protocolShorthands maps OVS's protocol keywords to the eth type and IP protocol they imply.
func protocolShorthand(kw string) (EthType, IPProto, bool) {
	switch kw {
	case "ip":
		return EthTypeIP, ProtoAny, true
	case "ipv6":
		return EthTypeIPv6, ProtoAny, true
	case "tcp":
		return EthTypeIP, ProtoTCP, true
	case "tcp6":
		return EthTypeIPv6, ProtoTCP, true
	case "udp":
		return EthTypeIP, ProtoUDP, true
	case "udp6":
		return EthTypeIPv6, ProtoUDP, true
	case "sctp":
		return EthTypeIP, ProtoSCTP, true
	case "sctp6":
		return EthTypeIPv6, ProtoSCTP, true
	case "icmp":
		return EthTypeIP, ProtoICMP, true
	case "icmp6":
		return EthTypeIPv6, ProtoICMPv6, true
	case "arp":
		return EthTypeARP, ProtoAny, true
	}
	return 0, 0, false
}

// parseMatchToken parses one match token (key=value, or a bare protocol keyword) into m.
func parseMatchToken(m *Match, key, val string, hasVal bool, tok string) error {
	if !hasVal {
		et, proto, ok := protocolShorthand(key)
		if !ok {
			return tokErr(tok, "unknown match field or keyword")
		}
		m.EthType, m.IPProto = et, proto
		return nil
	}
	var err error
	switch key {
	case "in_port":
		m.InPort, err = parsePort(val)
	case "dl_type", "eth_type":
		var v uint16
		v, err = parseUint16(val)
		m.EthType = EthType(v)
	case "nw_proto", "ip_proto":
		var v uint8
		v, err = parseUint8(val)
		m.IPProto = IPProto(v)
	case "nw_src", "ip_src":
		m.Src, err = parsePrefix(val, false)
	case "nw_dst", "ip_dst":
		m.Dst, err = parsePrefix(val, false)
	case "ipv6_src":
		m.Src, err = parsePrefix(val, true)
	case "ipv6_dst":
		m.Dst, err = parsePrefix(val, true)
	case "tp_src", "tcp_src", "udp_src", "sctp_src":
		v, mask, masked := strings.Cut(val, "/")
		if m.TpSrc, err = parseUint16(v); err == nil && masked {
			m.TpSrcMask, err = parseUint16(mask)
			m.TpSrc &= m.TpSrcMask
			if m.TpSrcMask == 0xffff {
				m.TpSrcMask = 0
			}
		}
	case "tp_dst", "tcp_dst", "udp_dst", "sctp_dst":
		m.TpDst, err = parseUint16(val)
	case "ct_state":
		var s CtState
		s, err = parseCtState(val)
		m.CtState = &s
	case "ct_mark":
		var v Masked32
		v, err = parseMasked32(val)
		m.CtMark = &v
	case "pkt_mark":
		var v Masked32
		v, err = parseMasked32(val)
		m.PktMark = &v
	default:
		var ok bool
		if ok, err = parseExtraToken(m, key, val); !ok {
			return parseRegToken(m, key, val, tok)
		}
	}
	if err != nil {
		return tokErr(tok, "%v", err)
	}
	return nil
}

// parseExtraToken parses a match token of a rarely matched field (Match.Extra: Ethernet
// addresses, ARP, ND, ICMP type and code, TCP flags) into m; ok is false for another key, and
// m is then unchanged.
func parseExtraToken(m *Match, key, val string) (ok bool, err error) {
	// ext returns m's extra fields, which parsing gives m alone.
	ext := func() *MatchExtra {
		if m.Extra == nil {
			m.Extra = &MatchExtra{}
		}
		return m.Extra
	}
	switch key {
	case "dl_src", "eth_src":
		ext().EthSrc, err = parseMAC(val)
	case "dl_dst", "eth_dst":
		ext().EthDst, err = parseMAC(val)
	case "arp_tpa":
		var p netip.Prefix
		p, err = parsePrefix(val, false)
		if err == nil && p.Bits() != 32 {
			err = fmt.Errorf("only an exact arp_tpa is supported")
		}
		ext().ARPTPA = p.Addr()
	case "arp_op":
		ext().ARPOp, err = parseUint16(val)
	case "arp_spa":
		ext().ARPSPA, err = parseExactAddr(val, false, key)
	case "arp_sha":
		ext().ARPSHA, err = parseMAC(val)
	case "nd_target":
		ext().NDTarget, err = parseExactAddr(val, true, key)
	case "nd_sll":
		ext().NDSLL, err = parseMAC(val)
	case "nd_tll":
		ext().NDTLL, err = parseMAC(val)
	case "icmp_type", "icmpv6_type":
		var v uint8
		v, err = parseUint8(val)
		ext().ICMPType = &v
	case "icmp_code", "icmpv6_code":
		var v uint8
		v, err = parseUint8(val)
		ext().ICMPCode = &v
	case "tcp_flags":
		var f TCPFlags
		f, err = parseTCPFlags(val)
		ext().TCPFlags = &f
	default:
		return false, nil
	}
	return true, err
}

// parseRegToken parses regN=... and xxregN=... matches.
func parseRegToken(m *Match, key, val, tok string) error {
	switch {
	case strings.HasPrefix(key, "xxreg"):
		n, err := strconv.ParseUint(key[len("xxreg"):], 10, 8)
		if err != nil || n > 3 {
			return tokErr(tok, "unknown match field")
		}
		v, mask, err := parseMasked128(val)
		if err != nil {
			return tokErr(tok, "%v", err)
		}
		if m.Extra == nil {
			m.Extra = &MatchExtra{}
		}
		m.Extra.XXRegs = append(m.Extra.XXRegs, XXRegMatch{XXReg: uint8(n), Value: v, Mask: mask})
		return nil
	case strings.HasPrefix(key, "reg"):
		n, err := strconv.ParseUint(key[len("reg"):], 10, 8)
		if err != nil || n > 15 {
			return tokErr(tok, "unknown match field")
		}
		v, err := parseMasked32(val)
		if err != nil {
			return tokErr(tok, "%v", err)
		}
		m.Regs = append(m.Regs, RegMatch{Reg: uint8(n), Value: v.Value, Mask: v.Mask})
		return nil
	}
	return tokErr(tok, "unknown match field")
}

// parsePort parses a port number or one of the reserved port names OVS prints.
func parsePort(s string) (uint32, error) {
	switch s {
	case "LOCAL":
		return PortLocal, nil
	case "IN_PORT":
		return PortInPort, nil
	case "NORMAL":
		return PortNormal, nil
	}
	return parseUint32(s)
}

func parseMAC(s string) (net.HardwareAddr, error) {
	if strings.Contains(s, "/") {
		return nil, fmt.Errorf("masked MAC addresses are not supported")
	}
	mac, err := net.ParseMAC(s)
	if err != nil || len(mac) != 6 {
		return nil, fmt.Errorf("invalid MAC address %q", s)
	}
	return mac, nil
}

// parsePrefix parses an address with an optional /len or /netmask, as OVS prints IPv4 and IPv6
// matches. A non-contiguous netmask is an error because the model holds only prefixes.
func parsePrefix(s string, v6 bool) (netip.Prefix, error) {
	addrStr, maskStr, masked := strings.Cut(s, "/")
	addr, err := netip.ParseAddr(addrStr)
	if err != nil || addr.Is6() != v6 || addr.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("invalid %s address %q", ipFamily(v6), addrStr)
	}
	bitsLen := addr.BitLen()
	if masked {
		if n, err := strconv.Atoi(maskStr); err == nil {
			bitsLen = n
		} else {
			mask, err := netip.ParseAddr(maskStr)
			if err != nil || mask.Is6() != v6 {
				return netip.Prefix{}, fmt.Errorf("invalid %s mask %q", ipFamily(v6), maskStr)
			}
			if bitsLen, err = maskLen(mask.AsSlice()); err != nil {
				return netip.Prefix{}, fmt.Errorf("mask %q: %v", maskStr, err)
			}
		}
	}
	p, err := addr.Prefix(bitsLen)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("invalid prefix length in %q", s)
	}
	return p, nil
}

// parseExactAddr parses an address field the model matches only exactly (key names it).
func parseExactAddr(s string, v6 bool, key string) (netip.Addr, error) {
	p, err := parsePrefix(s, v6)
	if err != nil {
		return netip.Addr{}, err
	}
	if p.Bits() != p.Addr().BitLen() {
		return netip.Addr{}, fmt.Errorf("only an exact %s is supported", key)
	}
	return p.Addr(), nil
}

func ipFamily(v6 bool) string {
	if v6 {
		return "IPv6"
	}
	return "IPv4"
}

// maskLen returns the prefix length of a contiguous netmask.
func maskLen(mask []byte) (int, error) {
	n, seenZero := 0, false
	for _, b := range mask {
		ones := bits.LeadingZeros8(^b)
		if seenZero && b != 0 || ones < 8 && b != byte(0xff<<(8-ones)) {
			return 0, fmt.Errorf("non-contiguous netmask is not supported")
		}
		if ones < 8 {
			seenZero = true
		}
		n += ones
	}
	return n, nil
}

// parseMasked32 parses "V" or "V/M"; an all-ones mask is returned as zero (exact).
func parseMasked32(s string) (Masked32, error) {
	vs, ms, masked := strings.Cut(s, "/")
	v, err := parseUint32(vs)
	if err != nil {
		return Masked32{}, err
	}
	var m uint32
	if masked {
		if m, err = parseUint32(ms); err != nil {
			return Masked32{}, err
		}
		if m == ^uint32(0) {
			m = 0
		}
	}
	return Masked32{Value: v, Mask: m}, nil
}

func parseUint128(s string) (Uint128, error) {
	hex, ok := strings.CutPrefix(s, "0x")
	if !ok {
		v, err := parseUint(s, 64)
		return Uint128{Lo: v}, err
	}
	if hex == "" || len(hex) > 32 {
		return Uint128{}, fmt.Errorf("invalid 128-bit number %q", s)
	}
	var v Uint128
	if len(hex) > 16 {
		hi, err := strconv.ParseUint(hex[:len(hex)-16], 16, 64)
		if err != nil {
			return Uint128{}, fmt.Errorf("invalid 128-bit number %q", s)
		}
		v.Hi, hex = hi, hex[len(hex)-16:]
	}
	lo, err := strconv.ParseUint(hex, 16, 64)
	if err != nil {
		return Uint128{}, fmt.Errorf("invalid 128-bit number %q", s)
	}
	v.Lo = lo
	return v, nil
}

func parseMasked128(s string) (Uint128, Uint128, error) {
	vs, ms, masked := strings.Cut(s, "/")
	v, err := parseUint128(vs)
	if err != nil || !masked {
		return v, Uint128{}, err
	}
	m, err := parseUint128(ms)
	if m == (Uint128{^uint64(0), ^uint64(0)}) {
		m = Uint128{}
	}
	return v, m, err
}

// parseCtState parses the forms OVS prints: "+new-est+trk", "new|trk" (every flag specified:
// the listed ones set, the rest clear), "0" (every flag clear) and hex "0x21/0x3f".
func parseCtState(s string) (CtState, error) {
	var all CtStateFlags
	for _, n := range ctStateNames {
		all |= n.flag
	}
	switch {
	case s == "":
		return CtState{}, fmt.Errorf("empty ct_state")
	case s[0] == '+' || s[0] == '-':
		set, unset, err := parseSignedFlags(s, "ct_state", ctStateNames)
		return CtState{Set: set, Unset: unset}, err
	case s[0] >= '0' && s[0] <= '9':
		v, err := parseMasked32(s)
		if err != nil {
			return CtState{}, err
		}
		mask := v.Mask
		if mask == 0 {
			mask = ^uint32(0)
		}
		if mask&^uint32(all) != 0 && v.Mask != 0 || v.Value&^uint32(all) != 0 {
			return CtState{}, fmt.Errorf("ct_state %q has unknown flags", s)
		}
		return CtState{Set: CtStateFlags(v.Value & mask), Unset: all &^ CtStateFlags(v.Value) & CtStateFlags(mask)}, nil
	default:
		var set CtStateFlags
		for _, name := range strings.Split(s, "|") {
			f, err := flagNamed(ctStateNames, "ct_state", name)
			if err != nil {
				return CtState{}, err
			}
			set |= f
		}
		return CtState{Set: set, Unset: all &^ set}, nil
	}
}

// parseTCPFlags parses a tcp_flags match in OVS's flag form ("+syn-ack").
func parseTCPFlags(s string) (TCPFlags, error) {
	if s == "" || (s[0] != '+' && s[0] != '-') {
		return TCPFlags{}, fmt.Errorf("unsupported tcp_flags %q (only the +flag-flag form)", s)
	}
	set, unset, err := parseSignedFlags(s, "tcp_flags", tcpFlagNames)
	return TCPFlags{Set: set, Unset: unset}, err
}

// parseSignedFlags parses "+name-name..." (what names the field in errors) into the flags to
// be set and those to be clear.
func parseSignedFlags[F ~uint8 | ~uint16 | ~uint32](s, what string, names []flagName[F]) (set, unset F, err error) {
	for rest := s; rest != ""; {
		sign := rest[0]
		if sign != '+' && sign != '-' {
			return 0, 0, fmt.Errorf("invalid %s %q", what, s)
		}
		end := strings.IndexAny(rest[1:], "+-")
		if end < 0 {
			end = len(rest) - 1
		}
		f, err := flagNamed(names, what, rest[1:end+1])
		if err != nil {
			return 0, 0, err
		}
		if sign == '+' {
			set |= f
		} else {
			unset |= f
		}
		rest = rest[end+1:]
	}
	return set, unset, nil
}

// flagNamed is the flag of names called name (what names the field in errors).
func flagNamed[F ~uint8 | ~uint16 | ~uint32](names []flagName[F], what, name string) (F, error) {
	i := slices.IndexFunc(names, func(n flagName[F]) bool { return n.name == name })
	if i < 0 {
		return 0, fmt.Errorf("unknown %s flag %q", what, name)
	}
	return names[i].flag, nil
}
