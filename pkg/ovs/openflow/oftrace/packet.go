package oftrace

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// NumRegs is the number of 32-bit registers (reg0..reg15) a Packet carries; xxregN is
// reg4N..reg4N+3, most significant word first.
const NumRegs = 16

// Packet is a packet as a trace sees it: the headers the typed model can match or rewrite, the
// pipeline metadata (registers, metadata, pkt_mark) and the conntrack fields the last ct action
// left. It is the input of a trace (conntrack fields are then ignored: a packet enters
// untracked) and, in an Outcome, the packet as it left.
type Packet struct {
	// InPort is the OpenFlow port the packet arrived on.
	InPort  uint32
	EthSrc  net.HardwareAddr
	EthDst  net.HardwareAddr
	EthType of.EthType
	// Src and Dst are IPv4 addresses (EthType IP) or IPv6 addresses (EthType IPv6).
	Src, Dst netip.Addr
	Proto    of.IPProto
	// SrcPort and DstPort are the TCP, UDP or SCTP ports.
	SrcPort, DstPort uint16
	// TCPFlags are the TCP header's flags (of.TCPSyn for a connection's first packet).
	TCPFlags of.TCPFlag
	// ICMPType and ICMPCode are the ICMP or ICMPv6 type and code.
	ICMPType, ICMPCode uint8
	// ARPOp, ARPSPA, ARPTPA and ARPSHA are the ARP fields (EthType ARP).
	ARPOp          uint16
	ARPSPA, ARPTPA netip.Addr
	ARPSHA         net.HardwareAddr
	// NDTarget, NDSLL and NDTLL are the fields of an IPv6 neighbour solicitation (ICMPType
	// 135: target, source link-layer address option) or advertisement (136: target, target
	// link-layer address option); a nil option is an absent one, which matches as all-zero.
	NDTarget     netip.Addr
	NDSLL, NDTLL net.HardwareAddr
	Regs         [NumRegs]uint32
	Metadata     uint64
	PktMark      uint32
	// CtState, CtMark and CtZone are what the last ct action set (zero: untracked).
	CtState of.CtStateFlags
	CtMark  uint32
	CtZone  uint16

	// conn is the connection the last ct action associated the packet with (and ctReply its
	// direction): a later ct action in the same zone uses it without a new lookup, as the
	// datapath does, even though NAT changed the headers since.
	conn    *Conn
	ctReply bool
}

// ErrUnsupported is wrapped by every error about a packet, field or action the tracer does not
// model (rather than guessing what Open vSwitch would do).
var ErrUnsupported = errors.New("unsupported by oftrace")

// isIP reports whether the packet has an IPv4 or IPv6 header.
func (p *Packet) isIP() bool { return p.EthType == of.EthTypeIP || p.EthType == of.EthTypeIPv6 }

// hasPorts reports whether the packet has L4 ports.
func (p *Packet) hasPorts() bool {
	return p.isIP() && (p.Proto == of.ProtoTCP || p.Proto == of.ProtoUDP || p.Proto == of.ProtoSCTP)
}

// isICMP reports whether the packet is ICMP of its IP family.
func (p *Packet) isICMP() bool {
	return (p.EthType == of.EthTypeIP && p.Proto == of.ProtoICMP) ||
		(p.EthType == of.EthTypeIPv6 && p.Proto == of.ProtoICMPv6)
}

