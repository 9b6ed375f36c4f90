package openflow

import (
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// defaultPriority is OpenFlow's default flow priority; OVS leaves it out when printing flows
// and learn actions.
const defaultPriority = 32768

// Reserved OpenFlow 1.1+ port numbers that OVS prints by name.
const (
	// PortInPort is OFPP_IN_PORT; OVS prints an output to it as "IN_PORT" (OutputInPort).
	PortInPort uint32 = 0xfffffff8
	// PortNormal is OFPP_NORMAL; OVS prints an output to it as "NORMAL" (Normal).
	PortNormal uint32 = 0xfffffffa
	// PortLocal is OFPP_LOCAL, the bridge's internal port; OVS prints it as "LOCAL" and
	// ParseFlow returns it as this number.
	PortLocal uint32 = 0xfffffffe
)

// valueKind says how OVS prints an immediate value of a field (in learn match specs).
type valueKind uint8

const (
	kindHex valueKind = iota
	kindDec
	kindIPv4
	kindMAC
	kindWide // wider than 64 bits: the model cannot hold an immediate value
)

// fieldInfo describes one NXM/OXM field the model may name in a Subfield.
type fieldInfo struct {
	nxm  string // NXM/OXM name OVS prints in subfields, e.g. "NXM_OF_IP_SRC"
	name string // OVS's field name, e.g. "ip_src"; used for whole-field learn values
	bits uint16
	kind valueKind
}

// knownFields lists the fields whose width and value format the parser and canonicaliser
// know, with the names OVS 3.1 prints for them. It is built once per call; the list is small.
func knownFields() []fieldInfo {
	f := []fieldInfo{
		{"NXM_OF_IN_PORT", "in_port", 16, kindDec},
		{"NXM_OF_ETH_DST", "eth_dst", 48, kindMAC},
		{"NXM_OF_ETH_SRC", "eth_src", 48, kindMAC},
		{"NXM_OF_ETH_TYPE", "eth_type", 16, kindHex},
		{"NXM_OF_VLAN_TCI", "vlan_tci", 16, kindHex},
		{"NXM_OF_IP_TOS", "nw_tos", 8, kindDec},
		{"NXM_OF_IP_PROTO", "nw_proto", 8, kindDec},
		{"NXM_OF_IP_SRC", "ip_src", 32, kindIPv4},
		{"NXM_OF_IP_DST", "ip_dst", 32, kindIPv4},
		{"NXM_OF_TCP_SRC", "tcp_src", 16, kindDec},
		{"NXM_OF_TCP_DST", "tcp_dst", 16, kindDec},
		{"NXM_OF_UDP_SRC", "udp_src", 16, kindDec},
		{"NXM_OF_UDP_DST", "udp_dst", 16, kindDec},
		{"OXM_OF_SCTP_SRC", "sctp_src", 16, kindDec},
		{"OXM_OF_SCTP_DST", "sctp_dst", 16, kindDec},
		{"NXM_OF_ICMP_TYPE", "icmp_type", 8, kindDec},
		{"NXM_OF_ICMP_CODE", "icmp_code", 8, kindDec},
		{"NXM_OF_ARP_OP", "arp_op", 16, kindDec},
		{"NXM_OF_ARP_SPA", "arp_spa", 32, kindIPv4},
		{"NXM_OF_ARP_TPA", "arp_tpa", 32, kindIPv4},
		{"NXM_NX_ARP_SHA", "arp_sha", 48, kindMAC},
		{"NXM_NX_ARP_THA", "arp_tha", 48, kindMAC},
		{"NXM_NX_IPV6_SRC", "ipv6_src", 128, kindWide},
		{"NXM_NX_IPV6_DST", "ipv6_dst", 128, kindWide},
		{"NXM_NX_TUN_ID", "tun_id", 64, kindHex},
		{"OXM_OF_METADATA", "metadata", 64, kindHex},
		{"NXM_NX_PKT_MARK", "pkt_mark", 32, kindHex},
		{"NXM_NX_CT_MARK", "ct_mark", 32, kindHex},
		{"NXM_NX_CT_ZONE", "ct_zone", 16, kindHex},
		{"NXM_NX_CT_LABEL", "ct_label", 128, kindWide},
		{"NXM_NX_CT_NW_SRC", "ct_nw_src", 32, kindIPv4},
		{"NXM_NX_CT_NW_DST", "ct_nw_dst", 32, kindIPv4},
		{"NXM_NX_CT_NW_PROTO", "ct_nw_proto", 8, kindDec},
		{"NXM_NX_CT_TP_SRC", "ct_tp_src", 16, kindDec},
		{"NXM_NX_CT_TP_DST", "ct_tp_dst", 16, kindDec},
	}
	for i := 0; i < 16; i++ {
		n := strconv.Itoa(i)
		f = append(f, fieldInfo{"NXM_NX_REG" + n, "reg" + n, 32, kindHex})
	}
	for i := 0; i < 4; i++ {
		n := strconv.Itoa(i)
		f = append(f, fieldInfo{"NXM_NX_XXREG" + n, "xxreg" + n, 128, kindWide})
	}
	return f
}

// fieldAlias maps another spelling OVS accepts for a field to its OVS name.
func fieldAlias(name string) string {
	switch name {
	case "nw_src":
		return "ip_src"
	case "nw_dst":
		return "ip_dst"
	case "dl_src":
		return "eth_src"
	case "dl_dst":
		return "eth_dst"
	case "dl_type":
		return "eth_type"
	case "ip_proto":
		return "nw_proto"
	}
	return name
}

// lookupField finds a field by its NXM/OXM name, its OVS name or an alias (case-insensitive
// for NXM names).
func lookupField(name string) (fieldInfo, bool) {
	name = fieldAlias(name)
	for _, f := range knownFields() {
		if f.name == name || strings.EqualFold(f.nxm, name) {
			return f, true
		}
	}
	return fieldInfo{}, false
}

// formatValue renders v as OVS prints an immediate value of this field.
func (f fieldInfo) formatValue(v uint64) string {
	switch f.kind {
	case kindDec:
		return strconv.FormatUint(v, 10)
	case kindIPv4:
		return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}).String()
	case kindMAC:
		return net.HardwareAddr{byte(v >> 40), byte(v >> 32), byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}.String()
	}
	return cHex(v)
}

