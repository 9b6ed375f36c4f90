package ofconn

import (
	"encoding/binary"
	"fmt"
)

// OpenFlow wire versions a connection can speak.
const (
	// Version13 is OpenFlow 1.3: the packet-in and packet-out encodings of this package.
	Version13 uint8 = 0x04
	// Version15 is OpenFlow 1.5: the bundles of pkg/ovs/openflow/native.
	Version15 uint8 = 0x06
	// Version is the default version of a connection and the one of this package's packet-in
	// and packet-out encodings (OpenFlow 1.3).
	Version = Version13
)

// Message types of OpenFlow 1.3 used here.
const (
	TypeHello           uint8 = 0
	TypeError           uint8 = 1
	TypeEchoRequest     uint8 = 2
	TypeEchoReply       uint8 = 3
	TypeFeaturesRequest uint8 = 5
	TypeFeaturesReply   uint8 = 6
	TypeSetConfig       uint8 = 9
	TypePacketIn        uint8 = 10
	TypeFlowRemoved     uint8 = 11
	TypePortStatus      uint8 = 12
	TypePacketOut       uint8 = 13
	TypeMultipartReq    uint8 = 18
	TypeMultipartReply  uint8 = 19
	TypeBarrierRequest  uint8 = 20
	TypeBarrierReply    uint8 = 21
	TypeRoleStatus      uint8 = 30
	TypeTableStatus     uint8 = 31
	TypeRequestForward  uint8 = 32
	TypeBundleControl   uint8 = 33
)

// MultipartReplyMore is OFPMPF_REPLY_MORE: more replies with the same xid follow.
const MultipartReplyMore uint16 = 1

// Reserved port numbers (ofp_port_no).
const (
	PortInPort     uint32 = 0xfffffff8
	PortTable      uint32 = 0xfffffff9
	PortController uint32 = 0xfffffffd
	PortLocal      uint32 = 0xfffffffe
	PortAny        uint32 = 0xffffffff
)

// NoBuffer is the buffer ID of a packet that the switch did not buffer (Open vSwitch never
// buffers), and of a packet-out that carries its packet.
const NoBuffer uint32 = 0xffffffff

// MissSendLenNoBuffer asks for whole packets on table misses (OFPCML_NO_BUFFER).
const MissSendLenNoBuffer uint16 = 0xffff

// Packet-in reasons (ofp_packet_in_reason).
const (
	ReasonNoMatch    uint8 = 0
	ReasonAction     uint8 = 1
	ReasonInvalidTTL uint8 = 2
)

const (
	headerLen = 8
	// maxMessageLen bounds what the reader accepts: OpenFlow's length field is 16 bits.
	maxMessageLen = 0xffff
)

// Header is the common header of every OpenFlow message.
type Header struct {
	Version uint8
	Type    uint8
	Length  uint16
	Xid     uint32
}

func (h Header) put(b []byte) {
	b[0], b[1] = h.Version, h.Type
	binary.BigEndian.PutUint16(b[2:], h.Length)
	binary.BigEndian.PutUint32(b[4:], h.Xid)
}

// ParseHeader decodes the first 8 bytes of b.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < headerLen {
		return Header{}, fmt.Errorf("openflow header: %d bytes, need %d", len(b), headerLen)
	}
	h := Header{Version: b[0], Type: b[1], Length: binary.BigEndian.Uint16(b[2:]), Xid: binary.BigEndian.Uint32(b[4:])}
	if h.Length < headerLen {
		return h, fmt.Errorf("openflow header: length %d is shorter than the header", h.Length)
	}
	return h, nil
}

// encode builds an OpenFlow 1.3 message of type t with body.
func encode(t uint8, xid uint32, body []byte) []byte { return encodeV(Version, t, xid, body) }

// encodeV builds a message of version v and type t with body.
func encodeV(v, t uint8, xid uint32, body []byte) []byte {
	b := make([]byte, headerLen+len(body))
	Header{Version: v, Type: t, Length: uint16(len(b)), Xid: xid}.put(b)
	copy(b[headerLen:], body)
	return b
}

// EncodeHello builds a hello of version v that offers only v through a version bitmap element
// (v < 32).
func EncodeHello(v uint8, xid uint32) []byte {
	// Element: type 1 (versionbitmap), length 8, one 32-bit bitmap with bit v set.
	body := make([]byte, 8)
	binary.BigEndian.PutUint16(body[0:], 1)
	binary.BigEndian.PutUint16(body[2:], 8)
	binary.BigEndian.PutUint32(body[4:], 1<<v)
	return encodeV(v, TypeHello, xid, body)
}

// versionName is "1.3" for Version13, "1.5" for Version15.
func versionName(v uint8) string {
	if v >= 1 && v <= 9 {
		return fmt.Sprintf("1.%d", v-1)
	}
	return fmt.Sprintf("0x%02x", v)
}

