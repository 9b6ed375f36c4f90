package packet

import "encoding/binary"

// ARP operations (RFC 826).
const (
	ARPRequest uint16 = 1
	ARPReply   uint16 = 2
)

// ARPLen is the length of an ARP packet for IPv4 over Ethernet.
const ARPLen = 28

// ARP is an ARP packet for IPv4 over Ethernet (RFC 826): hardware type 1, protocol type IPv4.
type ARP struct {
	Operation uint16
	SenderMAC [6]byte
	SenderIP  [4]byte
	TargetMAC [6]byte
	TargetIP  [4]byte
}

// AppendARP appends a as a 28-byte ARP packet.
func AppendARP(b []byte, a ARP) []byte {
	b = append(b, 0, 1) // hardware type: Ethernet
	b = binary.BigEndian.AppendUint16(b, EtherTypeIPv4)
	b = append(b, 6, 4)
	b = binary.BigEndian.AppendUint16(b, a.Operation)
	b = append(b, a.SenderMAC[:]...)
	b = append(b, a.SenderIP[:]...)
	b = append(b, a.TargetMAC[:]...)
	return append(b, a.TargetIP[:]...)
}

// Neighbor Advertisement flags (RFC 4861 4.4), in the first byte after the ICMPv6 header.
const (
	NARouter    uint8 = 0x80
	NASolicited uint8 = 0x40
	NAOverride  uint8 = 0x20
)

// NDP option types (RFC 4861 4.6).
const (
	NDPOptSourceLinkAddr uint8 = 1
	NDPOptTargetLinkAddr uint8 = 2
)

// NeighborAdvertisement is an NDP Neighbor Advertisement (RFC 4861 4.4) with a target
// link-layer address option.
type NeighborAdvertisement struct {
	// Flags is a combination of NARouter, NASolicited and NAOverride.
	Flags    uint8
	Target   [16]byte
	TargetLL [6]byte
}

// NeighborAdvertisementLen is the length of the ICMPv6 message AppendNeighborAdvertisement
// writes: the ICMPv6 header, flags and target (24 bytes) and the 8-byte option.
const NeighborAdvertisementLen = 32

// AppendNeighborAdvertisement appends na as a whole ICMPv6 message (type 136, code 0) with a
// zero checksum: SetICMPv6Checksum computes it.
func AppendNeighborAdvertisement(b []byte, na NeighborAdvertisement) []byte {
	b = AppendICMP(b, ICMPv6NeighborAdvertisement, 0, uint32(na.Flags)<<24)
	b = append(b, na.Target[:]...)
	b = append(b, NDPOptTargetLinkAddr, 1) // length in units of 8 octets
	return append(b, na.TargetLL[:]...)
}
