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
