package packet

import (
	"bytes"
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/stretchr/testify/require"
)

var (
	macA = [6]byte{0x02, 0, 0, 0, 0, 0x10}
	macB = [6]byte{0xaa, 0xbb, 0xcc, 0, 0, 1}
	v4A  = [4]byte{10, 10, 0, 10}
	v4B  = [4]byte{10, 96, 0, 10}
	v6A  = [16]byte(net.ParseIP("fd00:10::10"))
	v6B  = [16]byte(net.ParseIP("fd00:96::10"))
)

// reserialize decodes frame with gopacket and serializes its layers again with gopacket,
// computing lengths and checksums: equal bytes mean every field and checksum we wrote is what
// gopacket reads and would write.
func reserialize(t *testing.T, frame []byte) (gopacket.Packet, []byte) {
	t.Helper()
	pkt := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	require.Nil(t, pkt.ErrorLayer(), "decodes cleanly: %v", pkt)
	var ls []gopacket.SerializableLayer
	for _, l := range pkt.Layers() {
		if c, ok := l.(interface {
			SetNetworkLayerForChecksum(gopacket.NetworkLayer) error
		}); ok {
			require.NoError(t, c.SetNetworkLayerForChecksum(pkt.NetworkLayer()))
		}
		if s, ok := l.(gopacket.SerializableLayer); ok {
			ls = append(ls, s)
		} else {
			ls = append(ls, gopacket.Payload(l.LayerContents()))
		}
	}
	buf := gopacket.NewSerializeBuffer()
	require.NoError(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...))
	return pkt, buf.Bytes()
}

func TestTCPOverIPv4(t *testing.T) {
	seg := TCP{SrcPort: 80, DstPort: 41234, Seq: 0xdeadbeef, Ack: 12345, Flags: TCPRst | TCPAck | TCPPsh, Window: 512, Urgent: 7}
	b := AppendEthernet(nil, Ethernet{Dst: macA, Src: macB, EtherType: EtherTypeIPv4})
	b = AppendIPv4(b, IPv4{TOS: 0x10, ID: 99, Flags: IPv4DontFragment, TTL: 64, Protocol: ProtoTCP, Src: v4B, Dst: v4A}, TCPHeaderLen+3)
	start := len(b)
	b = append(AppendTCP(b, seg), "abc"...)
	SetTCPChecksum(b[start:], v4B[:], v4A[:])
	b = AppendPadding(b)
	require.Len(t, b, 60)
	pkt, again := reserialize(t, b)
	require.Equal(t, b, again)
	eth := pkt.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	require.Equal(t, net.HardwareAddr(macA[:]), eth.DstMAC)
	require.Equal(t, net.HardwareAddr(macB[:]), eth.SrcMAC)
	ip := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	require.Equal(t, []any{uint8(4), uint8(5), uint8(0x10), uint16(43), uint16(99), layers.IPv4DontFragment, uint16(0), uint8(64), layers.IPProtocolTCP},
		[]any{ip.Version, ip.IHL, ip.TOS, ip.Length, ip.Id, ip.Flags, ip.FragOffset, ip.TTL, ip.Protocol})
	require.Equal(t, net.IP(v4B[:]), ip.SrcIP)
	require.Equal(t, net.IP(v4A[:]), ip.DstIP)
	tcp := pkt.Layer(layers.LayerTypeTCP).(*layers.TCP)
	require.Equal(t, []any{layers.TCPPort(80), layers.TCPPort(41234), uint32(0xdeadbeef), uint32(12345), uint8(5), uint16(512), uint16(7)},
		[]any{tcp.SrcPort, tcp.DstPort, tcp.Seq, tcp.Ack, tcp.DataOffset, tcp.Window, tcp.Urgent})
	require.True(t, tcp.RST && tcp.ACK && tcp.PSH && !tcp.SYN && !tcp.FIN && !tcp.URG)
	require.Equal(t, []byte("abc"), tcp.Payload)

	got, rest, err := ParseEthernet(b)
	require.NoError(t, err)
	require.Equal(t, Ethernet{Dst: macA, Src: macB, EtherType: EtherTypeIPv4}, got)
	ip4, err := ParseIPv4(rest)
	require.NoError(t, err)
	require.Equal(t, []byte("abc"), ip4.Payload[TCPHeaderLen:], "Ethernet padding is not payload")
	parsed, err := ParseTCP(ip4.Payload)
	require.NoError(t, err)
	require.Equal(t, ip.Checksum, ip4.Checksum)
	parsed.Header, parsed.Payload = nil, nil
	seg.DataOffset, seg.Checksum = 5, tcp.Checksum
	require.Equal(t, seg, parsed)
}

