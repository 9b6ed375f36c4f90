package reject

import (
	"encoding/binary"
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/stretchr/testify/require"
)

var (
	clientMAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x10}
	gwMAC     = net.HardwareAddr{0xaa, 0xbb, 0xcc, 0, 0, 1}
	clientV4  = net.IP{10, 10, 0, 10}
	vipV4     = net.IP{10, 96, 0, 10}
	clientV6  = net.ParseIP("fd00:10::10")
	vipV6     = net.ParseIP("fd00:96::10")
)

// frame serializes an Ethernet frame from the client to the gateway MAC.
func frame(t testing.TB, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	ipLayer := ls[0]
	eth := &layers.Ethernet{SrcMAC: clientMAC, DstMAC: gwMAC, EthernetType: layers.EthernetTypeIPv4}
	if _, ok := ipLayer.(*layers.IPv6); ok {
		eth.EthernetType = layers.EthernetTypeIPv6
	}
	for _, l := range ls[1:] {
		if c, ok := l.(interface {
			SetNetworkLayerForChecksum(gopacket.NetworkLayer) error
		}); ok {
			require.NoError(t, c.SetNetworkLayerForChecksum(ipLayer.(gopacket.NetworkLayer)))
		}
	}
	buf := gopacket.NewSerializeBuffer()
	require.NoError(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, append([]gopacket.SerializableLayer{eth}, ls...)...))
	return buf.Bytes()
}

func ipv4(proto layers.IPProtocol) *layers.IPv4 {
	return &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: proto, SrcIP: clientV4, DstIP: vipV4}
}

func ipv6(next layers.IPProtocol) *layers.IPv6 {
	return &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: next, SrcIP: clientV6, DstIP: vipV6}
}

func syn(seq uint32) *layers.TCP {
	return &layers.TCP{SrcPort: 41234, DstPort: 80, Seq: seq, SYN: true, Window: 64240}
}

// decoded is a reply taken apart, with its L4 checksum verified.
type decoded struct {
	eth  *layers.Ethernet
	pkt  gopacket.Packet
	tcp  *layers.TCP
	icmp []byte // ICMP or ICMPv6 message: type, code, checksum, rest
}

func decodeReply(t *testing.T, b []byte) decoded {
	t.Helper()
	pkt := gopacket.NewPacket(b, layers.LayerTypeEthernet, gopacket.Default)
	require.Nil(t, pkt.ErrorLayer(), "reply decodes cleanly")
	d := decoded{eth: pkt.Layer(layers.LayerTypeEthernet).(*layers.Ethernet), pkt: pkt}
	require.Equal(t, gwMAC, d.eth.SrcMAC)
	require.Equal(t, clientMAC, d.eth.DstMAC)
	var pseudo []byte
	var l4 []byte
	switch ip := pkt.NetworkLayer().(type) {
	case *layers.IPv4:
		require.True(t, ip.SrcIP.Equal(vipV4) && ip.DstIP.Equal(clientV4), "addresses swapped: %s -> %s", ip.SrcIP, ip.DstIP)
		require.Equal(t, uint8(64), ip.TTL)
		require.Equal(t, uint16(0), ipChecksum(ip.Contents), "IPv4 header checksum")
		l4 = ip.Payload
		if ip.Protocol == layers.IPProtocolTCP {
			pseudo = append(append(append([]byte{}, ip.SrcIP.To4()...), ip.DstIP.To4()...), 0, 6, byte(len(l4)>>8), byte(len(l4)))
		}
	case *layers.IPv6:
		require.True(t, ip.SrcIP.Equal(vipV6) && ip.DstIP.Equal(clientV6), "addresses swapped: %s -> %s", ip.SrcIP, ip.DstIP)
		l4 = ip.Payload
		pseudo = append(append(append([]byte{}, ip.SrcIP...), ip.DstIP...), 0, 0, byte(len(l4)>>8), byte(len(l4)), 0, 0, 0, byte(ip.NextHeader))
	default:
		t.Fatalf("reply has no IP layer: %v", pkt)
	}
	require.Equal(t, uint16(0), ipChecksum(append(pseudo, l4...)), "L4 checksum")
	if tcp, ok := pkt.Layer(layers.LayerTypeTCP).(*layers.TCP); ok {
		d.tcp = tcp
	} else {
		d.icmp = l4
	}
	return d
}

// ipChecksum is the Internet checksum of b; 0 over data that includes a correct checksum.
func ipChecksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