// isWhole reports whether s covers all of field f.
func (f fieldInfo) isWhole(s Subfield) bool {
	return s.Whole || (s.Start == 0 && s.End == f.bits-1)
}

// formatLearnMatchValue renders a "field = immediate" learn spec. OVS prints a whole known
// field by its OVS name with a typed value ("ip_dst=10.0.0.1", "tcp_dst=80") and anything
// else as "NXM_NX_REG1[3]=0x1"; it also rejects a hex value for an IP or MAC field, so the
// typed form is required there.
func formatLearnMatchValue(s LearnSpec) string {
	if f, ok := lookupField(s.Dst.Field); ok && f.kind != kindWide && f.isWhole(s.Dst) {
		return f.name + "=" + f.formatValue(s.Value)
	}
	return FormatSubfield(s.Dst) + "=" + cHex(s.Value)
}

// CanonicalFlow returns f in the meaning-preserving normal form in which OVS prints it back,
// so that a model flow and the flow parsed from a dump of it compare equal:
//
//   - CookieMask (a filter-only field) is cleared.
//   - IP prefixes have their host bits cleared; a /0 prefix becomes the zero Prefix (any).
//   - xxreg matches are split into the 32-bit reg matches OVS narrows them to; reg matches
//     are sorted by register, merged per register, and have their value masked; an all-ones
//     mask becomes the zero (exact) mask. The same holds for ct_mark, pkt_mark and set_field.
//   - An empty ct_state match becomes nil, empty MACs and slices become nil.
//   - An empty action list becomes [Drop{}] (both render as "drop").
//   - Output to the reserved IN_PORT, NORMAL and LOCAL ports (OpenFlow 1.0 or 1.1+ numbers)
//     becomes OutputInPort, Normal and Output{PortLocal}; in_port LOCAL becomes PortLocal.
//   - Controller: reason "action" becomes "", max_len 65535 becomes 0.
//   - Subfields use NXM names and Whole for a full-width range; a learn match whose source is
//     its destination drops the source; leading eth_type / nw_proto value specs of a learn
//     action move into Learn.EthType / Learn.IPProto; learn priority 0 stays 0.
//
// CanonicalFlow never modifies f's slices or pointers.
func CanonicalFlow(f Flow) Flow {
	f.CookieMask = 0
	f.Match = canonicalMatch(f.Match)
	f.Actions = canonicalActions(f.Actions, true)
	return f
}

