package node

import (
	"encoding/binary"
	"net"
	"net/netip"
	"strings"

	"github.com/antrea-proxy/antrea-proxy/test/ovssandbox"
)

const (
	arpRequest uint16 = 1
	arpReply   uint16 = 2
)

var (
	broadcastMAC = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	zeroMAC      = net.HardwareAddr{0, 0, 0, 0, 0, 0}
)

// arpMsg is one ARP message for IPv4 over Ethernet, with the Ethernet addresses it travels with.
type arpMsg struct {
	op             uint16
	ethDst, ethSrc net.HardwareAddr
	sha, tha       net.HardwareAddr
	spa, tpa       string
}

// frame is the message as a minimum-size Ethernet frame.
func (m arpMsg) frame() []byte {
	b := make([]byte, 60)
	copy(b[0:6], m.ethDst)
	copy(b[6:12], m.ethSrc)
	binary.BigEndian.PutUint16(b[12:], 0x0806)
	binary.BigEndian.PutUint16(b[14:], 1)      // Ethernet
	binary.BigEndian.PutUint16(b[16:], 0x0800) // IPv4
	b[18], b[19] = 6, 4
	binary.BigEndian.PutUint16(b[20:], m.op)
	copy(b[22:28], m.sha)
	spa := netip.MustParseAddr(m.spa).As4()
	copy(b[28:32], spa[:])
	copy(b[32:38], m.tha)
	tpa := netip.MustParseAddr(m.tpa).As4()
	copy(b[38:42], tpa[:])
	return b
}

func frames(msgs ...arpMsg) [][]byte {
	var out [][]byte
	for _, m := range msgs {
		out = append(out, m.frame())
	}
	return out
}

// mac is the MAC address of the pod's interface, from the CNI result.
func (p *pod) mac() net.HardwareAddr {
	for _, i := range p.res.Interfaces {
		if i.Sandbox != "" {
			return parseMAC(i.Mac)
		}
	}
	panic("pod " + p.name + ": no sandbox interface in the CNI result")
}

func parseMAC(s string) net.HardwareAddr {
	mac, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return mac
}

// neighMAC returns the link-layer address that dev in ns maps ip to ("" without an entry or
// without an address, e.g. INCOMPLETE or FAILED).
func neighMAC(ns *ovssandbox.NetNS, dev, ip string) string {
	out, err := ns.Exec("ip", "neigh", "show", ip, "dev", dev)
	if err != nil {
		return ""
	}
	f := strings.Fields(out)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "lladdr" {
			return f[i+1]
		}
	}
	return ""
}

// ICMPv6 neighbour discovery message types and the advertisement's override flag.
const (
	ndSolicitation  uint8  = 135
	ndAdvertisement uint8  = 136
	ndOverride      uint32 = 0x20000000
)

// ndMsg is one IPv6 neighbour solicitation or advertisement with its one link-layer address
// option (source for a solicitation, target for an advertisement), and the addresses it
// travels with.
type ndMsg struct {
	typ            uint8
	ethDst, ethSrc net.HardwareAddr
	src, dst       string
	target         string
	flags          uint32 // advertisements only
	ll             net.HardwareAddr
}

// frame is the message as an Ethernet frame: hop limit 255 and a correct checksum, as a
// receiver requires.
func (m ndMsg) frame() []byte {
	icmp := make([]byte, 32)
	icmp[0] = m.typ
	binary.BigEndian.PutUint32(icmp[4:], m.flags)
	target := netip.MustParseAddr(m.target).As16()
	copy(icmp[8:24], target[:])
	icmp[24] = 1 // source link-layer address option
	if m.typ == ndAdvertisement {
		icmp[24] = 2 // target link-layer address option
	}
	icmp[25] = 1 // 8 bytes
	copy(icmp[26:32], m.ll)
	src, dst := netip.MustParseAddr(m.src).As16(), netip.MustParseAddr(m.dst).As16()
	binary.BigEndian.PutUint16(icmp[2:], icmpv6Checksum(src, dst, icmp))
	b := make([]byte, 14+40, 14+40+len(icmp))
	copy(b[0:6], m.ethDst)
	copy(b[6:12], m.ethSrc)
	binary.BigEndian.PutUint16(b[12:], 0x86dd)
	ip := b[14:]
	ip[0] = 0x60
	binary.BigEndian.PutUint16(ip[4:], uint16(len(icmp)))
	ip[6], ip[7] = 58, 255 // ICMPv6, hop limit
	copy(ip[8:24], src[:])
	copy(ip[24:40], dst[:])
	return append(b, icmp...)
}

// icmpv6Checksum is the ICMPv6 checksum of msg (checksum field zero) between src and dst.
func icmpv6Checksum(src, dst [16]byte, msg []byte) uint16 {
	var sum uint32
	add := func(b []byte) {
		for i := 0; i+1 < len(b); i += 2 {
			sum += uint32(binary.BigEndian.Uint16(b[i:]))
		}
		if len(b)%2 == 1 {
			sum += uint32(b[len(b)-1]) << 8
		}
	}
	add(src[:])
	add(dst[:])
	var pseudo [8]byte
	binary.BigEndian.PutUint32(pseudo[:], uint32(len(msg)))
	pseudo[7] = 58
	add(pseudo[:])
	add(msg)
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

func ndFrames(msgs ...ndMsg) [][]byte {
	var out [][]byte
	for _, m := range msgs {
		out = append(out, m.frame())
	}
	return out
}

// ip6 is the pod's IPv6 address, from the CNI result ("" without one).
func (p *pod) ip6() string {
	for _, ip := range p.res.IPs {
		if ip.Address.IP.To4() == nil {
			return ip.Address.IP.String()
		}
	}
	return ""
}