func TestTCPOverIPv6(t *testing.T) {
	b := AppendEthernet(nil, Ethernet{Dst: macA, Src: macB, EtherType: EtherTypeIPv6})
	b = AppendIPv6(b, IPv6{TrafficClass: 0xb8, FlowLabel: 0x12345, NextHeader: ProtoTCP, HopLimit: 64, Src: v6B, Dst: v6A}, TCPHeaderLen)
	start := len(b)
	b = AppendTCP(b, TCP{SrcPort: 443, DstPort: 5000, Seq: 1, Flags: TCPRst})
	SetTCPChecksum(b[start:], v6B[:], v6A[:])
	pkt, again := reserialize(t, b)
	require.Equal(t, b, again)
	ip := pkt.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
	require.Equal(t, []any{uint8(6), uint8(0xb8), uint32(0x12345), uint16(20), layers.IPProtocolTCP, uint8(64)},
		[]any{ip.Version, ip.TrafficClass, ip.FlowLabel, ip.Length, ip.NextHeader, ip.HopLimit})
	parsed, err := ParseIPv6(b[EthernetHeaderLen:])
	require.NoError(t, err)
	require.Equal(t, []any{uint8(6), uint8(0xb8), uint32(0x12345), uint16(20), v6B, v6A},
		[]any{parsed.Version, parsed.TrafficClass, parsed.FlowLabel, parsed.Length, parsed.Src, parsed.Dst})
}

func TestICMPMessages(t *testing.T) {
	quote := []byte("an original IP packet, quoted")
	b := AppendEthernet(nil, Ethernet{Dst: macA, Src: macB, EtherType: EtherTypeIPv4})
	b = AppendIPv4(b, IPv4{TTL: 64, Protocol: ProtoICMPv4, Src: v4B, Dst: v4A}, 8+len(quote))
	start := len(b)
	b = append(AppendICMP(b, ICMPv4DestinationUnreachable, ICMPv4PortUnreachable, 0), quote...)
	SetICMPv4Checksum(b[start:])
	pkt, again := reserialize(t, b)
	require.Equal(t, b, again)
	icmp := pkt.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
	require.Equal(t, layers.CreateICMPv4TypeCode(3, 3), icmp.TypeCode)
	require.Equal(t, quote, icmp.Payload)

	b = AppendEthernet(nil, Ethernet{Dst: macA, Src: macB, EtherType: EtherTypeIPv6})
	b = AppendIPv6(b, IPv6{NextHeader: ProtoICMPv6, HopLimit: 64, Src: v6B, Dst: v6A}, 8+len(quote))
	start = len(b)
	b = append(AppendICMP(b, ICMPv6DestinationUnreachable, ICMPv6PortUnreachable, 0), quote...)
	SetICMPv6Checksum(b[start:], v6B[:], v6A[:])
	pkt, again = reserialize(t, b)
	require.Equal(t, b, again)
	icmp6 := pkt.Layer(layers.LayerTypeICMPv6).(*layers.ICMPv6)
	require.Equal(t, layers.CreateICMPv6TypeCode(1, 4), icmp6.TypeCode)
}

