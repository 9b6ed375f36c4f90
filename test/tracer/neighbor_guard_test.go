package tracer

import (
	"net"
	"net/netip"
	"testing"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/oftrace"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

// Addresses of the neighbour guard's dual-stack node: the client pod (port 10) has clientPodIP
// and guardPodV6, the endpoint pod on port 11 ep1IP and guardOtherV6; the gateway holds the
// podCIDRs' first addresses.
var (
	guardPodV6   = netip.MustParseAddr("fd00:10:1::5")
	guardOtherV6 = netip.MustParseAddr("fd00:10:1::6")
	guardGWv4    = netip.MustParseAddr("10.10.1.1")
	guardGWv6    = netip.MustParseAddr("fd00:10:1::1")
	solicitedAll = netip.MustParseAddr("ff02::1")
)

// guardTracer traces the base flows of a dual-stack node (ARP and neighbour discovery switched
// from every port) with the flows of two dual-stack pods.
func guardTracer(t *testing.T) *oftrace.Tracer {
	t.Helper()
	flows := pipeline.BaseFlows(pipeline.NodeConfig{Round: flowRound, IPv4: true, IPv6: true, GatewayOFPort: gwPort})
	for port, v6 := range map[uint32]netip.Addr{clientPort: guardPodV6, ep1Port: guardOtherV6} {
		flows = append(flows, pipeline.PodFlows(flowRound, gwMAC, pipeline.Pod{ID: uint64(port), OFPort: port, MAC: podMAC(port),
			IPs: []netip.Addr{podIPs[port], v6}})...)
	}
	tr, err := oftrace.New(flows, nil, oftrace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// arpFrom is an ARP message from the client pod's port with Ethernet source ethSrc.
func arpFrom(ethSrc net.HardwareAddr, op uint16, spa netip.Addr, sha net.HardwareAddr, tpa netip.Addr) oftrace.Packet {
	return oftrace.Packet{InPort: clientPort, EthSrc: ethSrc, EthDst: net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		EthType: of.EthTypeARP, ARPOp: op, ARPSPA: spa, ARPSHA: sha, ARPTPA: tpa}
}

// ndFrom is an ICMPv6 message of type typ from the client pod's port with Ethernet source
// ethSrc; target, sll and tll are its neighbour discovery fields.
func ndFrom(ethSrc net.HardwareAddr, typ uint8, src, target netip.Addr, sll, tll net.HardwareAddr) oftrace.Packet {
	return oftrace.Packet{InPort: clientPort, EthSrc: ethSrc, EthType: of.EthTypeIPv6, Proto: of.ProtoICMPv6,
		Src: src, Dst: solicitedAll, ICMPType: typ, NDTarget: target, NDSLL: sll, NDTLL: tll}
}

// TestNeighborGuard: a pod's ARP and neighbour discovery about its own addresses and MAC are
// switched; claims about the gateway's or another pod's address, with another MAC, or from a
// router are dropped in Classifier.
func TestNeighborGuard(t *testing.T) {
	tr := guardTracer(t)
	own, other := podMAC(clientPort), podMAC(ep1Port)
	ll := pipeline.LinkLocalEUI64(own)
	unspec4, unspec6 := netip.IPv4Unspecified(), netip.IPv6Unspecified()
	for _, tc := range []struct {
		name string
		p    oftrace.Packet
		want oftrace.OutcomeKind
	}{
		{"ARP request for the gateway", arpFrom(own, 1, clientPodIP, own, guardGWv4), oftrace.Normal},
		{"ARP reply", arpFrom(own, 2, clientPodIP, own, ep1IP), oftrace.Normal},
		{"gratuitous ARP for itself", arpFrom(own, 1, clientPodIP, own, clientPodIP), oftrace.Normal},
		{"ARP probe for itself", arpFrom(own, 1, unspec4, own, clientPodIP), oftrace.Normal},
		{"ARP claiming the gateway's address", arpFrom(own, 2, guardGWv4, own, ep1IP), oftrace.Dropped},
		{"ARP claiming another pod's address", arpFrom(own, 1, ep1IP, own, guardGWv4), oftrace.Dropped},
		{"ARP with another pod's MAC as sender", arpFrom(own, 1, clientPodIP, other, guardGWv4), oftrace.Dropped},
		{"ARP from another pod's MAC", arpFrom(other, 1, ep1IP, other, guardGWv4), oftrace.Dropped},
		{"ARP probe for another pod's address", arpFrom(own, 1, unspec4, own, ep1IP), oftrace.Dropped},
		{"NS for the gateway", ndFrom(own, 135, guardPodV6, guardGWv6, own, nil), oftrace.Normal},
		{"NS without source link-layer option", ndFrom(own, 135, guardPodV6, guardGWv6, nil, nil), oftrace.Normal},
		{"NS from the link-local address", ndFrom(own, 135, ll, guardOtherV6, own, nil), oftrace.Normal},
		{"DAD for itself", ndFrom(own, 135, unspec6, guardPodV6, nil, nil), oftrace.Normal},
		{"NA for itself", ndFrom(own, 136, guardPodV6, guardPodV6, nil, own), oftrace.Normal},
		{"NA for its link-local address", ndFrom(own, 136, ll, ll, nil, own), oftrace.Normal},
		{"NA without target link-layer option", ndFrom(own, 136, guardPodV6, guardPodV6, nil, nil), oftrace.Normal},
		{"NA claiming the gateway's address", ndFrom(own, 136, guardPodV6, guardGWv6, nil, own), oftrace.Dropped},
		{"NA claiming another pod's address", ndFrom(own, 136, guardPodV6, guardOtherV6, nil, own), oftrace.Dropped},
		{"NA for itself with another MAC", ndFrom(own, 136, guardPodV6, guardPodV6, nil, other), oftrace.Dropped},
		{"NA from another pod's MAC", ndFrom(other, 136, guardOtherV6, guardOtherV6, nil, other), oftrace.Dropped},
		{"NS from the gateway's address", ndFrom(own, 135, guardGWv6, guardOtherV6, own, nil), oftrace.Dropped},
		{"NS with another pod's MAC", ndFrom(own, 135, guardPodV6, guardGWv6, other, nil), oftrace.Dropped},
		{"DAD for another pod's address", ndFrom(own, 135, unspec6, guardOtherV6, nil, nil), oftrace.Dropped},
		{"router advertisement", ndFrom(own, 134, ll, unspec6, nil, nil), oftrace.Dropped},
		{"redirect", ndFrom(own, 137, ll, unspec6, nil, nil), oftrace.Dropped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := expectVerdict(t, traceAll(t, tr, tc.p), tc.want, pipeline.TableClassifier)
			if tc.want == oftrace.Dropped && o.Reason == "" {
				t.Errorf("dropped without a reason: %v", o)
			}
		})
	}
}
