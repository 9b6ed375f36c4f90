package ofconn

import (
	"encoding/binary"
	"fmt"
)

// OXM classes.
const (
	// ClassNXM1 holds Nicira extension fields: registers, conntrack state, packet mark.
	ClassNXM1 uint16 = 0x0001
	// ClassOpenFlowBasic holds the standard OpenFlow fields.
	ClassOpenFlowBasic uint16 = 0x8000
	// ClassExperimenter fields carry a 32-bit experimenter ID after the header.
	ClassExperimenter uint16 = 0xffff
)

// Field numbers used by the accessors below.
const (
	fieldInPort   uint8 = 0   // OXM_OF_IN_PORT
	fieldPktMark  uint8 = 33  // NXM_NX_PKT_MARK
	fieldCtState  uint8 = 105 // NXM_NX_CT_STATE
	fieldCtZone   uint8 = 106 // NXM_NX_CT_ZONE
	fieldCtMark   uint8 = 107 // NXM_NX_CT_MARK
	maxRegisterID       = 15  // NXM_NX_REG0..NXM_NX_REG15 are NXM1 fields 0..15
)

// Field is one OXM TLV of a packet-in's match, undecoded.
type Field struct {
	Class uint16
	Field uint8
	// Experimenter is set for ClassExperimenter fields.
	Experimenter uint32
	Value        []byte
	// Mask is nil unless the field carries one.
	Mask []byte
}

// PacketIn is a packet sent to the controller.
type PacketIn struct {
	Xid      uint32
	BufferID uint32
	// TotalLen is the length of the whole packet; Data may be shorter (max_len).
	TotalLen uint16
	Reason   uint8
	TableID  uint8
	// Cookie is the cookie of the flow whose controller action sent the packet.
	Cookie uint64
	// InPort is the port the packet entered the bridge on.
	InPort uint32
	// Fields is the packet's metadata, as the switch sent it (in_port included).
	Fields []Field
	// Data is the Ethernet frame, possibly truncated to the action's max_len.
	Data []byte
}

// Truncated says whether Data is only the start of the packet.
func (p *PacketIn) Truncated() bool { return len(p.Data) < int(p.TotalLen) }

// field returns the value of the unmasked field class/field of size n.
func (p *PacketIn) field(class uint16, field uint8, n int) ([]byte, bool) {
	for _, f := range p.Fields {
		if f.Class == class && f.Field == field && len(f.Value) == n {
			return f.Value, true
		}
	}
	return nil, false
}

func (p *PacketIn) uint32Field(class uint16, field uint8) (uint32, bool) {
	v, ok := p.field(class, field, 4)
	if !ok {
		return 0, false
	}
	return binary.BigEndian.Uint32(v), true
}

// Reg returns register regN (0..15) when the switch reported it (OVS reports non-zero ones).
func (p *PacketIn) Reg(n int) (uint32, bool) {
	if n < 0 || n > maxRegisterID {
		return 0, false
	}
	return p.uint32Field(ClassNXM1, uint8(n))
}

// CtState returns the conntrack state bits (OVS's ct_state encoding) when reported.
func (p *PacketIn) CtState() (uint32, bool) { return p.uint32Field(ClassNXM1, fieldCtState) }

// CtMark returns the connection's ct_mark when reported.
func (p *PacketIn) CtMark() (uint32, bool) { return p.uint32Field(ClassNXM1, fieldCtMark) }

// PktMark returns the packet mark when reported.
func (p *PacketIn) PktMark() (uint32, bool) { return p.uint32Field(ClassNXM1, fieldPktMark) }

// CtZone returns the conntrack zone when reported.
func (p *PacketIn) CtZone() (uint16, bool) {
	v, ok := p.field(ClassNXM1, fieldCtZone, 2)
	if !ok {
		return 0, false
	}
	return binary.BigEndian.Uint16(v), true
}

// DecodePacketIn decodes an OpenFlow 1.3 packet-in (whole message, header included). It copies
// nothing it does not need to: the returned slices alias msg.
func DecodePacketIn(msg []byte) (*PacketIn, error) {
	h, err := ParseHeader(msg)
	if err != nil {
		return nil, fmt.Errorf("packet-in: %w", err)
	}
	if h.Type != TypePacketIn {
		return nil, fmt.Errorf("packet-in: message type %d", h.Type)
	}
	if int(h.Length) > len(msg) {
		return nil, fmt.Errorf("packet-in: length %d exceeds %d bytes received", h.Length, len(msg))
	}
	b := msg[headerLen:h.Length]
	const fixed = 16
	if len(b) < fixed+4 {
		return nil, fmt.Errorf("packet-in: %d-byte body is too short", len(b))
	}
	p := &PacketIn{
		Xid:      h.Xid,
		BufferID: binary.BigEndian.Uint32(b[0:]),
		TotalLen: binary.BigEndian.Uint16(b[4:]),
		Reason:   b[6],
		TableID:  b[7],
		Cookie:   binary.BigEndian.Uint64(b[8:]),
		InPort:   PortAny,
	}
	m := b[fixed:]
	matchType, matchLen := binary.BigEndian.Uint16(m), int(binary.BigEndian.Uint16(m[2:]))
	if matchType != 1 {
		return nil, fmt.Errorf("packet-in: match type %d, want 1 (OXM)", matchType)
	}
	padded := (matchLen + 7) / 8 * 8
	if matchLen < 4 || padded+2 > len(m) {
		return nil, fmt.Errorf("packet-in: match length %d does not fit in %d bytes", matchLen, len(m))
	}
	if p.Fields, err = decodeOXM(m[4:matchLen]); err != nil {
		return nil, fmt.Errorf("packet-in: %w", err)
	}
	for _, f := range p.Fields {
		if f.Class == ClassOpenFlowBasic && f.Field == fieldInPort && len(f.Value) == 4 && f.Mask == nil {
			p.InPort = binary.BigEndian.Uint32(f.Value)
		}
	}
	p.Data = m[padded+2:]
	return p, nil
}

