package packet

import "encoding/binary"

// TCP flags (RFC 9293 3.1), in the flags byte.
const (
	TCPFin uint8 = 0x01
	TCPSyn uint8 = 0x02
	TCPRst uint8 = 0x04
	TCPPsh uint8 = 0x08
	TCPAck uint8 = 0x10
	TCPUrg uint8 = 0x20
	TCPEce uint8 = 0x40
	TCPCwr uint8 = 0x80
)

// TCPHeaderLen is the length of a TCP header without options.
const TCPHeaderLen = 20

// TCP is a TCP header (RFC 9293 3.1).
type TCP struct {
	SrcPort, DstPort uint16
	Seq, Ack         uint32
	// DataOffset is the header length in 32-bit words.
	DataOffset uint8
	Flags      uint8
	Window     uint16
	Checksum   uint16
	Urgent     uint16
	// Header is the header with its options, Payload the data after it. When the capture
	// cuts the options short, Header is everything captured and Payload is empty. Both alias
	// the parsed bytes.
	Header, Payload []byte
}

// ParseTCP reads the TCP header at the start of b, the IP payload. The fixed 20 bytes must be
// there and the data offset at least 5 words; the options are not looked into.
func ParseTCP(b []byte) (TCP, error) {
	if len(b) < TCPHeaderLen {
		return TCP{}, malformed("TCP header: %d bytes, want %d", len(b), TCPHeaderLen)
	}
	h := TCP{
		SrcPort: binary.BigEndian.Uint16(b[0:2]), DstPort: binary.BigEndian.Uint16(b[2:4]),
		Seq: binary.BigEndian.Uint32(b[4:8]), Ack: binary.BigEndian.Uint32(b[8:12]),
		DataOffset: b[12] >> 4, Flags: b[13], Window: binary.BigEndian.Uint16(b[14:16]),
		Checksum: binary.BigEndian.Uint16(b[16:18]), Urgent: binary.BigEndian.Uint16(b[18:20]),
	}
	if h.DataOffset < 5 {
		return TCP{}, malformed("TCP data offset %d words", h.DataOffset)
	}
	hlen := min(int(h.DataOffset)*4, len(b))
	h.Header, h.Payload = b[:hlen], b[hlen:]
	return h, nil
}

// AppendTCP appends h as a 20-byte header without options (data offset 5) and with h's
// Checksum; SetTCPChecksum computes it once the payload follows.
func AppendTCP(b []byte, h TCP) []byte {
	b = binary.BigEndian.AppendUint16(b, h.SrcPort)
	b = binary.BigEndian.AppendUint16(b, h.DstPort)
	b = binary.BigEndian.AppendUint32(b, h.Seq)
	b = binary.BigEndian.AppendUint32(b, h.Ack)
	b = append(b, 5<<4, h.Flags)
	b = binary.BigEndian.AppendUint16(b, h.Window)
	b = binary.BigEndian.AppendUint16(b, h.Checksum)
	return binary.BigEndian.AppendUint16(b, h.Urgent)
}

// SetTCPChecksum fills in the checksum of seg, a whole TCP segment (header and data), sent
// from src to dst (both IPv4 or both IPv6 addresses).
func SetTCPChecksum(seg, src, dst []byte) {
	setChecksum(seg, 16, PseudoHeaderSum(src, dst, ProtoTCP, len(seg)))
}

// UDPHeaderLen is the length of a UDP header.
const UDPHeaderLen = 8

// UDP is a UDP header (RFC 768).
type UDP struct {
	SrcPort, DstPort uint16
	Length, Checksum uint16
	// Payload is the data after the header, up to Length when Length is at least 8 and
	// within the captured bytes, else all of them. It aliases the parsed bytes.
	Payload []byte
}

// ParseUDP reads the UDP header at the start of b, the IP payload.
func ParseUDP(b []byte) (UDP, error) {
	if len(b) < UDPHeaderLen {
		return UDP{}, malformed("UDP header: %d bytes, want %d", len(b), UDPHeaderLen)
	}
	h := UDP{
		SrcPort: binary.BigEndian.Uint16(b[0:2]), DstPort: binary.BigEndian.Uint16(b[2:4]),
		Length: binary.BigEndian.Uint16(b[4:6]), Checksum: binary.BigEndian.Uint16(b[6:8]),
	}
	end := len(b)
	if l := int(h.Length); l >= UDPHeaderLen && l < end {
		end = l
	}
	h.Payload = b[UDPHeaderLen:end]
	return h, nil
}

// SCTPHeaderLen is the length of the SCTP common header.
const SCTPHeaderLen = 12

// SCTP is the SCTP common header (RFC 9260 3.1).
type SCTP struct {
	SrcPort, DstPort uint16
	VerificationTag  uint32
	Checksum         uint32
	// Payload is the chunks after the common header; it aliases the parsed bytes.
	Payload []byte
}

// ParseSCTP reads the SCTP common header at the start of b, the IP payload; the chunks are
// not looked into.
func ParseSCTP(b []byte) (SCTP, error) {
	if len(b) < SCTPHeaderLen {
		return SCTP{}, malformed("SCTP common header: %d bytes, want %d", len(b), SCTPHeaderLen)
	}
	return SCTP{
		SrcPort: binary.BigEndian.Uint16(b[0:2]), DstPort: binary.BigEndian.Uint16(b[2:4]),
		VerificationTag: binary.BigEndian.Uint32(b[4:8]), Checksum: binary.BigEndian.Uint32(b[8:12]),
		Payload: b[SCTPHeaderLen:],
	}, nil
}

// ICMP and ICMPv6 types and codes the agent sends.
const (
	ICMPv4DestinationUnreachable uint8 = 3 // RFC 792
	ICMPv4PortUnreachable        uint8 = 3 // its code
	ICMPv6DestinationUnreachable uint8 = 1 // RFC 4443 3.1
	ICMPv6PortUnreachable        uint8 = 4 // its code
	ICMPv6NeighborAdvertisement  uint8 = 136
)

// AppendICMP appends the first 8 bytes of an ICMP or ICMPv6 message: type, code, a zero
// checksum (SetICMPv4Checksum or SetICMPv6Checksum computes it once the rest follows), and
// rest, the type-specific word (unused, zero, in a destination unreachable).
func AppendICMP(b []byte, typ, code uint8, rest uint32) []byte {
	b = append(b, typ, code, 0, 0)
	return binary.BigEndian.AppendUint32(b, rest)
}

// SetICMPv4Checksum fills in the checksum of msg, a whole ICMP message (RFC 792: over the
// message only).
func SetICMPv4Checksum(msg []byte) { setChecksum(msg, 2, 0) }

// SetICMPv6Checksum fills in the checksum of msg, a whole ICMPv6 message sent from src to dst
// (RFC 4443 2.3: over the IPv6 pseudo-header and the message).
func SetICMPv6Checksum(msg, src, dst []byte) {
	setChecksum(msg, 2, PseudoHeaderSum(src, dst, ProtoICMPv6, len(msg)))
}

// setChecksum computes the checksum of b, with the pseudo-header sum pseudo, into the 16-bit
// field at off.
func setChecksum(b []byte, off int, pseudo uint32) {
	b[off], b[off+1] = 0, 0
	binary.BigEndian.PutUint16(b[off:], Checksum(Sum(pseudo, b)))
}
