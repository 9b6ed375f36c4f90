package pipeline

import (
	"net/netip"
	"testing"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/oftrace"
)

// TestOtherPortsOfAClusterIPAreRejected traces new connections from a pod, in both families,
// through the base flows and a two-port Service whose first port carries RejectOtherPorts: its
// defined ports are DNATed to their endpoint, any other TCP or UDP port of its ClusterIPs goes to the
// reject responder (kube-proxy nftables rejects it too), new ICMP to the ClusterIP and
// connections to any other address continue as before (NORMAL), and without RejectOtherPorts
// the other ports continue too.
func TestOtherPortsOfAClusterIPAreRejected(t *testing.T) {
	n := NodeConfig{Round: 1, IPv4: true, IPv6: true, GatewayOFPort: 2,
		GatewayIPv4: netip.MustParseAddr("10.10.1.1"), GatewayIPv6: netip.MustParseAddr("fd00:10:1::1"), NodeName: "n1"}
	clusterIPs := []netip.Addr{netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("fd00:96::10")}
	eps := []model.Endpoint{{IP: netip.MustParseAddr("10.10.2.6"), Port: 8080, NodeName: "n2", Ready: true, Serving: true},
		{IP: netip.MustParseAddr("fd00:10:2::6"), Port: 8080, NodeName: "n2", Ready: true, Serving: true}}
	build := func(reject bool) *oftrace.Tracer {
		flows, groups := BaseFlows(n), []of.Group(nil)
		for i, port := range []struct {
			num   uint16
			proto model.Protocol
		}{{80, model.TCP}, {53, model.UDP}} {
			for f, ipv6 := range []bool{false, true} {
				id := uint32(1 + 2*i + f)
				out := ServicePort(n, ServicePortInput{IPv6: ipv6, GroupID: id, Endpoints: eps,
					Port:             model.ServicePort{Protocol: port.proto, Port: port.num, ClusterIPs: clusterIPs},
					RejectOtherPorts: reject && i == 0})
				flows = append(flows, out.Flows...)
				for _, g := range out.Groups {
					groups = append(groups, *g)
				}
			}
		}
		tr, err := oftrace.New(flows, groups, oftrace.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	withReject, without := build(true), build(false)
	pod := map[bool]netip.Addr{false: netip.MustParseAddr("10.10.1.5"), true: netip.MustParseAddr("fd00:10:1::5")}
	for i, ip := range clusterIPs {
		ipv6 := i == 1
		et, icmp := of.EthTypeIP, of.ProtoICMP
		if ipv6 {
			et, icmp = of.EthTypeIPv6, of.ProtoICMPv6
		}
		other := netip.MustParseAddr("10.96.0.11")
		if ipv6 {
			other = netip.MustParseAddr("fd00:96::11")
		}
		for _, tc := range []struct {
			what     string
			dst      netip.Addr
			proto    of.IPProto
			port     uint16
			want     oftrace.OutcomeKind
			withoutK oftrace.OutcomeKind
		}{
			{"its TCP port", ip, of.ProtoTCP, 80, oftrace.Normal, oftrace.Normal},
			{"its UDP port", ip, of.ProtoUDP, 53, oftrace.Normal, oftrace.Normal},
			{"another TCP port", ip, of.ProtoTCP, 81, oftrace.Controller, oftrace.Normal},
			{"its TCP port number over UDP", ip, of.ProtoUDP, 80, oftrace.Controller, oftrace.Normal},
			{"ICMP", ip, icmp, 0, oftrace.Normal, oftrace.Normal},
			{"an address no Service has", other, of.ProtoTCP, 81, oftrace.Normal, oftrace.Normal},
		} {
			p := oftrace.Packet{InPort: 5, EthType: et, Proto: tc.proto, Src: pod[ipv6], Dst: tc.dst,
				SrcPort: 40000, DstPort: tc.port, TCPFlags: of.TCPSyn, ICMPType: 8}
			if tc.proto == icmp {
				p.SrcPort, p.DstPort, p.TCPFlags = 0, 0, 0
				if ipv6 {
					p.ICMPType = 128
				}
			}
			for _, c := range []struct {
				tr   *oftrace.Tracer
				want oftrace.OutcomeKind
				name string
			}{{withReject, tc.want, "RejectOtherPorts"}, {without, tc.withoutK, "no RejectOtherPorts"}} {
				res, err := c.tr.Trace(p, oftrace.NewConntrack())
				if err != nil {
					t.Fatalf("%s, %s, %s: %v", ip, tc.what, c.name, err)
				}
				got, ok := res.Single()
				if !ok || got.Kind != c.want {
					t.Errorf("%s, %s, %s: want %v, got:\n%s", ip, tc.what, c.name, c.want, res)
					continue
				}
				// A defined port is DNATed to its endpoint; nothing else is.
				if dnat := got.Packet.Dst == eps[i].IP; dnat != (tc.port == 80 && tc.proto == of.ProtoTCP || tc.port == 53 && tc.proto == of.ProtoUDP) {
					t.Errorf("%s, %s, %s: left for %s", ip, tc.what, c.name, got.Packet.Dst)
				}
			}
		}
	}
}
