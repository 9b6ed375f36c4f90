package reject

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
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
// ports swapped. Errors wrap ErrNoReply.
func BuildReply(frame []byte) ([]byte, Kind, error) {
	pkt := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.DecodeOptions{Lazy: true, NoCopy: true})
	eth, ok := pkt.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	if !ok {
		return nil, KindNone, noReply("not an Ethernet frame")
	}
	if isGroupMAC(eth.SrcMAC) || isGroupMAC(eth.DstMAC) {
		return nil, KindNone, noReply("multicast or broadcast Ethernet address")
	}
	replyEth := &layers.Ethernet{SrcMAC: eth.DstMAC, DstMAC: eth.SrcMAC, EthernetType: eth.EthernetType}
	switch eth.EthernetType {
	case layers.EthernetTypeIPv4:
		ip, ok := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		if !ok {
			return nil, KindNone, noReply("malformed IPv4 header")
		}
		return replyIPv4(pkt, replyEth, ip)
	case layers.EthernetTypeIPv6:
		ip, ok := pkt.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
		if !ok {
			return nil, KindNone, noReply("malformed IPv6 header")
		}
		return replyIPv6(pkt, replyEth, ip)
	}
	return nil, KindNone, noReply("EtherType %s", eth.EthernetType)
}

// transport returns the packet's TCP, UDP or SCTP layer when its header decoded completely
// (gopacket keeps a zero layer when the header is cut short), else nil.
func transport(pkt gopacket.Packet) gopacket.Layer {
	l := pkt.TransportLayer()
	if l == nil {
		return nil
	}
	minLen := map[gopacket.LayerType]int{layers.LayerTypeTCP: 20, layers.LayerTypeUDP: 8, layers.LayerTypeSCTP: 12}[l.LayerType()]
	if minLen == 0 || len(l.LayerContents()) < minLen {
		return nil
	}
	return l
}

func isGroupMAC(m net.HardwareAddr) bool { return len(m) != 6 || m[0]&1 != 0 }

// unicastPair checks that both addresses may appear in an error exchange.
func unicastPair(src, dst net.IP) error {
	switch {
	case src.IsUnspecified() || src.IsMulticast() || src.IsLoopback() || src.Equal(net.IPv4bcast):
		return noReply("source address %s", src)
	case dst.IsUnspecified() || dst.IsMulticast() || dst.Equal(net.IPv4bcast):
		return noReply("destination address %s", dst)
	}
	return nil
}

func replyIPv4(pkt gopacket.Packet, eth *layers.Ethernet, ip *layers.IPv4) ([]byte, Kind, error) {
	if err := unicastPair(ip.SrcIP, ip.DstIP); err != nil {
		return nil, KindNone, err
	}
	if ip.FragOffset != 0 {
		return nil, KindNone, noReply("non-first IPv4 fragment")
	}
	rip := &layers.IPv4{Version: 4, IHL: 5, TTL: replyTTL, SrcIP: ip.DstIP, DstIP: ip.SrcIP}
	declared := int(ip.Length) - int(ip.IHL)*4
	switch l4 := transport(pkt).(type) {
	case *layers.TCP:
		rip.Protocol = layers.IPProtocolTCP
		return tcpReset(eth, rip, l4, declared, ip.Payload)
	case *layers.UDP, *layers.SCTP:
		rip.Protocol = layers.IPProtocolICMPv4
		quote := append(append([]byte(nil), ip.Contents...), ip.Payload...)
		if len(quote) > maxQuoteV4 {
			quote = quote[:maxQuoteV4]
		}
		icmp := &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeDestinationUnreachable, layers.ICMPv4CodePort)}
		b, err := serialize(eth, rip, icmp, gopacket.Payload(quote))
		return b, KindICMPv4PortUnreachable, err
	}
	return nil, KindNone, noReply("IPv4 protocol %s has no transport header to answer", ip.Protocol)
}