func TestARPAndNeighborAdvertisement(t *testing.T) {
	b := AppendEthernet(nil, Ethernet{Dst: [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, Src: macA, EtherType: EtherTypeARP})
	b = AppendPadding(AppendARP(b, ARP{Operation: ARPReply, SenderMAC: macA, SenderIP: v4A, TargetMAC: macB, TargetIP: v4B}))
	pkt, again := reserialize(t, b)
	require.Equal(t, b, again)
	arp := pkt.Layer(layers.LayerTypeARP).(*layers.ARP)
	require.Equal(t, []any{layers.LinkTypeEthernet, layers.EthernetTypeIPv4, uint8(6), uint8(4), uint16(2)},
		[]any{arp.AddrType, arp.Protocol, arp.HwAddressSize, arp.ProtAddressSize, arp.Operation})
	require.Equal(t, [][]byte{macA[:], v4A[:], macB[:], v4B[:]}, [][]byte{arp.SourceHwAddress, arp.SourceProtAddress, arp.DstHwAddress, arp.DstProtAddress})

	allNodes := [16]byte(net.ParseIP("ff02::1"))
	b = AppendEthernet(nil, Ethernet{Dst: [6]byte{0x33, 0x33, 0, 0, 0, 1}, Src: macA, EtherType: EtherTypeIPv6})
	b = AppendIPv6(b, IPv6{NextHeader: ProtoICMPv6, HopLimit: 255, Src: v6A, Dst: allNodes}, NeighborAdvertisementLen)
	start := len(b)
	b = AppendNeighborAdvertisement(b, NeighborAdvertisement{Flags: NARouter | NAOverride, Target: v6A, TargetLL: macA})
	SetICMPv6Checksum(b[start:], v6A[:], allNodes[:])
	require.Len(t, b[start:], NeighborAdvertisementLen)
	pkt, again = reserialize(t, b)
	require.Equal(t, b, again)
	na := pkt.Layer(layers.LayerTypeICMPv6NeighborAdvertisement).(*layers.ICMPv6NeighborAdvertisement)
	require.True(t, na.Router() && na.Override() && !na.Solicited())
	require.Equal(t, net.IP(v6A[:]), na.TargetAddress)
	require.Equal(t, layers.ICMPv6Options{{Type: layers.ICMPv6OptTargetAddress, Data: macA[:]}}, na.Options)
}

func TestParseErrors(t *testing.T) {
	tcp := AppendTCP(nil, TCP{SrcPort: 1, DstPort: 2, Flags: TCPSyn})
	for name, err := range map[string]error{
		"short Ethernet":    third(ParseEthernet(make([]byte, 13))),
		"short IPv4":        second(ParseIPv4(make([]byte, 19))),
		"IPv4 IHL 4":        second(ParseIPv4(append([]byte{0x44, 0, 0, 20}, make([]byte, 16)...))),
		"IPv4 length 19":    second(ParseIPv4(append([]byte{0x45, 0, 0, 19}, make([]byte, 16)...))),
		"IPv4 options cut":  second(ParseIPv4(append([]byte{0x46, 0, 0, 40}, make([]byte, 16)...))),
		"IPv4 option len 2": second(ParseIPv4(append(append([]byte{0x46, 0, 0, 24}, make([]byte, 16)...), 7, 2, 0, 0))),
		"short IPv6":        second(ParseIPv6(make([]byte, 39))),
		"IPv6 length 0":     second(ParseIPv6(append([]byte{0x60}, make([]byte, 39)...))),
		"short TCP":         second(ParseTCP(tcp[:19])),
		"TCP offset 4":      second(ParseTCP(append(append([]byte{}, tcp[:12]...), append([]byte{0x40}, tcp[13:]...)...))),
		"short UDP":         second(ParseUDP(make([]byte, 7))),
		"short SCTP":        second(ParseSCTP(make([]byte, 11))),
		"extension cut":     third(SkipExtensions(ProtoDestination, []byte{6, 1, 0, 0, 0, 0, 0, 0})),
		"option past end":   third(SkipExtensions(ProtoHopByHop, []byte{6, 0, 1, 9, 0, 0, 0, 0})),
		"routing type 4":    third(SkipExtensions(ProtoRouting, []byte{6, 0, 4, 0, 0, 0, 0, 0})),
		"short AH":          third(SkipExtensions(ProtoAH, make([]byte, 11))),
	} {
		require.ErrorIs(t, err, ErrMalformed, name)
	}
	proto, off, err := SkipExtensions(ProtoHopByHop, []byte{ProtoDestination, 0, 1, 4, 0, 0, 0, 0, ProtoAH, 0, 0, 1, 0, 0, 0, 0, 6, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff})
	require.NoError(t, err)
	require.Equal(t, []int{int(ProtoTCP), 28}, []int{int(proto), off})
	proto, off, err = SkipExtensions(ProtoFragment, []byte{17, 0, 0, 0, 0, 0, 0, 1})
	require.NoError(t, err)
	require.Equal(t, []int{int(ProtoFragment), 0}, []int{int(proto), off}, "a fragment header ends the walk")
}

func second[T any](_ T, err error) error { return err }

func third[T, U any](_ T, _ U, err error) error { return err }

// FuzzParseAgreesWithGopacket feeds random frames to the parsers and to gopacket's decoders:
// ours never panic, and where gopacket reads a header ours read the same fields the reject
// responder uses, or ours refuse.
func FuzzParseAgreesWithGopacket(f *testing.F) {
	tcp := AppendTCP(nil, TCP{SrcPort: 1, DstPort: 2, Seq: 3, Flags: TCPSyn})
	e4 := AppendEthernet(nil, Ethernet{Dst: macB, Src: macA, EtherType: EtherTypeIPv4})
	e6 := AppendEthernet(nil, Ethernet{Dst: macB, Src: macA, EtherType: EtherTypeIPv6})
	f.Add(append(AppendIPv4(bytes.Clone(e4), IPv4{Protocol: ProtoTCP, Src: v4A, Dst: v4B}, len(tcp)), tcp...))
	f.Add(append(AppendIPv6(bytes.Clone(e6), IPv6{NextHeader: ProtoTCP, Src: v6A, Dst: v6B}, len(tcp)), tcp...))
	f.Add(append(AppendIPv6(bytes.Clone(e6), IPv6{NextHeader: ProtoDestination, Src: v6A, Dst: v6B}, 16), 17, 0, 1, 4, 0, 0, 0, 0, 0, 1, 0, 2, 0, 8, 0, 0))
	f.Add(append(AppendIPv4(bytes.Clone(e4), IPv4{Protocol: ProtoUDP, Src: v4A, Dst: v4B}, 8), 0, 1, 0, 2, 0, 8, 0, 0))
	f.Fuzz(func(t *testing.T, in []byte) {
		eth, rest, err := ParseEthernet(in)
		if err != nil {
			return
		}
		var l4 []byte
		var proto uint8
		switch eth.EtherType {
		case EtherTypeIPv4:
			l4, proto = agreeIPv4(t, rest)
		case EtherTypeIPv6:
			l4, proto = agreeIPv6(t, rest)
		}
		if l4 != nil {
			agreeTransport(t, proto, l4)
		}
	})
}

// agreeIPv4 compares ParseIPv4 with gopacket on b and returns the payload and protocol.
func agreeIPv4(t *testing.T, b []byte) ([]byte, uint8) {
	var ref layers.IPv4
	refErr := ref.DecodeFromBytes(b, gopacket.NilDecodeFeedback)
	ip, err := ParseIPv4(b)
	if (err == nil) != (refErr == nil) {
		t.Fatalf("ParseIPv4(%x): %v, gopacket: %v", b, err, refErr)
	}
	if err != nil {
		return nil, 0
	}
	if !bytes.Equal(ip.Header, ref.Contents) || !bytes.Equal(ip.Payload, ref.Payload) || ip.Length != ref.Length ||
		ip.Protocol != uint8(ref.Protocol) || ip.FragOffset != ref.FragOffset || ip.Flags != uint8(ref.Flags) ||
		!bytes.Equal(ip.Src[:], ref.SrcIP) || !bytes.Equal(ip.Dst[:], ref.DstIP) {
		t.Fatalf("ParseIPv4(%x) = %+v, gopacket %+v", b, ip, ref)
	}
	if ip.IsFragment() {
		return nil, 0
	}
	return ip.Payload, ip.Protocol
}

// agreeIPv6 compares ParseIPv6 and SkipExtensions with gopacket on b (leaving out a
// hop-by-hop header right after the fixed header, which gopacket reads as part of it) and
// returns the upper-layer payload and protocol.
func agreeIPv6(t *testing.T, b []byte) ([]byte, uint8) {
	ip, err := ParseIPv6(b)
	if err != nil || ip.NextHeader == ProtoHopByHop {
		return nil, 0
	}
	var ref layers.IPv6
	if refErr := ref.DecodeFromBytes(b, gopacket.NilDecodeFeedback); refErr != nil {
		t.Fatalf("ParseIPv6(%x) accepted what gopacket refuses: %v", b, refErr)
	}
	if !bytes.Equal(ip.Payload, ref.Payload) || !bytes.Equal(ip.Src[:], ref.SrcIP) || !bytes.Equal(ip.Dst[:], ref.DstIP) || ip.NextHeader != uint8(ref.NextHeader) {
		t.Fatalf("ParseIPv6(%x) = %+v, gopacket %+v", b, ip, ref)
	}
	proto, off, err := SkipExtensions(ip.NextHeader, ip.Payload)
	pkt := gopacket.NewPacket(b, layers.LayerTypeIPv6, gopacket.DecodeOptions{NoCopy: true})
	refProto, refOff, direct := transportOf(pkt, ip.Payload)
	if direct && (err != nil || proto != refProto || off != refOff) {
		t.Fatalf("SkipExtensions(%x) = %d at %d, %v; gopacket: %d at %d", ip.Payload, proto, off, err, refProto, refOff)
	}
	if err != nil {
		return nil, 0
	}
	return ip.Payload[off:], proto
}

// transportOf returns the protocol and offset in payload of pkt's TCP, UDP or SCTP header when
// gopacket reached it through IPv6 extension headers only.
func transportOf(pkt gopacket.Packet, payload []byte) (uint8, int, bool) {
	ls := pkt.Layers()
	for _, l := range ls[1:] {
		var proto uint8
		switch l.LayerType() {
		case layers.LayerTypeIPv6Routing, layers.LayerTypeIPv6Destination, layers.LayerTypeIPv6HopByHop, layers.LayerTypeIPSecAH:
			continue
		case layers.LayerTypeTCP:
			proto = ProtoTCP
		case layers.LayerTypeUDP:
			proto = ProtoUDP
		case layers.LayerTypeSCTP:
			proto = ProtoSCTP
		default:
			return 0, 0, false
		}
		if len(l.LayerContents()) == 0 {
			return 0, 0, false // a header cut short
		}
		return proto, cap(payload) - cap(l.LayerContents()), true
	}
	return 0, 0, false
}

// agreeTransport compares ParseTCP, ParseUDP and ParseSCTP with gopacket on b.
func agreeTransport(t *testing.T, proto uint8, b []byte) {
	switch proto {
	case ProtoTCP:
		var ref layers.TCP
		refErr := ref.DecodeFromBytes(b, gopacket.NilDecodeFeedback)
		seg, err := ParseTCP(b)
		if err != nil {
			if len(ref.Contents) >= TCPHeaderLen {
				t.Fatalf("ParseTCP(%x): %v; gopacket read %d header bytes", b, err, len(ref.Contents))
			}
			return
		}
		if refErr != nil && len(ref.Contents) < TCPHeaderLen {
			t.Fatalf("ParseTCP(%x) accepted what gopacket refuses: %v", b, refErr)
		}
		if !bytes.Equal(seg.Header, ref.Contents) || len(seg.Payload) != len(ref.Payload) || seg.SrcPort != uint16(ref.SrcPort) ||
			seg.DstPort != uint16(ref.DstPort) || seg.Seq != ref.Seq || seg.Ack != ref.Ack || (seg.Flags&TCPSyn != 0) != ref.SYN ||
			(seg.Flags&TCPAck != 0) != ref.ACK || (seg.Flags&TCPRst != 0) != ref.RST || (seg.Flags&TCPFin != 0) != ref.FIN {
			t.Fatalf("ParseTCP(%x) = %+v, gopacket %+v", b, seg, ref)
		}
	case ProtoUDP:
		var ref layers.UDP
		ref.DecodeFromBytes(b, gopacket.NilDecodeFeedback) //nolint:errcheck // a short Length errs after the ports are read
		h, err := ParseUDP(b)
		if (err == nil) != (len(ref.Contents) == UDPHeaderLen) || err == nil && (h.SrcPort != uint16(ref.SrcPort) || h.DstPort != uint16(ref.DstPort)) {
			t.Fatalf("ParseUDP(%x) = %+v, %v; gopacket %+v", b, h, err, ref)
		}
	case ProtoSCTP:
		var ref layers.SCTP
		refErr := ref.DecodeFromBytes(b, gopacket.NilDecodeFeedback)
		h, err := ParseSCTP(b)
		if (err == nil) != (refErr == nil) || err == nil && (h.SrcPort != uint16(ref.SrcPort) || h.DstPort != uint16(ref.DstPort)) {
			t.Fatalf("ParseSCTP(%x) = %+v, %v; gopacket %+v, %v", b, h, err, ref, refErr)
		}
	}
}