func TestBuildReplyTCPReset(t *testing.T) {
	synAck := syn(0)
	synAck.SYN, synAck.ACK, synAck.PSH, synAck.Seq, synAck.Ack = false, true, true, 5000, 777
	fin := syn(100)
	fin.SYN, fin.FIN = false, true
	for _, tc := range []struct {
		name    string
		in      []byte
		wantSeq uint32
		wantAck uint32 // 0: no ACK flag
	}{
		{"IPv4 SYN", frame(t, ipv4(layers.IPProtocolTCP), syn(1000)), 0, 1001},
		{"IPv6 SYN", frame(t, ipv6(layers.IPProtocolTCP), syn(0xffffffff)), 0, 0},
		{"SYN with data (fast open) counts the data", frame(t, ipv4(layers.IPProtocolTCP), syn(1000), gopacket.Payload("hello")), 0, 1006},
		{"FIN without ACK counts the FIN", frame(t, ipv4(layers.IPProtocolTCP), fin, gopacket.Payload("ab")), 0, 103},
		{"segment with ACK gets SEQ=SEG.ACK", frame(t, ipv4(layers.IPProtocolTCP), synAck, gopacket.Payload("data")), 777, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, kind, err := BuildReply(tc.in)
			require.NoError(t, err)
			require.Equal(t, KindTCPReset, kind)
			d := decodeReply(t, out)
			require.NotNil(t, d.tcp, "reply is TCP")
			require.Equal(t, layers.TCPPort(80), d.tcp.SrcPort)
			require.Equal(t, layers.TCPPort(41234), d.tcp.DstPort)
			require.True(t, d.tcp.RST)
			require.False(t, d.tcp.SYN || d.tcp.FIN || d.tcp.PSH)
			require.Equal(t, tc.wantSeq, d.tcp.Seq)
			wantACK := tc.name != "segment with ACK gets SEQ=SEG.ACK"
			require.Equal(t, wantACK, d.tcp.ACK)
			if wantACK {
				require.Equal(t, tc.wantAck, d.tcp.Ack)
			}
			require.Empty(t, d.tcp.Payload)
		})
	}
}

func TestBuildReplyTruncatedCaptureUsesDeclaredLength(t *testing.T) {
	in := frame(t, ipv4(layers.IPProtocolTCP), syn(1000), gopacket.Payload(make([]byte, 300)))
	out, kind, err := BuildReply(in[:14+20+20+10]) // headers and 10 of 300 data bytes
	require.NoError(t, err)
	require.Equal(t, KindTCPReset, kind)
	require.Equal(t, uint32(1000+1+300), decodeReply(t, out).tcp.Ack)
}

func TestBuildReplyICMPPortUnreachable(t *testing.T) {
	udp := func() *layers.UDP { return &layers.UDP{SrcPort: 5353, DstPort: 53} }
	sctp := &layers.SCTP{SrcPort: 3868, DstPort: 3868}
	big := make([]byte, 2000)
	for _, tc := range []struct {
		name      string
		in        []byte
		kind      Kind
		wantType  byte
		wantCode  byte
		quoteFrom int // where the quoted IP packet starts in the ICMP message
		quoteLen  int // 0: the whole original IP packet
	}{
		{"IPv4 UDP", frame(t, ipv4(layers.IPProtocolUDP), udp(), gopacket.Payload("query")), KindICMPv4PortUnreachable, 3, 3, 8, 0},
		{"IPv4 SCTP", frame(t, ipv4(layers.IPProtocolSCTP), sctp), KindICMPv4PortUnreachable, 3, 3, 8, 0},
		{"IPv4 UDP quote capped at 576 bytes", frame(t, ipv4(layers.IPProtocolUDP), udp(), gopacket.Payload(big)), KindICMPv4PortUnreachable, 3, 3, 8, 576 - 28},
		{"IPv6 UDP", frame(t, ipv6(layers.IPProtocolUDP), udp(), gopacket.Payload("query")), KindICMPv6PortUnreachable, 1, 4, 8, 0},
		{"IPv6 UDP quote capped at 1280 bytes", frame(t, ipv6(layers.IPProtocolUDP), udp(), gopacket.Payload(big)), KindICMPv6PortUnreachable, 1, 4, 8, 1280 - 48},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, kind, err := BuildReply(tc.in)
			require.NoError(t, err)
			require.Equal(t, tc.kind, kind)
			d := decodeReply(t, out)
			require.Nil(t, d.tcp)
			require.Equal(t, []byte{tc.wantType, tc.wantCode}, d.icmp[:2])
			require.Equal(t, []byte{0, 0, 0, 0}, d.icmp[4:8], "unused word")
			orig := originalIP(t, tc.in)
			if tc.quoteLen != 0 {
				orig = orig[:tc.quoteLen]
			}
			require.Equal(t, orig, d.icmp[tc.quoteFrom:], "the ICMP message quotes the original IP packet")
		})
	}
}

// originalIP is the IP packet of an Ethernet frame, without Ethernet padding.
func originalIP(t *testing.T, f []byte) []byte {
	t.Helper()
	pkt := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
	switch ip := pkt.NetworkLayer().(type) {
	case *layers.IPv4:
		return f[14 : 14+int(ip.Length)]
	case *layers.IPv6:
		return f[14 : 14+40+int(ip.Length)]
	}
	t.Fatalf("no IP packet in %x", f)
	return nil
}

