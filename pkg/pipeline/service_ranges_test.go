package pipeline

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// TestSourceRangesOfTheNodeItself: with loadBalancerSourceRanges, the node's own connections
// to an LB IP (BitFromHost, which reach OVS with the gateway's address) are decided by the
// node's IPs of the family, once, above every per-range entry: allowed (to the cluster group,
// even with externalTrafficPolicy=Local) when a node IP lies in a range, dropped otherwise —
// also when a range holds the gateway's address.
func TestSourceRangesOfTheNodeItself(t *testing.T) {
	n := NodeConfig{Round: 1, IPv4: true, IPv6: true, GatewayOFPort: 2,
		GatewayIPv4: netip.MustParseAddr("169.254.0.253"), GatewayIPv6: netip.MustParseAddr("fc01::aabb:ccdd:eeff"),
		NodeIPs: []netip.Addr{netip.MustParseAddr("192.168.77.10"), netip.MustParseAddr("fd00:77::10")}, NodeName: "n1"}
	fams := []struct {
		name                string
		ipv6                bool
		lb, ep              netip.Addr
		nodeRange, podRange string
	}{
		{"IPv4", false, netip.MustParseAddr("172.18.0.100"), netip.MustParseAddr("10.10.2.6"), "192.168.77.0/24", "10.10.0.0/16"},
		{"IPv6", true, netip.MustParseAddr("fd00:18::100"), netip.MustParseAddr("fd00:10:2::6"), "fd00:77::/64", "fd00:10::/32"},
	}
	for _, fam := range fams {
		for _, c := range []struct {
			name   string
			ranges []string
			local  bool
			want   string // actions of the node's flow
		}{
			{"node in range", []string{fam.podRange, fam.nodeRange}, false, "set_field:0x20/0x20->reg0,group:1"},
			{"node in range, eTP=Local", []string{fam.nodeRange}, true, "group:1"},
			{"node not in range", []string{fam.podRange}, false, "drop"},
			{"node not in range, eTP=Local", []string{fam.podRange}, true, "drop"},
		} {
			t.Run(fam.name+"/"+c.name, func(t *testing.T) {
				sp := model.ServicePort{Protocol: model.TCP, Port: 80, ExternalPolicyLocal: c.local,
					LoadBalancerIngress: []model.LBIngress{{IP: fam.lb, Decision: model.Decision{Program: true}}}}
				for _, r := range c.ranges {
					sp.SourceRanges = append(sp.SourceRanges, netip.MustParsePrefix(r))
				}
				eps := []model.Endpoint{{IP: fam.ep, Port: 8080, NodeName: "n2", Ready: true, Serving: true}}
				out := ServicePort(n, ServicePortInput{Port: sp, Endpoints: eps, IPv6: fam.ipv6, GroupID: 1, LocalGroupID: 2})
				var host []of.Flow
				var ranged int
				for _, f := range out.Flows {
					if f.Match.Dst.Addr() != fam.lb {
						continue
					}
					if len(f.Match.Regs) == 1 && f.Match.Regs[0] == (of.RegMatch{Reg: RegSource, Value: BitFromHost, Mask: BitFromHost}) {
						host = append(host, f)
						continue
					}
					if f.Match.Src.IsValid() {
						ranged++
						if f.Priority >= PriorityHostRange {
							t.Errorf("per-range flow at or above the node's flow: %s", of.FormatFlow(&f))
						}
					}
				}
				if len(host) != 1 || ranged == 0 {
					t.Fatalf("want one flow for the node itself and per-range flows, got %d and %d:\n%s", len(host), ranged, renderFlows(out.Flows))
				}
				text := of.FormatFlow(&host[0])
				if host[0].Priority != PriorityHostRange || host[0].Match.Src.IsValid() || !strings.HasSuffix(text, "actions="+c.want) {
					t.Errorf("want the node's flow at %d, any source, actions=%s; got %s", PriorityHostRange, c.want, text)
				}
			})
		}
	}
}

// TestSourceRangesWithoutNodeIPs: a node without an IP of the family is never in a range.
func TestSourceRangesWithoutNodeIPs(t *testing.T) {
	n := NodeConfig{Round: 1, IPv4: true, NodeIPs: []netip.Addr{netip.MustParseAddr("fd00:77::10")}}
	sp := model.ServicePort{Protocol: model.TCP, Port: 80, SourceRanges: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")},
		LoadBalancerIngress: []model.LBIngress{{IP: netip.MustParseAddr("172.18.0.100"), Decision: model.Decision{Program: true}}}}
	eps := []model.Endpoint{{IP: netip.MustParseAddr("10.10.2.6"), Port: 8080, Ready: true, Serving: true}}
	for _, f := range ServicePort(n, ServicePortInput{Port: sp, Endpoints: eps, GroupID: 1}).Flows {
		if f.Priority == PriorityHostRange && !strings.HasSuffix(of.FormatFlow(&f), "actions=drop") {
			t.Errorf("want the node's connection dropped, got %s", of.FormatFlow(&f))
		}
	}
}
