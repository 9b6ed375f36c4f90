package packet

import "encoding/binary"

// IPv4 flags (RFC 791 3.1), as in the 3-bit Flags field.
const (
	IPv4MoreFragments uint8 = 1
	IPv4DontFragment  uint8 = 2
)

// IPv4HeaderLen is the length of an IPv4 header without options.
const IPv4HeaderLen = 20

// IPv4 is an IPv4 header (RFC 791 3.1).
type IPv4 struct {
	Version, IHL, TOS uint8
	// Length is the total length; ParseIPv4 reads a zero (segmentation offload) as the
	// captured length.
	Length     uint16
	ID         uint16
	Flags      uint8
	FragOffset uint16
	TTL        uint8
	Protocol   uint8
	Checksum   uint16
	Src, Dst   [4]byte
	// Header is the header with its options (IHL×4 bytes), Payload what follows it up to
	// Length, as far as it was captured. Both alias the parsed bytes.
	Header, Payload []byte
}

// IsFragment reports whether the packet is a fragment: more fragments follow or it is not the
// first one.
func (h *IPv4) IsFragment() bool { return h.Flags&IPv4MoreFragments != 0 || h.FragOffset != 0 }

// ParseIPv4 reads the IPv4 header at the start of b. The packet may be cut short after the
// header; bytes after Length (Ethernet padding) are not part of the Payload. The options must
// be well-formed (RFC 791: end of list, no-operation, or type, length > 2, data within the
// header). The version field is not checked: the EtherType said IPv4.
func ParseIPv4(b []byte) (IPv4, error) {
	if len(b) < IPv4HeaderLen {
		return IPv4{}, malformed("IPv4 header: %d bytes, want %d", len(b), IPv4HeaderLen)
	}
	flagsFrag := binary.BigEndian.Uint16(b[6:8])
	h := IPv4{
		Version: b[0] >> 4, IHL: b[0] & 0x0f, TOS: b[1], Length: binary.BigEndian.Uint16(b[2:4]),
		ID: binary.BigEndian.Uint16(b[4:6]), Flags: uint8(flagsFrag >> 13), FragOffset: flagsFrag & 0x1fff,
		TTL: b[8], Protocol: b[9], Checksum: binary.BigEndian.Uint16(b[10:12]),
		Src: [4]byte(b[12:16]), Dst: [4]byte(b[16:20]),
	}
	if h.Length == 0 {
		h.Length = uint16(min(len(b), 0xffff))
	}
	hlen := int(h.IHL) * 4
	switch {
	case h.Length < IPv4HeaderLen:
		return IPv4{}, malformed("IPv4 total length %d", h.Length)
	case h.IHL < 5:
		return IPv4{}, malformed("IPv4 header length %d words", h.IHL)
	case hlen > int(h.Length):
		return IPv4{}, malformed("IPv4 header length %d beyond total length %d", hlen, h.Length)
	case hlen > len(b):
		return IPv4{}, malformed("IPv4 header of %d bytes cut at %d", hlen, len(b))
	}
	if err := checkIPv4Options(b[IPv4HeaderLen:hlen]); err != nil {
		return IPv4{}, err
	}
	end := min(len(b), int(h.Length))
	h.Header, h.Payload = b[:hlen], b[hlen:end]
	return h, nil
}

// checkIPv4Options checks the option list of an IPv4 header.
func checkIPv4Options(opts []byte) error {
	for len(opts) > 0 {
		switch opts[0] {
		case 0: // end of option list: the rest is padding
			return nil
		case 1: // no operation
			opts = opts[1:]
			continue
		}
		if len(opts) < 2 {
			return malformed("IPv4 option %d without its length", opts[0])
		}
		n := int(opts[1])
		if n <= 2 || n > len(opts) {
			return malformed("IPv4 option %d of length %d in %d bytes", opts[0], n, len(opts))
		}
		opts = opts[n:]
	}
	return nil
}

// AppendIPv4 appends h as a 20-byte header without options for a payload of payloadLen bytes:
// version 4, IHL 5, Length and Checksum computed (h's are ignored).
func AppendIPv4(b []byte, h IPv4, payloadLen int) []byte {
	start := len(b)
	b = append(b, 0x45, h.TOS)
	b = binary.BigEndian.AppendUint16(b, uint16(IPv4HeaderLen+payloadLen))
	b = binary.BigEndian.AppendUint16(b, h.ID)
	b = binary.BigEndian.AppendUint16(b, uint16(h.Flags)<<13|h.FragOffset&0x1fff)
	b = append(b, h.TTL, h.Protocol, 0, 0)
	b = append(b, h.Src[:]...)
	b = append(b, h.Dst[:]...)
	binary.BigEndian.PutUint16(b[start+10:], Checksum(Sum(0, b[start:])))
	return b
}

// IPv6HeaderLen is the length of the fixed IPv6 header.
const IPv6HeaderLen = 40

// IPv6 is the fixed IPv6 header (RFC 8200 3).
type IPv6 struct {
	Version, TrafficClass uint8
	FlowLabel             uint32
	// Length is the payload length, extension headers included.
	Length     uint16
	NextHeader uint8
	HopLimit   uint8
	Src, Dst   [16]byte
	// Header is the fixed header, Payload what follows it up to Length, as far as it was
	// captured (extension headers included). Both alias the parsed bytes.
	Header, Payload []byte
}