// decodeOXM splits OXM TLVs.
func decodeOXM(b []byte) ([]Field, error) {
	var fields []Field
	for len(b) > 0 {
		if len(b) < 4 {
			return nil, fmt.Errorf("oxm: %d trailing bytes", len(b))
		}
		hdr := binary.BigEndian.Uint32(b)
		f := Field{Class: uint16(hdr >> 16), Field: uint8(hdr>>9) & 0x7f}
		hasMask, n := hdr&0x100 != 0, int(hdr&0xff)
		if n > len(b)-4 {
			return nil, fmt.Errorf("oxm: field class 0x%04x field %d: length %d exceeds %d bytes left", f.Class, f.Field, n, len(b)-4)
		}
		v := b[4 : 4+n]
		b = b[4+n:]
		if f.Class == ClassExperimenter {
			if len(v) < 4 {
				return nil, fmt.Errorf("oxm: experimenter field %d: %d bytes, no experimenter ID", f.Field, len(v))
			}
			f.Experimenter = binary.BigEndian.Uint32(v)
			v = v[4:]
		}
		if hasMask {
			if len(v)%2 != 0 {
				return nil, fmt.Errorf("oxm: masked field class 0x%04x field %d has odd length %d", f.Class, f.Field, len(v))
			}
			v, f.Mask = v[:len(v)/2], v[len(v)/2:]
		}
		f.Value = v
		fields = append(fields, f)
	}
	return fields, nil
}

// EncodePacketIn builds an OpenFlow 1.3 packet-in. The switch sends these; tests and fakes use
// it to play the switch.
func EncodePacketIn(p PacketIn) ([]byte, error) {
	var oxm []byte
	for _, f := range p.Fields {
		payload := append([]byte(nil), f.Value...)
		if f.Class == ClassExperimenter {
			payload = binary.BigEndian.AppendUint32(nil, f.Experimenter)
			payload = append(payload, f.Value...)
		}
		hdr := uint32(f.Class)<<16 | uint32(f.Field&0x7f)<<9
		if f.Mask != nil {
			hdr |= 0x100
			payload = append(payload, f.Mask...)
		}
		if len(payload) > 0xff {
			return nil, fmt.Errorf("oxm field class 0x%04x field %d: %d bytes is too long", f.Class, f.Field, len(payload))
		}
		oxm = binary.BigEndian.AppendUint32(oxm, hdr|uint32(len(payload)))
		oxm = append(oxm, payload...)
	}
	matchLen := 4 + len(oxm)
	padded := (matchLen + 7) / 8 * 8
	body := make([]byte, 16+padded+2+len(p.Data))
	binary.BigEndian.PutUint32(body[0:], p.BufferID)
	binary.BigEndian.PutUint16(body[4:], p.TotalLen)
	body[6], body[7] = p.Reason, p.TableID
	binary.BigEndian.PutUint64(body[8:], p.Cookie)
	binary.BigEndian.PutUint16(body[16:], 1)
	binary.BigEndian.PutUint16(body[18:], uint16(matchLen))
	copy(body[20:], oxm)
	copy(body[16+padded+2:], p.Data)
	if headerLen+len(body) > maxMessageLen {
		return nil, fmt.Errorf("packet-in: %d bytes exceed the OpenFlow message limit", headerLen+len(body))
	}
	return encode(TypePacketIn, p.Xid, body), nil
}

// InPortField is the OXM in_port field for port, for building packet-ins.
func InPortField(port uint32) Field {
	return Field{Class: ClassOpenFlowBasic, Field: fieldInPort, Value: binary.BigEndian.AppendUint32(nil, port)}
}

// RegField is the NXM regN field with value v, for building packet-ins.
func RegField(n int, v uint32) Field {
	return Field{Class: ClassNXM1, Field: uint8(n), Value: binary.BigEndian.AppendUint32(nil, v)}
}