// NegotiateVersion checks a peer's hello (whole message) and returns the version both sides
// speak, which must be want: with a version bitmap, the bitmap must contain it; without one,
// the peer's header version must be at least want.
func NegotiateVersion(msg []byte, want uint8) (uint8, error) {
	h, err := ParseHeader(msg)
	if err != nil {
		return 0, err
	}
	if h.Type != TypeHello {
		return 0, fmt.Errorf("expected hello, got message type %d", h.Type)
	}
	if int(h.Length) > len(msg) {
		return 0, fmt.Errorf("hello: length %d exceeds %d bytes received", h.Length, len(msg))
	}
	elems := msg[headerLen:h.Length]
	for len(elems) >= 4 {
		et, el := binary.BigEndian.Uint16(elems), int(binary.BigEndian.Uint16(elems[2:]))
		if el < 4 || el > len(elems) {
			return 0, fmt.Errorf("hello: malformed element (type %d, length %d)", et, el)
		}
		if et == 1 {
			bitmaps := elems[4:el]
			word := int(want) / 32
			if len(bitmaps) >= 4*(word+1) && binary.BigEndian.Uint32(bitmaps[4*word:])&(1<<(want%32)) != 0 {
				return want, nil
			}
			return 0, fmt.Errorf("hello: peer does not offer OpenFlow %s (version bitmap %x; enable it in the bridge's protocols)",
				versionName(want), bitmaps)
		}
		el = (el + 7) / 8 * 8 // elements are padded to 8 bytes
		if el > len(elems) {
			break
		}
		elems = elems[el:]
	}
	if h.Version < want {
		return 0, fmt.Errorf("hello: peer speaks OpenFlow version 0x%02x at most, need 0x%02x (OpenFlow %s)", h.Version, want, versionName(want))
	}
	return want, nil
}

// EncodeEchoRequest builds an OpenFlow 1.3 echo request carrying data.
func EncodeEchoRequest(xid uint32, data []byte) []byte { return encode(TypeEchoRequest, xid, data) }

// EncodeEchoReply builds the OpenFlow 1.3 reply to an echo request: same xid, same data.
func EncodeEchoReply(xid uint32, data []byte) []byte { return encode(TypeEchoReply, xid, data) }

// echoReply answers the echo request req (whole message) in its own version.
func echoReply(req []byte) []byte {
	m := append([]byte(nil), req...)
	m[1] = TypeEchoReply
	return m
}

// EncodeFeaturesRequest builds a features request of version v.
func EncodeFeaturesRequest(v uint8, xid uint32) []byte {
	return encodeV(v, TypeFeaturesRequest, xid, nil)
}

// Features is the switch's features reply.
type Features struct {
	DatapathID uint64
	NBuffers   uint32
	NTables    uint8
}

// DecodeFeaturesReply decodes a features reply (whole message).
func DecodeFeaturesReply(msg []byte) (Features, error) {
	if len(msg) < headerLen+24 {
		return Features{}, fmt.Errorf("features reply: %d bytes, need %d", len(msg), headerLen+24)
	}
	b := msg[headerLen:]
	return Features{DatapathID: binary.BigEndian.Uint64(b), NBuffers: binary.BigEndian.Uint32(b[8:]), NTables: b[12]}, nil
}

// EncodeSetConfig builds a set-config with no fragment flags and missSendLen.
func EncodeSetConfig(xid uint32, missSendLen uint16) []byte {
	return encodeSetConfig(Version, xid, missSendLen)
}

func encodeSetConfig(v uint8, xid uint32, missSendLen uint16) []byte {
	body := make([]byte, 4)
	binary.BigEndian.PutUint16(body[2:], missSendLen)
	return encodeV(v, TypeSetConfig, xid, body)
}

// EncodeBarrierRequest builds an OpenFlow 1.3 barrier request.
func EncodeBarrierRequest(xid uint32) []byte { return encode(TypeBarrierRequest, xid, nil) }

// PacketOut is a packet to send from the controller.
type PacketOut struct {
	// InPort is the port the packet counts as coming from; PortController when zero.
	InPort uint32
	// Outputs are the ports to output to, in order (output actions). Use PortInPort to send
	// the packet back where InPort says it came from.
	Outputs []uint32
	// Data is the whole Ethernet frame.
	Data []byte
}

// EncodePacketOut builds a packet-out that carries its packet (no buffer).
func EncodePacketOut(xid uint32, po PacketOut) ([]byte, error) {
	const fixed, outputLen = 16, 16
	actionsLen := outputLen * len(po.Outputs)
	total := headerLen + fixed + actionsLen + len(po.Data)
	if total > maxMessageLen {
		return nil, fmt.Errorf("packet-out: %d bytes exceed the OpenFlow message limit", total)
	}
	inPort := po.InPort
	if inPort == 0 {
		inPort = PortController
	}
	body := make([]byte, fixed+actionsLen+len(po.Data))
	binary.BigEndian.PutUint32(body[0:], NoBuffer)
	binary.BigEndian.PutUint32(body[4:], inPort)
	binary.BigEndian.PutUint16(body[8:], uint16(actionsLen))
	a := body[fixed:]
	for i, port := range po.Outputs {
		act := a[i*outputLen:]
		binary.BigEndian.PutUint16(act[0:], 0) // OFPAT_OUTPUT
		binary.BigEndian.PutUint16(act[2:], outputLen)
		binary.BigEndian.PutUint32(act[4:], port)
		binary.BigEndian.PutUint16(act[8:], 0xffff) // max_len: only matters for the controller port
	}
	copy(body[fixed+actionsLen:], po.Data)
	return encode(TypePacketOut, xid, body), nil
}
