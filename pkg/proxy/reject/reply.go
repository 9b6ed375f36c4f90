package reject

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/antrea-proxy/antrea-proxy/pkg/netutil/packet"
)

// Kind is what a reply is.
type Kind int

const (
	// KindNone means the packet gets no reply.
	KindNone Kind = iota
	// KindTCPReset is a TCP RST (answering TCP).
	KindTCPReset
	// KindICMPv4PortUnreachable is an ICMP destination unreachable, port unreachable (type 3,
	// code 3), answering UDP or SCTP over IPv4.
	KindICMPv4PortUnreachable
	// KindICMPv6PortUnreachable is an ICMPv6 destination unreachable, port unreachable (type 1,
	// code 4), answering UDP or SCTP over IPv6.
	KindICMPv6PortUnreachable
)

func (k Kind) String() string {
	switch k {
	case KindTCPReset:
		return "tcp-reset"
	case KindICMPv4PortUnreachable:
		return "icmp-port-unreachable"
	case KindICMPv6PortUnreachable:
		return "icmp6-port-unreachable"
	}
	return "none"
}

// ErrNoReply wraps the reason a packet gets no reply: it is not a packet one may answer with
// an error (an ICMP message, a TCP reset, a non-first fragment, a multicast or broadcast
// address), or it is not a well-formed Ethernet/IP/L4 packet.
var ErrNoReply = errors.New("no reply")

func noReply(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrNoReply, fmt.Sprintf(format, args...))
}

// Bounds on the original packet quoted in ICMP errors: an ICMPv4 error fits in 576 bytes
// (RFC 1812 4.3.2.3), an ICMPv6 error in the IPv6 minimum MTU of 1280 (RFC 4443 2.4).
const (
	maxQuoteV4 = 576 - 20 - 8
	maxQuoteV6 = 1280 - 40 - 8
	replyTTL   = 64
)

// BuildReply builds the frame that rejects frame, an Ethernet frame sent to a Service with
// no endpoints, possibly truncated: a TCP RST for TCP, an ICMP or ICMPv6 port unreachable for
// UDP and SCTP. The reply goes back the way the frame came: Ethernet and IP addresses and L4
// ports swapped. Only TCP, UDP and SCTP right after the IPv4 header, or after the IPv6
// header and its extension headers (packet.SkipExtensions), are answered; a frame with an
// 802.1Q tag is not. Errors wrap ErrNoReply.
func BuildReply(frame []byte) ([]byte, Kind, error) {
	eth, rest, err := packet.ParseEthernet(frame)
	if err != nil {
		return nil, KindNone, noReply("not an Ethernet frame")
	}
	if packet.IsGroup(eth.Src) || packet.IsGroup(eth.Dst) {
		return nil, KindNone, noReply("multicast or broadcast Ethernet address")
	}
	r := reply{eth: packet.Ethernet{Dst: eth.Src, Src: eth.Dst, EtherType: eth.EtherType}}
	switch eth.EtherType {
	case packet.EtherTypeIPv4:
		ip, err := packet.ParseIPv4(rest)
		if err != nil {
			return nil, KindNone, noReply("%v", err)
		}
		r.ip4, r.orig = &ip, rest[:len(ip.Header)+len(ip.Payload)]
		return r.replyIPv4()
	case packet.EtherTypeIPv6:
		ip, err := packet.ParseIPv6(rest)
		if err != nil {
			return nil, KindNone, noReply("%v", err)
		}
		r.ip6, r.orig = &ip, rest[:len(ip.Header)+len(ip.Payload)]
		return r.replyIPv6()
	}
	return nil, KindNone, noReply("EtherType 0x%04x", eth.EtherType)
}

// reply is what a reply is built from.
type reply struct {
	eth  packet.Ethernet // the reply's Ethernet header
	ip4  *packet.IPv4    // the original IPv4 header, or nil
	ip6  *packet.IPv6    // the original IPv6 header, or nil
	orig []byte          // the original IP packet as captured, without Ethernet padding
}

// unicastPair checks that both addresses may appear in an error exchange. IPv4-mapped IPv6
// addresses count as the IPv4 addresses they map.
func unicastPair(src, dst netip.Addr) error {
	src, dst = src.Unmap(), dst.Unmap()
	bcast := netip.AddrFrom4([4]byte{255, 255, 255, 255})
	switch {
	case src.IsUnspecified() || src.IsMulticast() || src.IsLoopback() || src == bcast:
		return noReply("source address %s", src)
	case dst.IsUnspecified() || dst.IsMulticast() || dst == bcast:
		return noReply("destination address %s", dst)
	}
	return nil
}

func (r *reply) replyIPv4() ([]byte, Kind, error) {
	ip := r.ip4
	if err := unicastPair(netip.AddrFrom4(ip.Src), netip.AddrFrom4(ip.Dst)); err != nil {
		return nil, KindNone, err
	}
	if ip.IsFragment() {
		return nil, KindNone, noReply("IPv4 fragment (offset %d)", ip.FragOffset*8)
	}
	declared := int(ip.Length) - len(ip.Header)
	return r.answer(ip.Protocol, ip.Payload, 0, declared)
}

func (r *reply) replyIPv6() ([]byte, Kind, error) {
	ip := r.ip6
	if err := unicastPair(netip.AddrFrom16(ip.Src), netip.AddrFrom16(ip.Dst)); err != nil {
		return nil, KindNone, err
	}
	proto, off, err := packet.SkipExtensions(ip.NextHeader, ip.Payload)
	if err != nil {
		return nil, KindNone, noReply("%v", err)
	}
	return r.answer(proto, ip.Payload, off, int(ip.Length)) // payload length, extension headers included
}