// CanonicalGroup returns g in the normal form in which OVS prints it back: an empty type
// becomes select, selection method "hash" becomes "", empty slices become nil, and bucket
// actions are canonicalised like CanonicalFlow's.
func CanonicalGroup(g Group) Group {
	if g.Type == "" {
		g.Type = GroupTypeSelect
	}
	if g.SelectionMethod == "hash" {
		g.SelectionMethod = ""
	}
	g.HashFields = slices.Clone(nilIfEmpty(g.HashFields))
	if len(g.Buckets) == 0 {
		g.Buckets = nil
		return g
	}
	buckets := make([]Bucket, len(g.Buckets))
	for i, b := range g.Buckets {
		b.Actions = canonicalActions(b.Actions, true)
		buckets[i] = b
	}
	g.Buckets = buckets
	return g
}

func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

func canonicalMasked(m *Masked32) *Masked32 {
	if m == nil {
		return nil
	}
	c := *m
	c.Value, c.Mask = canonicalValueMask(c.Value, c.Mask)
	return &c
}

// canonicalValueMask applies the mask to the value and turns an all-ones mask into zero.
func canonicalValueMask(v, m uint32) (uint32, uint32) {
	if m == ^uint32(0) {
		m = 0
	}
	if m != 0 {
		v &= m
	}
	return v, m
}

func canonicalPrefix(p netip.Prefix) netip.Prefix {
	if !p.IsValid() || p.Bits() == 0 {
		return netip.Prefix{}
	}
	return p.Masked()
}

func canonicalMAC(m net.HardwareAddr) net.HardwareAddr {
	if len(m) == 0 {
		return nil
	}
	return slices.Clone(m)
}

func canonicalPort(p uint32) uint32 {
	if p == 0xfffe {
		return PortLocal
	}
	return p
}

func canonicalMatch(m Match) Match {
	m.InPort = canonicalPort(m.InPort)
	m.Src = canonicalPrefix(m.Src)
	m.Dst = canonicalPrefix(m.Dst)
	if m.CtState != nil && *m.CtState == (CtState{}) {
		m.CtState = nil
	} else if m.CtState != nil {
		c := *m.CtState
		m.CtState = &c
	}
	m.CtMark = canonicalMasked(m.CtMark)
	m.PktMark = canonicalMasked(m.PktMark)
	// OVS keeps a masked tp_src's value masked and prints a full mask as an exact match.
	m.TpSrc, m.TpSrcMask = m.TpSrcMasked()
	if m.TpSrcMask == 0xffff {
		m.TpSrcMask = 0
	}
	m.Regs = canonicalRegs(m.Regs, m.Ext().XXRegs)
	m.SetExtra(canonicalExtra)
	return m
}

// canonicalExtra puts x (a copy of a Match's) in canonical form; XXRegs are in Regs already.
func canonicalExtra(x *MatchExtra) {
	x.EthSrc = canonicalMAC(x.EthSrc)
	x.EthDst = canonicalMAC(x.EthDst)
	x.ARPSHA = canonicalMAC(x.ARPSHA)
	x.NDSLL = canonicalMAC(x.NDSLL)
	x.NDTLL = canonicalMAC(x.NDTLL)
	if x.TCPFlags != nil && *x.TCPFlags == (TCPFlags{}) {
		x.TCPFlags = nil
	} else if x.TCPFlags != nil {
		f := *x.TCPFlags
		x.TCPFlags = &f
	}
	if x.ICMPType != nil {
		v := *x.ICMPType
		x.ICMPType = &v
	}
	if x.ICMPCode != nil {
		v := *x.ICMPCode
		x.ICMPCode = &v
	}
	x.XXRegs = nil
}

// canonicalRegs splits xxregs into regs (xxregN is reg4N..reg4N+3, most significant first),
// merges matches on the same register and sorts them.
func canonicalRegs(regs []RegMatch, xxregs []XXRegMatch) []RegMatch {
	byReg := map[uint8]RegMatch{}
	add := func(r RegMatch) {
		mask := r.Mask
		if mask == 0 {
			mask = ^uint32(0)
		}
		if old, ok := byReg[r.Reg]; ok {
			oldMask := old.Mask
			if oldMask == 0 {
				oldMask = ^uint32(0)
			}
			r.Value = (old.Value & oldMask) | (r.Value & mask)
			mask |= oldMask
		}
		r.Value, r.Mask = canonicalValueMask(r.Value, mask)
		byReg[r.Reg] = r
	}
	for _, r := range regs {
		add(r)
	}
	for _, x := range xxregs {
		mask := x.Mask
		if mask == (Uint128{}) {
			mask = Uint128{^uint64(0), ^uint64(0)}
		}
		words := [4]struct{ v, m uint32 }{
			{uint32(x.Value.Hi >> 32), uint32(mask.Hi >> 32)},
			{uint32(x.Value.Hi), uint32(mask.Hi)},
			{uint32(x.Value.Lo >> 32), uint32(mask.Lo >> 32)},
			{uint32(x.Value.Lo), uint32(mask.Lo)},
		}
		for i, w := range words {
			if w.m != 0 {
				add(RegMatch{Reg: 4*x.XXReg + uint8(i), Value: w.v, Mask: w.m})
			}
		}
	}
	if len(byReg) == 0 {
		return nil
	}
	out := make([]RegMatch, 0, len(byReg))
	for _, r := range byReg {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b RegMatch) int { return int(a.Reg) - int(b.Reg) })
	return out
}

