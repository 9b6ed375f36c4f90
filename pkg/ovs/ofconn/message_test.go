package ofconn

import (
	"encoding/binary"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

func TestEncodePacketOutBytes(t *testing.T) {
	got, err := EncodePacketOut(0x11, PacketOut{Outputs: []uint32{3, PortInPort}, Data: []byte{0xde, 0xad}})
	require.NoError(t, err)
	want := []byte{
		0x04, 13, 0, 58, 0, 0, 0, 0x11, // header: OF1.3, PACKET_OUT, length 8+16+32+2
		0xff, 0xff, 0xff, 0xff, // buffer_id: none
		0xff, 0xff, 0xff, 0xfd, // in_port: CONTROLLER (zero InPort)
		0, 32, 0, 0, 0, 0, 0, 0, // actions_len, pad
		0, 0, 0, 16, 0, 0, 0, 3, 0xff, 0xff, 0, 0, 0, 0, 0, 0, // output:3
		0, 0, 0, 16, 0xff, 0xff, 0xff, 0xf8, 0xff, 0xff, 0, 0, 0, 0, 0, 0, // output:IN_PORT
		0xde, 0xad,
	}
	require.Equal(t, want, got)

	_, err = EncodePacketOut(1, PacketOut{Outputs: []uint32{1}, Data: make([]byte, 0xffff)})
	require.ErrorContains(t, err, "exceed")
}

func TestDecodePacketInBytes(t *testing.T) {
	msg := []byte{
		0x04, 10, 0, 58, 0, 0, 0, 9, // header, length 8+16+24+2+8
		0xff, 0xff, 0xff, 0xff, // buffer_id
		0, 100, // total_len
		1, 13, // reason action, table 13
		0x01, 0x02, 0, 0, 0, 0, 0, 0x07, // cookie
		0, 1, 0, 20, // match: OXM, length 4+8+8
		0x80, 0x00, 0x00, 4, 0, 0, 0, 5, // in_port=5
		0x00, 0x01, 0x06, 4, 0, 0, 0, 0x2a, // NXM reg3=0x2a
		0, 0, 0, 0, // match padding to 24
		0, 0, // pad
		1, 2, 3, 4, 5, 6, 7, 8, // data
	}
	pi, err := DecodePacketIn(msg)
	require.NoError(t, err)
	want := &PacketIn{Xid: 9, BufferID: NoBuffer, TotalLen: 100, Reason: ReasonAction, TableID: 13,
		Cookie: 0x0102000000000007, InPort: 5,
		Fields: []Field{{Class: ClassOpenFlowBasic, Field: 0, Value: []byte{0, 0, 0, 5}},
			{Class: ClassNXM1, Field: 3, Value: []byte{0, 0, 0, 0x2a}}},
		Data: []byte{1, 2, 3, 4, 5, 6, 7, 8}}
	if diff := cmp.Diff(want, pi); diff != "" {
		t.Fatalf("packet-in (-want +got):\n%s", diff)
	}
	reg3, ok := pi.Reg(3)
	require.True(t, ok)
	require.Equal(t, uint32(0x2a), reg3)
	_, ok = pi.Reg(4)
	require.False(t, ok, "a register OVS did not report")
	_, ok = pi.Reg(16)
	require.False(t, ok)
	require.True(t, pi.Truncated())
}

func TestPacketInRoundTripAndAccessors(t *testing.T) {
	in := PacketIn{Xid: 3, BufferID: NoBuffer, TotalLen: 3, Reason: ReasonNoMatch, TableID: 2, Cookie: 42,
		Fields: []Field{
			InPortField(PortLocal),
			RegField(0, 0x11),
			{Class: ClassNXM1, Field: fieldCtState, Value: []byte{0, 0, 0, 0x21}},
			{Class: ClassNXM1, Field: fieldCtZone, Value: []byte{0xff, 0xf0}},
			{Class: ClassNXM1, Field: fieldCtMark, Value: []byte{0, 0, 0, 1}, Mask: []byte{0, 0, 0, 1}},
			{Class: ClassNXM1, Field: fieldPktMark, Value: []byte{0, 0, 0, 9}},
			{Class: ClassExperimenter, Field: 5, Experimenter: 0x4f4e4600, Value: []byte{7}},
		},
		Data: []byte{9, 8, 7}}
	msg, err := EncodePacketIn(in)
	require.NoError(t, err)
	got, err := DecodePacketIn(msg)
	require.NoError(t, err)
	in.InPort = PortLocal
	if diff := cmp.Diff(&in, got); diff != "" {
		t.Fatalf("round trip (-want +got):\n%s", diff)
	}
	st, ok := got.CtState()
	require.True(t, ok)
	require.Equal(t, uint32(0x21), st)
	zone, ok := got.CtZone()
	require.True(t, ok)
	require.Equal(t, uint16(0xfff0), zone)
	mark, ok := got.PktMark()
	require.True(t, ok)
	require.Equal(t, uint32(9), mark)
	require.False(t, got.Truncated())
}

func TestDecodePacketInRejectsMalformed(t *testing.T) {
	good, err := EncodePacketIn(PacketIn{Fields: []Field{InPortField(1)}, Data: []byte{1}})
	require.NoError(t, err)
	mutate := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	for name, msg := range map[string][]byte{
		"empty":                 {},
		"header only":           good[:8],
		"length beyond data":    good[:len(good)-1],
		"wrong type":            mutate(func(b []byte) []byte { b[1] = TypeEchoRequest; return b }),
		"match type not OXM":    mutate(func(b []byte) []byte { b[25] = 0; return b }),
		"match length too long": mutate(func(b []byte) []byte { binary.BigEndian.PutUint16(b[26:], 200); return b }),
		"match length under 4":  mutate(func(b []byte) []byte { binary.BigEndian.PutUint16(b[26:], 2); return b }),
		"oxm length overruns":   mutate(func(b []byte) []byte { b[31] = 60; return b }),
		"header length < 8":     mutate(func(b []byte) []byte { binary.BigEndian.PutUint16(b[2:], 4); return b }),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := DecodePacketIn(msg)
			require.Error(t, err)
		})
	}
}