func replyIPv6(pkt gopacket.Packet, eth *layers.Ethernet, ip *layers.IPv6) ([]byte, Kind, error) {
	if err := unicastPair(ip.SrcIP, ip.DstIP); err != nil {
		return nil, KindNone, err
	}
	rip := &layers.IPv6{Version: 6, HopLimit: replyTTL, SrcIP: ip.DstIP, DstIP: ip.SrcIP}
	declared := int(ip.Length) // payload length, extension headers included
	switch l4 := transport(pkt).(type) {
	case *layers.TCP:
		rip.NextHeader = layers.IPProtocolTCP
		return tcpReset(eth, rip, l4, declared, ip.Payload)
	case *layers.UDP, *layers.SCTP:
		rip.NextHeader = layers.IPProtocolICMPv6
		quote := append(append(make([]byte, 4), ip.Contents...), ip.Payload...) // 4 unused bytes first
		if len(quote) > 4+maxQuoteV6 {
			quote = quote[:4+maxQuoteV6]
		}
		icmp := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(layers.ICMPv6TypeDestinationUnreachable, layers.ICMPv6CodePortUnreachable)}
		if err := icmp.SetNetworkLayerForChecksum(rip); err != nil {
			return nil, KindNone, err
		}
		b, err := serialize(eth, rip, icmp, gopacket.Payload(quote))
		return b, KindICMPv6PortUnreachable, err
	}
	// Fragments (gopacket leaves every IPv6 fragment undecoded), ICMPv6 and others.
	return nil, KindNone, noReply("IPv6 packet has no TCP, UDP or SCTP header to answer")
}

// tcpReset answers seg as RFC 9293 3.10.7.1 says for a closed port: a segment with ACK gets
// <SEQ=SEG.ACK><CTL=RST>, one without gets <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>.
// declared is the IP payload length from the IP header and ipPayload the captured IP payload,
// so that SEG.LEN is right for a truncated capture.
func tcpReset(eth *layers.Ethernet, ip gopacket.NetworkLayer, seg *layers.TCP, declared int, ipPayload []byte) ([]byte, Kind, error) {
	if seg.RST {
		return nil, KindNone, noReply("TCP segment is a reset")
	}
	rst := &layers.TCP{SrcPort: seg.DstPort, DstPort: seg.SrcPort, RST: true}
	if seg.ACK {
		rst.Seq = seg.Ack
	} else {
		offset := len(ipPayload) - len(seg.Contents) - len(seg.Payload) // TCP header's offset in the IP payload
		dataLen := declared - offset - len(seg.Contents)
		if dataLen < 0 || declared == 0 {
			dataLen = len(seg.Payload)
		}
		segLen := uint32(dataLen)
		if seg.SYN {
			segLen++
		}
		if seg.FIN {
			segLen++
		}
		rst.ACK, rst.Ack = true, seg.Seq+segLen
	}
	if err := rst.SetNetworkLayerForChecksum(ip); err != nil {
		return nil, KindNone, err
	}
	b, err := serialize(eth, ip.(gopacket.SerializableLayer), rst)
	return b, KindTCPReset, err
}

func serialize(ls ...gopacket.SerializableLayer) ([]byte, error) {
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		return nil, fmt.Errorf("serializing reject reply: %w", err)
	}
	return buf.Bytes(), nil
}

// sourceOf returns the IP source address of frame, an Ethernet frame BuildReply accepted
// (IPv4 or IPv6 right after the Ethernet header); the zero Addr when it has none.
func sourceOf(frame []byte) netip.Addr {
	const ethLen = 14
	if len(frame) < ethLen {
		return netip.Addr{}
	}
	ip := frame[ethLen:]
	switch layers.EthernetType(binary.BigEndian.Uint16(frame[12:])) {
	case layers.EthernetTypeIPv4:
		if len(ip) >= 20 {
			return netip.AddrFrom4([4]byte(ip[12:16]))
		}
	case layers.EthernetTypeIPv6:
		if len(ip) >= 40 {
			return netip.AddrFrom16([16]byte(ip[8:24]))
		}
	}
	return netip.Addr{}
}
