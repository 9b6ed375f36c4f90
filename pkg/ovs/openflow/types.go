// Package openflow is antrea-proxy's typed model of OpenFlow flows and groups, its canonical
// rendering to Open vSwitch's text syntax, a parser for `ovs-ofctl dump-flows` output, and the
// narrow Bridge interface through which everything else installs flows.
//
// The model covers exactly what the agent emits. Rendering is canonical: the same model always
// gives the same text, so whole-pipeline dumps can be compared in golden tests. Dumps for people
// render with Names (a pipeline's table and register field names, FormatFlowNamed), which
// ParseFlowNamed reads back; what is installed and compared as keys stays numeric.
package openflow

import (
	"net"
	"net/netip"
)

// EthType is the Ethernet type a flow matches; zero matches any.
type EthType uint16

const (
	EthTypeAny  EthType = 0
	EthTypeIP   EthType = 0x0800
	EthTypeIPv6 EthType = 0x86dd
	EthTypeARP  EthType = 0x0806
)

// IPProto is an IP protocol number; zero matches any.
type IPProto uint8

const (
	ProtoAny    IPProto = 0
	ProtoICMP   IPProto = 1
	ProtoTCP    IPProto = 6
	ProtoUDP    IPProto = 17
	ProtoICMPv6 IPProto = 58
	ProtoSCTP   IPProto = 132
)

// Masked32 is a 32-bit value with a mask. A zero Mask means an exact match (all ones).
type Masked32 struct {
	Value uint32
	Mask  uint32
}

// Uint128 is a 128-bit value, used for xxreg matches.
type Uint128 struct {
	Hi, Lo uint64
}

// RegMatch matches the 32-bit register regN under a mask (zero Mask = exact).
type RegMatch struct {
	Reg   uint8
	Value uint32
	Mask  uint32
}

// XXRegMatch matches the 128-bit register xxregN under a mask (zero Mask = exact).
type XXRegMatch struct {
	XXReg uint8
	Value Uint128
	Mask  Uint128
}

// CtStateFlags is a set of conntrack state bits.
type CtStateFlags uint8

const (
	CtNew CtStateFlags = 1 << iota
	CtEst
	CtRel
	CtRpl
	CtInv
	CtTrk
	CtSNAT
	CtDNAT
)

// CtState matches conntrack state: every bit in Set must be set, every bit in Unset clear.
type CtState struct {
	Set, Unset CtStateFlags
}

// Match is what a flow matches. Zero values mean "any".
//
// The fields few flows match (Ethernet addresses, ARP, neighbour discovery, ICMP, TCP flags
// and xxregs) are in Extra, so that a flow without them (every Service flow) is small: a
// Service's flows are most of what the agent keeps at scale. A Match is a value, but Extra is
// shared by its copies: change a copy's Extra only by giving it its own (SetExtra).
type Match struct {
	InPort  uint32 // OpenFlow port number; 0 matches any port.
	EthType EthType
	IPProto IPProto // requires EthType IP or IPv6.
	TpSrc   uint16  // 0 matches any (unless TpSrcMask is set); requires IPProto TCP, UDP or SCTP.
	// TpSrcMask, when neither 0 nor 0xffff, makes TpSrc a masked match (tp_src=0x8000/0x8000):
	// the bits of the mask must equal TpSrc's, which may then be 0.
	TpSrcMask uint16
	TpDst     uint16
	// Src and Dst are IPv4 or IPv6 prefixes, according to EthType. Invalid (zero) means any.
	Src, Dst netip.Prefix
	CtState  *CtState
	CtMark   *Masked32
	PktMark  *Masked32
	Regs     []RegMatch
	// Extra holds the rarely matched fields; nil matches any of them.
	Extra *MatchExtra
}

// MatchExtra are the fields of a Match that few flows match. Zero values mean "any".
type MatchExtra struct {
	EthSrc net.HardwareAddr
	EthDst net.HardwareAddr
	// ARPTPA matches the target protocol address of an ARP packet (EthType ARP).
	ARPTPA netip.Addr
	ARPOp  uint16 // 0 matches any.
	// ARPSPA and ARPSHA match the sender protocol and hardware addresses of an ARP packet
	// (EthType ARP).
	ARPSPA netip.Addr
	ARPSHA net.HardwareAddr
	// NDTarget matches the target address of an IPv6 neighbour solicitation or advertisement
	// (IPProto ICMPv6, ICMPType 135 or 136, ICMPCode 0 or any); NDSLL the source link-layer address
	// option of a solicitation (ICMPType 135), NDTLL the target link-layer address option of
	// an advertisement (136). An all-zero NDSLL or NDTLL matches a message without the option.
	NDTarget     netip.Addr
	NDSLL, NDTLL net.HardwareAddr
	// ICMPType and ICMPCode match ICMP or ICMPv6 type and code (nil matches any); they require
	// IPProto ICMP (IPv4) or ICMPv6 (IPv6).
	ICMPType *uint8
	ICMPCode *uint8
	// TCPFlags, when not nil, matches TCP header flags (IPProto TCP).
	TCPFlags *TCPFlags
	XXRegs   []XXRegMatch
}

