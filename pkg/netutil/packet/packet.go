// Package packet parses and builds the few Ethernet frames the agent handles itself: it reads
// the Ethernet, IPv4, IPv6 (with its extension headers), TCP, UDP and SCTP headers of a frame
// and writes Ethernet, IPv4, IPv6, TCP, ICMP, ICMPv6, ARP and NDP neighbour advertisement
// headers with their checksums.
//
// Parsers take the frame as captured, possibly truncated, from an untrusted sender: every
// length is checked against the bytes present, a malformed header is an error wrapping
// ErrMalformed, and the results alias the input (no copies). Writers append to a byte slice;
// checksums that cover later bytes are filled in once those bytes are written (SetTCPChecksum,
// SetICMPv4Checksum, SetICMPv6Checksum).
package packet

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrMalformed wraps every parse error: the bytes are not a well-formed header of the kind
// asked for, or they are cut short.
var ErrMalformed = errors.New("malformed packet")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// EtherTypes (IEEE 802.3).
const (
	EtherTypeIPv4 uint16 = 0x0800
	EtherTypeARP  uint16 = 0x0806
	EtherTypeVLAN uint16 = 0x8100
	EtherTypeIPv6 uint16 = 0x86dd
)

// IP protocol numbers (IANA), also IPv6 Next Header values.
const (
	ProtoHopByHop    uint8 = 0
	ProtoICMPv4      uint8 = 1
	ProtoTCP         uint8 = 6
	ProtoUDP         uint8 = 17
	ProtoRouting     uint8 = 43
	ProtoFragment    uint8 = 44
	ProtoAH          uint8 = 51
	ProtoICMPv6      uint8 = 58
	ProtoNoNext      uint8 = 59
	ProtoDestination uint8 = 60
	ProtoSCTP        uint8 = 132
)

const (
	// EthernetHeaderLen is the length of an Ethernet II header without a VLAN tag.
	EthernetHeaderLen = 14
	// MinFrameLen is the shortest Ethernet frame without its frame check sequence; AppendPadding
	// pads shorter frames to it.
	MinFrameLen = 60
)

// Ethernet is an Ethernet II header.
type Ethernet struct {
	Dst, Src [6]byte
	// EtherType is the type field as it is on the wire; values below 0x0600 are IEEE 802.3
	// lengths, and 0x8100 starts an 802.1Q tag (ParseEthernet does not look into either).
	EtherType uint16
}

// ParseEthernet reads the Ethernet header at the start of frame and returns it with the rest
// of the frame.
func ParseEthernet(frame []byte) (Ethernet, []byte, error) {
	if len(frame) < EthernetHeaderLen {
		return Ethernet{}, nil, malformed("Ethernet header: %d bytes, want %d", len(frame), EthernetHeaderLen)
	}
	e := Ethernet{Dst: [6]byte(frame[0:6]), Src: [6]byte(frame[6:12]), EtherType: binary.BigEndian.Uint16(frame[12:14])}
	return e, frame[EthernetHeaderLen:], nil
}

// IsGroup reports whether mac is a multicast or broadcast address (the I/G bit set).
func IsGroup(mac [6]byte) bool { return mac[0]&1 != 0 }

// AppendEthernet appends the 14-byte header e to b.
func AppendEthernet(b []byte, e Ethernet) []byte {
	b = append(b, e.Dst[:]...)
	b = append(b, e.Src[:]...)
	return binary.BigEndian.AppendUint16(b, e.EtherType)
}

// AppendPadding pads frame with zero bytes to MinFrameLen.
func AppendPadding(frame []byte) []byte {
	for len(frame) < MinFrameLen {
		frame = append(frame, 0)
	}
	return frame
}

// Sum adds b to the one's-complement sum partial, as 16-bit big-endian words (an odd last
// byte is padded with a zero byte), and returns it folded to 16 bits, not complemented
// (RFC 1071).
func Sum(partial uint32, b []byte) uint32 {
	s := uint64(partial)
	for len(b) >= 2 {
		s += uint64(b[0])<<8 | uint64(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint64(b[0]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint32(s)
}

// Checksum folds the sum into 16 bits and complements it: the Internet checksum.
func Checksum(sum uint32) uint16 {
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}

// PseudoHeaderSum is the sum of the IPv4 (RFC 9293 3.1) or IPv6 (RFC 8200 8.1) pseudo-header
// for an upper-layer packet of length bytes: src and dst are both 4 or both 16 bytes.
func PseudoHeaderSum(src, dst []byte, proto uint8, length int) uint32 {
	s := Sum(Sum(0, src), dst)
	return s + uint32(proto) + uint32(length>>16) + uint32(length&0xffff)
}