// validate checks that the packet is internally consistent.
func (p *Packet) validate() error {
	switch p.EthType {
	case of.EthTypeIP, of.EthTypeIPv6:
		want6 := p.EthType == of.EthTypeIPv6
		if !p.Src.IsValid() || !p.Dst.IsValid() || p.Src.Is6() != want6 || p.Dst.Is6() != want6 ||
			(!want6 && (p.Src.Is4In6() || p.Dst.Is4In6())) {
			return fmt.Errorf("packet: eth_type %#x needs Src and Dst of that family, got %v -> %v", uint16(p.EthType), p.Src, p.Dst)
		}
		if p.Proto == of.ProtoAny {
			return errors.New("packet: an IP packet needs Proto")
		}
		if p.hasPorts() && (p.SrcPort == 0 || p.DstPort == 0) {
			return errors.New("packet: a TCP, UDP or SCTP packet needs SrcPort and DstPort")
		}
		if (p.Proto == of.ProtoICMP && want6) || (p.Proto == of.ProtoICMPv6 && !want6) {
			return fmt.Errorf("packet: protocol %d does not belong to eth_type %#x", p.Proto, uint16(p.EthType))
		}
	case of.EthTypeARP:
		if p.Src.IsValid() || p.Dst.IsValid() || p.Proto != of.ProtoAny {
			return errors.New("packet: an ARP packet has no IP header (use ARPSPA/ARPTPA)")
		}
	default:
		if p.Src.IsValid() || p.Dst.IsValid() || p.Proto != of.ProtoAny {
			return fmt.Errorf("packet: eth_type %#x carries no IP header", uint16(p.EthType))
		}
	}
	for _, m := range []net.HardwareAddr{p.EthSrc, p.EthDst, p.ARPSHA, p.NDSLL, p.NDTLL} {
		if len(m) != 0 && len(m) != 6 {
			return fmt.Errorf("packet: MAC %v is not 6 bytes", m)
		}
	}
	return nil
}

// isND reports whether the packet is an IPv6 neighbour solicitation or advertisement (OVS's
// prerequisite of the nd_* fields: ICMPv6 type 135 or 136, code 0).
func (p *Packet) isND() bool {
	return p.EthType == of.EthTypeIPv6 && p.Proto == of.ProtoICMPv6 && p.ICMPCode == 0 &&
		(p.ICMPType == 135 || p.ICMPType == 136)
}

// clone returns a deep copy (MACs are copied).
func (p Packet) clone() Packet {
	p.EthSrc = slices.Clone(p.EthSrc)
	p.EthDst = slices.Clone(p.EthDst)
	p.ARPSHA = slices.Clone(p.ARPSHA)
	p.NDSLL = slices.Clone(p.NDSLL)
	p.NDTLL = slices.Clone(p.NDTLL)
	return p
}

// String renders the packet's headers briefly, e.g. "tcp 10.0.0.1:1234 -> 10.96.0.1:80 in_port=3".
func (p Packet) String() string {
	var s string
	switch {
	case p.hasPorts():
		s = fmt.Sprintf("%s %s -> %s", protoName(p.Proto), netip.AddrPortFrom(p.Src, p.SrcPort), netip.AddrPortFrom(p.Dst, p.DstPort))
	case p.isICMP():
		s = fmt.Sprintf("%s %s -> %s type=%d code=%d", protoName(p.Proto), p.Src, p.Dst, p.ICMPType, p.ICMPCode)
	case p.isIP():
		s = fmt.Sprintf("proto=%d %s -> %s", p.Proto, p.Src, p.Dst)
	case p.EthType == of.EthTypeARP:
		s = fmt.Sprintf("arp op=%d %s -> %s", p.ARPOp, p.ARPSPA, p.ARPTPA)
	default:
		s = fmt.Sprintf("eth_type=%#x", uint16(p.EthType))
	}
	s += fmt.Sprintf(" in_port=%d", p.InPort)
	if p.CtState != 0 {
		s += " ct_state=" + of.FormatCtState(of.CtState{Set: p.CtState})
	}
	if p.CtMark != 0 {
		s += fmt.Sprintf(" ct_mark=%#x", p.CtMark)
	}
	return s
}

func protoName(p of.IPProto) string {
	switch p {
	case of.ProtoTCP:
		return "tcp"
	case of.ProtoUDP:
		return "udp"
	case of.ProtoSCTP:
		return "sctp"
	case of.ProtoICMP:
		return "icmp"
	case of.ProtoICMPv6:
		return "icmp6"
	}
	return fmt.Sprintf("proto=%d", p)
}