// answer replies to the L4 header of protocol proto at offset off in ipPayload, the captured
// IP payload whose length the IP header declares as declared.
func (r *reply) answer(proto uint8, ipPayload []byte, off, declared int) ([]byte, Kind, error) {
	l4 := ipPayload[off:]
	var err error
	switch proto {
	case packet.ProtoTCP:
		var seg packet.TCP
		if seg, err = packet.ParseTCP(l4); err == nil {
			return r.tcpReset(&seg, declared-off)
		}
	case packet.ProtoUDP:
		if _, err = packet.ParseUDP(l4); err == nil {
			return r.portUnreachable()
		}
	case packet.ProtoSCTP:
		if _, err = packet.ParseSCTP(l4); err == nil {
			return r.portUnreachable()
		}
	default:
		return nil, KindNone, noReply("IP protocol %d has no transport header to answer", proto)
	}
	return nil, KindNone, noReply("%v", err)
}

// tcpReset answers seg as RFC 9293 3.10.7.1 says for a closed port: a segment with ACK gets
// <SEQ=SEG.ACK><CTL=RST>, one without gets <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>.
// declared is the segment's length from the IP header, so that SEG.LEN is right for a
// truncated capture.
func (r *reply) tcpReset(seg *packet.TCP, declared int) ([]byte, Kind, error) {
	if seg.Flags&packet.TCPRst != 0 {
		return nil, KindNone, noReply("TCP segment is a reset")
	}
	rst := packet.TCP{SrcPort: seg.DstPort, DstPort: seg.SrcPort, Flags: packet.TCPRst}
	if seg.Flags&packet.TCPAck != 0 {
		rst.Seq = seg.Ack
	} else {
		dataLen := declared - len(seg.Header)
		if dataLen < 0 || declared == 0 {
			dataLen = len(seg.Payload)
		}
		segLen := uint32(dataLen)
		if seg.Flags&packet.TCPSyn != 0 {
			segLen++
		}
		if seg.Flags&packet.TCPFin != 0 {
			segLen++
		}
		rst.Flags |= packet.TCPAck
		rst.Ack = seg.Seq + segLen
	}
	b := r.headers(packet.ProtoTCP, packet.TCPHeaderLen)
	start := len(b)
	b = packet.AppendTCP(b, rst)
	src, dst := r.addrs()
	packet.SetTCPChecksum(b[start:], src, dst)
	return packet.AppendPadding(b), KindTCPReset, nil
}

// portUnreachable builds the ICMP or ICMPv6 port unreachable quoting the original packet.
func (r *reply) portUnreachable() ([]byte, Kind, error) {
	if r.ip6 == nil {
		quote := r.orig[:min(len(r.orig), maxQuoteV4)]
		b := r.headers(packet.ProtoICMPv4, 8+len(quote))
		start := len(b)
		b = packet.AppendICMP(b, packet.ICMPv4DestinationUnreachable, packet.ICMPv4PortUnreachable, 0)
		b = append(b, quote...)
		packet.SetICMPv4Checksum(b[start:])
		return packet.AppendPadding(b), KindICMPv4PortUnreachable, nil
	}
	quote := r.orig[:min(len(r.orig), maxQuoteV6)]
	b := r.headers(packet.ProtoICMPv6, 8+len(quote))
	start := len(b)
	b = packet.AppendICMP(b, packet.ICMPv6DestinationUnreachable, packet.ICMPv6PortUnreachable, 0)
	b = append(b, quote...)
	src, dst := r.addrs()
	packet.SetICMPv6Checksum(b[start:], src, dst)
	return packet.AppendPadding(b), KindICMPv6PortUnreachable, nil
}

// headers allocates the reply frame and appends its Ethernet and IP headers, the original's
// addresses swapped, for an L4 message of protocol proto and l4Len bytes.
func (r *reply) headers(proto uint8, l4Len int) []byte {
	n := packet.EthernetHeaderLen + packet.IPv4HeaderLen + l4Len
	if r.ip6 != nil {
		n += packet.IPv6HeaderLen - packet.IPv4HeaderLen
	}
	b := packet.AppendEthernet(make([]byte, 0, max(n, packet.MinFrameLen)), r.eth)
	if r.ip6 != nil {
		return packet.AppendIPv6(b, packet.IPv6{NextHeader: proto, HopLimit: replyTTL, Src: r.ip6.Dst, Dst: r.ip6.Src}, l4Len)
	}
	return packet.AppendIPv4(b, packet.IPv4{TTL: replyTTL, Protocol: proto, Src: r.ip4.Dst, Dst: r.ip4.Src}, l4Len)
}

// addrs returns the reply's source and destination IP addresses.
func (r *reply) addrs() (src, dst []byte) {
	if r.ip6 != nil {
		return r.ip6.Dst[:], r.ip6.Src[:]
	}
	return r.ip4.Dst[:], r.ip4.Src[:]
}

// sourceOf returns the IP source address of frame, an Ethernet frame BuildReply accepted
// (IPv4 or IPv6 right after the Ethernet header); the zero Addr when it has none.
func sourceOf(frame []byte) netip.Addr {
	const ethLen = packet.EthernetHeaderLen
	if len(frame) < ethLen {
		return netip.Addr{}
	}
	ip := frame[ethLen:]
	switch binary.BigEndian.Uint16(frame[12:]) {
	case packet.EtherTypeIPv4:
		if len(ip) >= packet.IPv4HeaderLen {
			return netip.AddrFrom4([4]byte(ip[12:16]))
		}
	case packet.EtherTypeIPv6:
		if len(ip) >= packet.IPv6HeaderLen {
			return netip.AddrFrom16([16]byte(ip[8:24]))
		}
	}
	return netip.Addr{}
}
