package pipeline

import (
	"net/netip"
	"testing"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/oftrace"
)

// TestZeroSNATOnlyForServiceTuples: ConntrackCommit commits with nat only the connections
// whose tuple SNATConntrackZone found to be a Service connection's DNATed tuple
// (BitServiceTuple), in both families. A zero SNAT that moves nothing leaves OVS 3.1 an un-NAT
// entry with the connection's own tuple, on which ovs-vswitchd aborts once the connection
// expired (docs/design/ovs-pipeline.md, "Conntrack zones and marks").
func TestZeroSNATOnlyForServiceTuples(t *testing.T) {
	n := NodeConfig{Round: 1, IPv4: true, IPv6: true, GatewayOFPort: 2,
		GatewayIPv4: netip.MustParseAddr("169.254.0.253"), GatewayIPv6: netip.MustParseAddr("fd00::253")}
	flows := BaseFlows(n)
	var plain, zeroSNAT int
	for _, f := range tableFlows(flows, TableConntrackCommit) {
		for _, a := range f.Actions {
			ct, ok := a.(of.CT)
			if !ok {
				continue
			}
			tagged := len(f.Match.Regs) == 1 && f.Match.Regs[0] == of.RegMatch{Reg: RegSource, Value: BitServiceTuple, Mask: BitServiceTuple}
			switch {
			case ct.NAT == nil:
				plain++
			case tagged && ct.NAT.Kind == of.NATSrc && f.Priority > PriorityNormal:
				zeroSNAT++
			default:
				t.Errorf("ConntrackCommit flow %v: nat on a connection not tagged BitServiceTuple", f)
			}
		}
	}
	if plain != 2 || zeroSNAT != 2 {
		t.Errorf("ConntrackCommit: %d plain commits and %d zero-SNAT commits, want one of each per family", plain, zeroSNAT)
	}
	// The tag comes from entries of the SNAT zone in the original direction: SNAT entries and
	// the records of connections not SNATed.
	tags := map[uint32]int{}
	for _, f := range tableFlows(flows, TableSNATConntrackZone) {
		if f.Priority == PriorityServiceTuple && f.Match.CtMark != nil && f.Match.CtState != nil && f.Match.CtState.Unset&of.CtRpl != 0 {
			tags[f.Match.CtMark.Value]++
		}
	}
	if tags[CtMarkSNAT] != 2 || tags[CtMarkServiceTuple] != 2 {
		t.Errorf("SNATConntrackZone tags %v (by ct_mark), want CtMarkSNAT and CtMarkServiceTuple in both families", tags)
	}
	// Every new Service connection that ServiceSNAT leaves alone is recorded with
	// CtMarkServiceTuple, below the SNAT flows.
	for _, f := range tableFlows(flows, TableServiceSNAT) {
		if f.Priority != PriorityLow {
			continue
		}
		ct, ok := f.Actions[0].(of.CT)
		if !ok || !ct.Commit || ct.NAT != nil || (ct.Zone != ZoneSNATV4 && ct.Zone != ZoneSNATV6) {
			t.Errorf("ServiceSNAT flow %v: want a commit without nat in the SNAT zone", f)
		}
	}
}

// TestPeerConnectionsAlwaysMoveTheirPort traces TCP packets through the base flows: a new
// connection from another node's address (NodeConfig.PeerNodeIPs) that no Service claimed keeps
// its address and gets a port from a range without its own (a port from 32768 up below, a
// lower one above), so that it never shares the reply tuple of a closed connection whose record
// its SYN expired, and never gets an un-NAT entry with its own tuple. Ports below 1024, packets
// OVS picks up in the middle of a connection (no SYN) and other sources keep their port.
func TestPeerConnectionsAlwaysMoveTheirPort(t *testing.T) {
	peer4, peer6 := netip.MustParseAddr("192.168.77.12"), netip.MustParseAddr("fd00:77::12")
	n := NodeConfig{Round: 1, IPv4: true, IPv6: true, GatewayOFPort: 2,
		GatewayIPv4: netip.MustParseAddr("169.254.0.253"), GatewayIPv6: netip.MustParseAddr("fd00::253"),
		PeerNodeIPs: []netip.Addr{peer4, peer6}}
	tr, err := oftrace.New(BaseFlows(n), nil, oftrace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	endpoints := map[netip.Addr]netip.Addr{peer4: netip.MustParseAddr("10.244.0.2"), peer6: netip.MustParseAddr("fd00:244::2")}
	other := map[netip.Addr]netip.Addr{peer4: netip.MustParseAddr("192.168.77.13"), peer6: netip.MustParseAddr("fd00:77::13")}
	for _, peer := range []netip.Addr{peer4, peer6} {
		for _, tc := range []struct {
			what   string
			src    netip.Addr
			port   uint16
			flags  of.TCPFlag
			lo, hi uint16 // the range the port must land in
		}{
			{"SYN from a high port", peer, 40000, of.TCPSyn, 1024, 32767},
			{"SYN from 32768", peer, 32768, of.TCPSyn, 1024, 32767},
			{"SYN from a middle port", peer, 2000, of.TCPSyn, 32768, 65535},
			{"SYN from 32767", peer, 32767, of.TCPSyn, 32768, 65535},
			{"SYN from a port below 1024", peer, 1000, of.TCPSyn, 1000, 1000},
			{"a packet of a connection OVS did not see open", peer, 40000, of.TCPAck, 40000, 40000},
			{"SYN from another address", other[peer], 40000, of.TCPSyn, 40000, 40000},
		} {
			et := of.EthTypeIP
			if peer.Is6() {
				et = of.EthTypeIPv6
			}
			p := oftrace.Packet{InPort: 2, EthType: et, Proto: of.ProtoTCP, Src: tc.src, Dst: endpoints[peer],
				SrcPort: tc.port, DstPort: 8080, TCPFlags: tc.flags}
			res, err := tr.Trace(p, oftrace.NewConntrack())
			if err != nil {
				t.Fatalf("%s %s: %v", peer, tc.what, err)
			}
			o, ok := res.Single()
			if !ok || o.Kind != oftrace.Normal {
				t.Fatalf("%s %s: want one packet to NORMAL, got:\n%s", peer, tc.what, res)
			}
			moved := o.Packet.SrcPort != tc.port
			if o.Packet.Src != tc.src || o.Packet.SrcPort < tc.lo || o.Packet.SrcPort > tc.hi || moved != (tc.lo != tc.port) {
				t.Errorf("%s %s (port %d): left as %s, want the same address with a port in %d-%d", peer, tc.what, tc.port,
					netip.AddrPortFrom(o.Packet.Src, o.Packet.SrcPort), tc.lo, tc.hi)
			}
		}
	}
	// A peer of a family the node does not serve gets no flows.
	v4only := n
	v4only.IPv6 = false
	for _, f := range tableFlows(BaseFlows(v4only), TableConntrackCommit) {
		if f.Match.Src.IsValid() && f.Match.Src.Addr().Is6() {
			t.Errorf("IPv4-only node: ConntrackCommit flow %v for an IPv6 peer", f)
		}
	}
}