func TestNegotiateVersion(t *testing.T) {
	bitmapHello := func(version uint8, bitmap uint32) []byte {
		b := encode(TypeHello, 1, []byte{0, 1, 0, 8, byte(bitmap >> 24), byte(bitmap >> 16), byte(bitmap >> 8), byte(bitmap)})
		b[0] = version
		return b
	}
	plainHello := func(version uint8) []byte { b := encode(TypeHello, 1, nil); b[0] = version; return b }
	for _, tc := range []struct {
		name    string
		msg     []byte
		wantErr string
	}{
		{"OVS bridge with OpenFlow10,13,15", bitmapHello(6, 1<<1|1<<4|1<<6), ""},
		{"our own hello", EncodeHello(Version13, 1), ""},
		{"no bitmap, newer peer", plainHello(6), ""},
		{"no bitmap, OpenFlow 1.0 peer", plainHello(1), "at most"},
		{"bitmap without 1.3", bitmapHello(6, 1<<1|1<<6), "does not offer"},
		{"not a hello", EncodeEchoRequest(1, nil), "expected hello"},
		{"truncated element", append(plainHello(6)[:2:2], 0, 12, 0, 0, 0, 1, 0, 1, 0, 40), "malformed element"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := NegotiateVersion(tc.msg, Version13)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, Version, v)
		})
	}
}

func TestSmallMessages(t *testing.T) {
	require.Equal(t, []byte{4, 9, 0, 12, 0, 0, 0, 5, 0, 0, 0xff, 0xff}, EncodeSetConfig(5, MissSendLenNoBuffer))
	require.Equal(t, []byte{4, 20, 0, 8, 0, 0, 0, 6}, EncodeBarrierRequest(6))
	require.Equal(t, []byte{4, 3, 0, 10, 0, 0, 0, 7, 'h', 'i'}, EncodeEchoReply(7, []byte("hi")))
	require.Equal(t, []byte{4, 0, 0, 16, 0, 0, 0, 1, 0, 1, 0, 8, 0, 0, 0, 0x10}, EncodeHello(Version13, 1))
	require.Equal(t, []byte{6, 0, 0, 16, 0, 0, 0, 1, 0, 1, 0, 8, 0, 0, 0, 0x40}, EncodeHello(Version15, 1))

	feat := encode(TypeFeaturesReply, 2, []byte{0, 0, 0x2e, 0xee, 0x1c, 0x07, 0x79, 0x41, 0, 0, 0, 0, 254, 0, 0, 0, 0, 0, 0, 0x4f, 0, 0, 0, 0})
	f, err := DecodeFeaturesReply(feat)
	require.NoError(t, err)
	require.Equal(t, Features{DatapathID: 0x00002eee1c077941, NTables: 254}, f)
	_, err = DecodeFeaturesReply(feat[:20])
	require.Error(t, err)

	e, err := DecodeError(encode(TypeError, 8, []byte{0, 1, 0, 2, 0xaa}))
	require.NoError(t, err)
	require.Equal(t, &Error{Xid: 8, Type: 1, Code: 2, Data: []byte{0xaa}}, e)
	require.Equal(t, "OFPBRC_BAD_MULTIPART", e.Error(), "named as ovs-ofctl prints it")
	require.Equal(t, "OpenFlow error type 99 code 2", ErrorName(99, 2))
}

// FuzzDecodePacketIn checks that no input crashes the decoder and that whatever decodes
// re-encodes to the same packet-in. `go test` runs the seeds; `go test -fuzz=FuzzDecodePacketIn`
// explores further.
func FuzzDecodePacketIn(f *testing.F) {
	seed, _ := EncodePacketIn(PacketIn{TableID: 13, Reason: ReasonAction, Fields: []Field{InPortField(4), RegField(3, 1)}, Data: []byte("frame")})
	f.Add(seed)
	masked, _ := EncodePacketIn(PacketIn{Fields: []Field{{Class: ClassNXM1, Field: 107, Value: []byte{0, 1}, Mask: []byte{0, 1}}}})
	f.Add(masked)
	exp, _ := EncodePacketIn(PacketIn{Fields: []Field{{Class: ClassExperimenter, Field: 1, Experimenter: 9, Value: []byte{1, 2}}}})
	f.Add(exp)
	f.Add([]byte{4, 10, 0, 8, 0, 0, 0, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, msg []byte) {
		pi, err := DecodePacketIn(msg)
		if err != nil {
			return
		}
		again, err := EncodePacketIn(*pi)
		if err != nil {
			t.Fatalf("decoded packet-in does not re-encode: %v", err)
		}
		pi2, err := DecodePacketIn(again)
		if err != nil {
			t.Fatalf("re-encoded packet-in does not decode: %v", err)
		}
		if diff := cmp.Diff(pi, pi2); diff != "" {
			t.Fatalf("round trip changed the packet-in (-first +second):\n%s", diff)
		}
	})
}