// ParseIPv6 reads the fixed IPv6 header at the start of b. The packet may be cut short after
// the header; bytes after Length (Ethernet padding) are not part of the Payload. A zero
// Length (a jumbogram, RFC 2675) is an error: a jumbogram does not fit in an Ethernet frame.
// The version field is not checked: the EtherType said IPv6.
func ParseIPv6(b []byte) (IPv6, error) {
	if len(b) < IPv6HeaderLen {
		return IPv6{}, malformed("IPv6 header: %d bytes, want %d", len(b), IPv6HeaderLen)
	}
	vtf := binary.BigEndian.Uint32(b[0:4])
	h := IPv6{
		Version: uint8(vtf >> 28), TrafficClass: uint8(vtf >> 20), FlowLabel: vtf & 0xfffff,
		Length: binary.BigEndian.Uint16(b[4:6]), NextHeader: b[6], HopLimit: b[7],
		Src: [16]byte(b[8:24]), Dst: [16]byte(b[24:40]),
	}
	if h.Length == 0 {
		return IPv6{}, malformed("IPv6 payload length 0 (jumbogram)")
	}
	end := min(len(b), IPv6HeaderLen+int(h.Length))
	h.Header, h.Payload = b[:IPv6HeaderLen], b[IPv6HeaderLen:end]
	return h, nil
}

// AppendIPv6 appends h as a fixed header for a payload of payloadLen bytes (at most 65535),
// with version 6 and Length computed (h's are ignored).
func AppendIPv6(b []byte, h IPv6, payloadLen int) []byte {
	b = binary.BigEndian.AppendUint32(b, 6<<28|uint32(h.TrafficClass)<<20|h.FlowLabel&0xfffff)
	b = binary.BigEndian.AppendUint16(b, uint16(payloadLen))
	b = append(b, h.NextHeader, h.HopLimit)
	b = append(b, h.Src[:]...)
	return append(b, h.Dst[:]...)
}

// SkipExtensions walks the IPv6 extension headers at the start of b, proto being the Next
// Header value that announces the first, and returns the protocol of the header that follows
// them with its offset in b. It passes hop-by-hop and destination options (RFC 8200 4.3, 4.6:
// their options must be well-formed), routing headers of type 0 (the only type it knows; any
// other is an error) and authentication headers (RFC 4302 2.2), and stops at anything else,
// a fragment header included.
func SkipExtensions(proto uint8, b []byte) (uint8, int, error) {
	off := 0
	for {
		var n int
		var err error
		switch proto {
		case ProtoHopByHop, ProtoDestination:
			n, err = optionsHeaderLen(b[off:])
		case ProtoRouting:
			n, err = routingHeaderLen(b[off:])
		case ProtoAH:
			n, err = authHeaderLen(b[off:])
		default:
			return proto, off, nil
		}
		if err != nil {
			return 0, 0, err
		}
		proto = b[off]
		off += n
	}
}

// extHeaderLen is the length of the extension header at the start of b from its Hdr Ext Len
// field, in 8-octet units not counting the first 8 (RFC 8200 4).
func extHeaderLen(b []byte) (int, error) {
	if len(b) < 2 {
		return 0, malformed("IPv6 extension header: %d bytes", len(b))
	}
	n := int(b[1])*8 + 8
	if n > len(b) {
		return 0, malformed("IPv6 extension header of %d bytes cut at %d", n, len(b))
	}
	return n, nil
}

// optionsHeaderLen is the length of the hop-by-hop or destination options header at the
// start of b; its options (Pad1, or type, length and data) must lie within b.
func optionsHeaderLen(b []byte) (int, error) {
	n, err := extHeaderLen(b)
	if err != nil {
		return 0, err
	}
	for off := 2; off < n; {
		rest := b[off:]
		switch {
		case len(rest) < 2:
			return 0, malformed("IPv6 option cut at %d bytes", len(rest))
		case rest[0] == 0: // Pad1
			off++
		case 2+int(rest[1]) > len(rest):
			return 0, malformed("IPv6 option %d of %d bytes cut at %d", rest[0], 2+int(rest[1]), len(rest))
		default:
			off += 2 + int(rest[1])
		}
	}
	return n, nil
}

// routingHeaderLen is the length of the routing header at the start of b, which must be of
// type 0 with a whole number of addresses.
func routingHeaderLen(b []byte) (int, error) {
	n, err := extHeaderLen(b)
	if err != nil {
		return 0, err
	}
	if b[2] != 0 {
		return 0, malformed("IPv6 routing header type %d", b[2])
	}
	if (n-8)%16 != 0 {
		return 0, malformed("IPv6 type 0 routing header of %d bytes", n)
	}
	return n, nil
}

// authHeaderLen is the length of the authentication header at the start of b, whose Payload
// Len field counts 4-octet units minus 2; it has at least its 12 fixed bytes.
func authHeaderLen(b []byte) (int, error) {
	if len(b) < 12 {
		return 0, malformed("authentication header: %d bytes", len(b))
	}
	n := (int(b[1]) + 2) * 4
	if n < 12 || n > len(b) {
		return 0, malformed("authentication header of %d bytes in %d", n, len(b))
	}
	return n, nil
}