// Ext returns m's extra fields: a copy of *m.Extra, the zero value when it is nil.
func (m *Match) Ext() MatchExtra {
	if m.Extra == nil {
		return MatchExtra{}
	}
	return *m.Extra
}

// SetExtra gives m its own copy of its extra fields with f applied (Extra nil when f leaves
// them all zero): m's copies, which share the Extra m had, are left as they were.
func (m *Match) SetExtra(f func(*MatchExtra)) {
	x := m.Ext()
	f(&x)
	if x.IsZero() {
		m.Extra = nil
		return
	}
	m.Extra = &x
}

// IsZero reports whether x matches any packet (every field zero or empty).
func (x *MatchExtra) IsZero() bool {
	return len(x.EthSrc) == 0 && len(x.EthDst) == 0 && !x.ARPTPA.IsValid() && x.ARPOp == 0 && !x.ARPSPA.IsValid() &&
		len(x.ARPSHA) == 0 && !x.NDTarget.IsValid() && len(x.NDSLL) == 0 && len(x.NDTLL) == 0 && x.ICMPType == nil &&
		x.ICMPCode == nil && x.TCPFlags == nil && len(x.XXRegs) == 0
}

// Flow is one OpenFlow flow entry.
type Flow struct {
	Table    uint8
	Priority uint16
	Cookie   uint64
	// CookieMask is used only by non-strict deletes and dumps; a zero mask with a non-zero
	// Cookie means an exact cookie.
	CookieMask  uint64
	IdleTimeout uint16
	HardTimeout uint16
	Match       Match
	Actions     []Action
}

// Bucket is one bucket of a select group.
type Bucket struct {
	ID      uint32
	Weight  uint16
	Actions []Action
}

// GroupType is an OpenFlow group type; only select is used today.
type GroupType string

const GroupTypeSelect GroupType = "select"

// Group is an OpenFlow group. Selection is always the "hash" method over HashFields.
type Group struct {
	ID         uint32
	Type       GroupType
	HashFields []string // e.g. "ip_src", "ip_dst", "tcp_dst", "tcp_src"
	Buckets    []Bucket
	// SelectionMethod is the select group's selection method. Empty means "hash", which is
	// what the agent uses; ParseGroup returns "hash" as empty, and returns "default" for a
	// select group that OVS printed without any selection_method (FormatGroup then omits it).
	SelectionMethod string
	// SelectionParam is the selection_method_param (a hash basis); zero is omitted.
	SelectionParam uint64
}

// tpSrcMasked reports whether m matches tp_src under a mask.
func (m *Match) tpSrcMasked() bool { return m.TpSrcMask != 0 && m.TpSrcMask != 0xffff }

// MatchesTpSrc reports whether m matches on tp_src at all (exactly or masked).
func (m *Match) MatchesTpSrc() bool { return m.TpSrc != 0 || m.tpSrcMasked() }

// TpSrcMasked returns m's tp_src value and mask: (0, 0) when it matches any, mask 0xffff when
// it matches exactly.
func (m *Match) TpSrcMasked() (value, mask uint16) {
	switch {
	case m.tpSrcMasked():
		return m.TpSrc & m.TpSrcMask, m.TpSrcMask
	case m.TpSrc != 0:
		return m.TpSrc, 0xffff
	}
	return 0, 0
}

// TCPFlag is one bit of the TCP header's flags, as OVS's tcp_flags field numbers them.
type TCPFlag uint16

// TCP flags.
const (
	TCPFin TCPFlag = 1 << iota
	TCPSyn
	TCPRst
	TCPPsh
	TCPAck
	TCPUrg
	TCPEce
	TCPCwr
	TCPNs
)

// TCPFlags matches TCP header flags (tcp_flags=+syn-ack): every flag in Set must be set and
// every flag in Unset clear. It requires IPProto TCP.
type TCPFlags struct {
	Set, Unset TCPFlag
}