// canonicalActions normalises an action list; emptyIsDrop turns an empty list into [Drop{}]
// (top-level and bucket lists) while an empty ct exec list stays nil.
func canonicalActions(actions []Action, emptyIsDrop bool) []Action {
	if len(actions) == 0 {
		if emptyIsDrop {
			return []Action{Drop{}}
		}
		return nil
	}
	out := make([]Action, len(actions))
	for i, a := range actions {
		out[i] = canonicalAction(a)
	}
	return out
}

func canonicalAction(a Action) Action {
	switch a := a.(type) {
	case CT:
		if !a.HasTable {
			a.Table = 0
		}
		if a.NAT != nil {
			n := *a.NAT
			if n.Kind == NATReply {
				n = NAT{Kind: NATReply}
			}
			if n.keepsAddress() {
				n = NAT{Kind: n.Kind}
			}
			if n.Port == 0 || n.PortMax <= n.Port {
				n.PortMax = 0 // a range of one port prints as that port
			}
			a.NAT = &n
		}
		a.Exec = canonicalActions(a.Exec, false)
		return a
	case SetReg:
		a.Value, a.Mask = canonicalValueMask(a.Value, a.Mask)
		return a
	case SetCtMark:
		a.Value, a.Mask = canonicalValueMask(a.Value, a.Mask)
		return a
	case SetEthDst:
		return SetEthDst{MAC: canonicalMAC(a.MAC)}
	case SetEthSrc:
		return SetEthSrc{MAC: canonicalMAC(a.MAC)}
	case Move:
		return Move{Src: canonicalSubfield(a.Src), Dst: canonicalSubfield(a.Dst)}
	case Learn:
		return canonicalLearn(a)
	case Output:
		switch a.Port {
		case PortInPort, 0xfff8:
			return OutputInPort{}
		case PortNormal, 0xfffa:
			return Normal{}
		}
		return Output{Port: canonicalPort(a.Port)}
	case Controller:
		if a.Reason == "action" {
			a.Reason = ""
		}
		if a.MaxLen == 65535 {
			a.MaxLen = 0
		}
		a.UserData = slices.Clone(nilIfEmpty(a.UserData))
		return a
	}
	return a
}

// canonicalSubfield uses the NXM name of a known field and Whole for a full-width range.
func canonicalSubfield(s Subfield) Subfield {
	if s.Field == "" {
		return Subfield{}
	}
	f, ok := lookupField(s.Field)
	if !ok {
		if s.Whole {
			s.Start, s.End = 0, 0
		}
		return s
	}
	s.Field = f.nxm
	if f.isWhole(s) {
		return Subfield{Field: f.nxm, Whole: true}
	}
	return s
}

func canonicalLearn(l Learn) Learn {
	specs := make([]LearnSpec, 0, len(l.Specs))
	leading := true
	for _, s := range l.Specs {
		s.Dst = canonicalSubfield(s.Dst)
		switch s.Kind {
		case LearnMatch, LearnLoad:
			s.Src = canonicalSubfield(s.Src)
			s.Value = 0
		default:
			s.Src = Subfield{}
		}
		if s.Kind == LearnMatch && s.Src == s.Dst {
			s.Src = Subfield{}
		}
		// OVS prints Learn.EthType and Learn.IPProto exactly like leading value specs on
		// eth_type and nw_proto, so a dump cannot tell them apart: fold such specs in.
		if leading && s.Kind == LearnMatchValue && s.Dst.Whole {
			switch {
			case s.Dst.Field == "NXM_OF_ETH_TYPE" && l.EthType == EthTypeAny && l.IPProto == ProtoAny:
				l.EthType = EthType(s.Value)
				continue
			case s.Dst.Field == "NXM_OF_IP_PROTO" && l.IPProto == ProtoAny:
				l.IPProto = IPProto(s.Value)
				continue
			}
		}
		leading = false
		specs = append(specs, s)
	}
	l.Specs = nilIfEmpty(specs)
	l.ResultDst = canonicalSubfield(l.ResultDst)
	return l
}