func TestBuildReplyRefusesWhatMustNotBeAnswered(t *testing.T) {
	rst := syn(1)
	rst.SYN, rst.RST = false, true
	mcast := ipv4(layers.IPProtocolUDP)
	mcast.DstIP = net.IP{224, 0, 0, 251}
	bcast := ipv4(layers.IPProtocolUDP)
	bcast.DstIP = net.IPv4bcast
	zeroSrc := ipv4(layers.IPProtocolUDP)
	zeroSrc.SrcIP = net.IPv4zero
	mcast6 := ipv6(layers.IPProtocolUDP)
	mcast6.DstIP = net.ParseIP("ff02::fb")
	frag := ipv4(layers.IPProtocolUDP)
	frag.FragOffset = 100
	firstFrag := ipv4(layers.IPProtocolUDP)
	firstFrag.Flags = layers.IPv4MoreFragments
	udp := &layers.UDP{SrcPort: 1, DstPort: 53}
	bcastEth := frame(t, ipv4(layers.IPProtocolUDP), udp)
	copy(bcastEth[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	arp := frame(t, ipv4(layers.IPProtocolUDP), udp)
	arp[12], arp[13] = 0x08, 0x06
	for name, in := range map[string][]byte{
		"TCP reset":                frame(t, ipv4(layers.IPProtocolTCP), rst),
		"ICMP echo":                frame(t, ipv4(layers.IPProtocolICMPv4), &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(8, 0)}),
		"ICMP port unreachable":    frame(t, ipv4(layers.IPProtocolICMPv4), &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(3, 3)}),
		"ICMPv6 echo":              frame(t, ipv6(layers.IPProtocolICMPv6), &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(128, 0)}),
		"multicast destination":    frame(t, mcast, udp),
		"broadcast destination":    frame(t, bcast, udp),
		"unspecified source":       frame(t, zeroSrc, udp),
		"IPv6 multicast":           frame(t, mcast6, udp),
		"non-first fragment":       frame(t, frag, gopacket.Payload("xxxxxxxx")),
		"first fragment":           frame(t, firstFrag, udp),
		"broadcast Ethernet":       bcastEth,
		"ARP EtherType":            arp,
		"empty":                    {},
		"Ethernet header only":     frame(t, ipv4(layers.IPProtocolTCP), syn(1))[:14],
		"IPv4 header cut":          frame(t, ipv4(layers.IPProtocolTCP), syn(1))[:14+12],
		"TCP header cut":           frame(t, ipv4(layers.IPProtocolTCP), syn(1))[:14+20+10],
		"UDP header cut":           frame(t, ipv4(layers.IPProtocolUDP), udp)[:14+20+4],
		"IPv6 next header unknown": frame(t, ipv6(253), gopacket.Payload("12345678")),
	} {
		t.Run(name, func(t *testing.T) {
			out, kind, err := BuildReply(in)
			require.ErrorIs(t, err, ErrNoReply)
			require.Equal(t, KindNone, kind)
			require.Nil(t, out)
		})
	}
}

// FuzzBuildReply checks that no input crashes BuildReply and that every reply is a well-formed
// frame back to the sender. `go test` runs the seeds; `go test -fuzz=FuzzBuildReply` explores.
func FuzzBuildReply(f *testing.F) {
	f.Add(frame(f, ipv4(layers.IPProtocolTCP), syn(1)))
	f.Add(frame(f, ipv6(layers.IPProtocolTCP), syn(1)))
	f.Add(frame(f, ipv4(layers.IPProtocolUDP), &layers.UDP{SrcPort: 1, DstPort: 2}, gopacket.Payload("x")))
	f.Add(frame(f, ipv6(layers.IPProtocolUDP), &layers.UDP{SrcPort: 1, DstPort: 2}))
	f.Add(frame(f, ipv6(layers.IPProtocolSCTP), &layers.SCTP{SrcPort: 1, DstPort: 2}))
	f.Add([]byte{})
	f.Add(make([]byte, 60))
	f.Fuzz(func(t *testing.T, in []byte) {
		out, kind, err := BuildReply(in)
		if err != nil {
			if out != nil || kind != KindNone {
				t.Fatalf("error %v with a reply", err)
			}
			return
		}
		if kind == KindNone || len(out) < 14+20+8 {
			t.Fatalf("reply of kind %s and %d bytes", kind, len(out))
		}
		pkt := gopacket.NewPacket(out, layers.LayerTypeEthernet, gopacket.Default)
		if pkt.NetworkLayer() == nil {
			t.Fatalf("reply has no network layer: %v", pkt)
		}
		if string(out[0:6]) != string(in[6:12]) {
			t.Fatalf("reply goes to %x, not to the sender %x", out[0:6], in[6:12])
		}
	})
}
