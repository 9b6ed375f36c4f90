package pipeline

import (
	"net"
	"net/netip"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// Priorities of the neighbour spoof guard in Classifier: above the base flows that switch ARP
// (PriorityHigh) and IPv6 neighbour discovery (PriorityND) from any port.
const (
	// PriorityNeighborAllow switches a pod's ARP and neighbour discovery messages that claim
	// only the pod's own addresses and MAC.
	PriorityNeighborAllow uint16 = 230
	// PriorityNeighborDrop drops every other ARP, neighbour discovery, router advertisement
	// and redirect message from the pod's port.
	PriorityNeighborDrop uint16 = 225
)

// ICMPv6 messages only routers send (RFC 4861): a pod is not a router.
const (
	icmpv6RouterAdvertisement uint8 = 134
	icmpv6Redirect            uint8 = 137
)

// arpRequest is the ARP request opcode.
const arpRequest uint16 = 1

// NeighborGuardFlows returns the neighbour spoof guard of one local pod, in Classifier: what a
// pod says with ARP or IPv6 neighbour discovery about which MAC holds which address is let
// through only when the address is its own and the MAC its own. Everything in it comes from
// the pod's port with the pod's MAC as Ethernet source.
//
//   - ARP, with the pod's IPv4 address and MAC as sender (arp_spa, arp_sha): requests,
//     replies and gratuitous ARP about itself. An ARP probe (RFC 5227: request from 0.0.0.0)
//     only for one of its own addresses.
//   - Neighbour solicitations from one of the pod's IPv6 addresses (its addresses and its
//     EUI-64 link-local address, see LinkLocalEUI64), with the pod's MAC or no source
//     link-layer option: a receiver learns the source address's MAC from them. Any target: a
//     pod may ask about anyone. Duplicate address detection (from ::, without the option)
//     only for one of its own addresses.
//   - Neighbour advertisements whose target is one of the pod's IPv6 addresses, with the pod's
//     MAC or no target link-layer option.
//   - Everything else ARP, every other solicitation and advertisement, and every router
//     advertisement and redirect from the pod's port is dropped (PriorityNeighborDrop). This
//     includes all ARP from a pod without IPv4 and all neighbour discovery from a pod without
//     IPv6.
//
// The allowed messages are switched (NORMAL), as the base flows switch those of other ports.
func NeighborGuardFlows(c uint64, p Pod) []of.Flow {
	var v6 []netip.Addr
	var flows []of.Flow
	allow := func(m of.Match) {
		m.InPort = p.OFPort
		m.SetExtra(func(x *of.MatchExtra) { x.EthSrc = p.MAC })
		flows = append(flows, of.Flow{Table: TableClassifier, Priority: PriorityNeighborAllow, Cookie: c,
			Match: m, Actions: []of.Action{of.Normal{}}})
	}
	for _, ip := range p.IPs {
		if !ip.Is4() {
			v6 = append(v6, ip)
			continue
		}
		allow(of.Match{EthType: of.EthTypeARP, Extra: &of.MatchExtra{ARPSPA: ip, ARPSHA: p.MAC}})
		allow(of.Match{EthType: of.EthTypeARP, Extra: &of.MatchExtra{ARPOp: arpRequest, ARPSPA: netip.IPv4Unspecified(), ARPTPA: ip, ARPSHA: p.MAC}})
	}
	if len(v6) > 0 {
		v6 = append(v6, LinkLocalEUI64(p.MAC))
	}
	absent := make(net.HardwareAddr, 6)
	for _, ip := range v6 {
		for _, ll := range []net.HardwareAddr{p.MAC, absent} {
			allow(ndMatch(icmpv6NeighborSolicitation, of.Match{Src: netip.PrefixFrom(ip, 128), Extra: &of.MatchExtra{NDSLL: ll}}))
			allow(ndMatch(icmpv6NeighborAdvertisement, of.Match{Extra: &of.MatchExtra{NDTarget: ip, NDTLL: ll}}))
		}
		allow(ndMatch(icmpv6NeighborSolicitation, of.Match{Src: netip.PrefixFrom(netip.IPv6Unspecified(), 128), Extra: &of.MatchExtra{NDTarget: ip, NDSLL: absent}}))
	}
	drop := func(m of.Match) {
		m.InPort = p.OFPort
		flows = append(flows, of.Flow{Table: TableClassifier, Priority: PriorityNeighborDrop, Cookie: c,
			Match: m, Actions: []of.Action{of.Drop{}}})
	}
	drop(of.Match{EthType: of.EthTypeARP})
	for _, typ := range []uint8{icmpv6RouterAdvertisement, icmpv6NeighborSolicitation, icmpv6NeighborAdvertisement, icmpv6Redirect} {
		drop(of.Match{EthType: of.EthTypeIPv6, IPProto: of.ProtoICMPv6, Extra: &of.MatchExtra{ICMPType: &typ}})
	}
	return flows
}

// ndMatch completes m into a match of the neighbour discovery message typ (code 0).
func ndMatch(typ uint8, m of.Match) of.Match {
	code := uint8(0)
	m.EthType, m.IPProto = of.EthTypeIPv6, of.ProtoICMPv6
	m.SetExtra(func(x *of.MatchExtra) { x.ICMPType, x.ICMPCode = &typ, &code })
	return m
}

// LinkLocalEUI64 is the IPv6 link-local address an interface with MAC mac forms by default
// (RFC 4291 appendix A, modified EUI-64): the address a pod's kernel gives its interface unless
// the pod's network namespace asks for another (net.ipv6.conf.*.addr_gen_mode).
func LinkLocalEUI64(mac net.HardwareAddr) netip.Addr {
	var a [16]byte
	a[0], a[1] = 0xfe, 0x80
	if len(mac) == 6 {
		a[8], a[9], a[10] = mac[0]^0x02, mac[1], mac[2]
		a[11], a[12] = 0xff, 0xfe
		a[13], a[14], a[15] = mac[3], mac[4], mac[5]
	}
	return netip.AddrFrom16(a)
}
