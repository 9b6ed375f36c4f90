package pipeline

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

func TestGatewayFlowsGolden(t *testing.T) {
	gw := Gateway{OFPort: 2, MAC: mustMAC(t, "0e:00:00:00:00:01"), IPv4: true,
		NodePortVirtualIPs: []netip.Addr{netip.MustParseAddr("169.254.0.252"), netip.MustParseAddr("fc01::aabb:ccdd:eefe")}}
	want := `cookie=0x3050000000000,table=20,priority=190,ip actions=set_field:0e:00:00:00:00:01->eth_dst,output:2
cookie=0x3050000000000,table=20,priority=195,ct_mark=0x1/0x1,ip,in_port=2 actions=set_field:0e:00:00:00:00:01->eth_dst,IN_PORT
cookie=0x3050000000000,table=20,priority=195,ct_mark=0x2/0x2,ip,in_port=2 actions=set_field:0e:00:00:00:00:01->eth_dst,IN_PORT
cookie=0x3050000000000,table=12,priority=200,ip,nw_dst=169.254.0.252 actions=set_field:0x10/0x10->reg0,resubmit(,13),goto_table:14
`
	if diff := cmp.Diff(want, renderFlows(GatewayFlows(3, gw))); diff != "" {
		t.Errorf("IPv4 gateway flows (-want +got):\n%s", diff)
	}

	gw.IPv4, gw.IPv6 = false, true
	want6 := `cookie=0x3050000000000,table=20,priority=190,ipv6 actions=set_field:0e:00:00:00:00:01->eth_dst,output:2
cookie=0x3050000000000,table=20,priority=195,ct_mark=0x1/0x1,ipv6,in_port=2 actions=set_field:0e:00:00:00:00:01->eth_dst,IN_PORT
cookie=0x3050000000000,table=20,priority=195,ct_mark=0x2/0x2,ipv6,in_port=2 actions=set_field:0e:00:00:00:00:01->eth_dst,IN_PORT
cookie=0x3050000000000,table=12,priority=200,ipv6,ipv6_dst=fc01::aabb:ccdd:eefe actions=set_field:0x10/0x10->reg0,resubmit(,13),goto_table:14
`
	if diff := cmp.Diff(want6, renderFlows(GatewayFlows(3, gw))); diff != "" {
		t.Errorf("IPv6 gateway flows (-want +got):\n%s", diff)
	}
}

// TestGatewayFlowsPodSourceGuard: a packet from the gateway with a local pod's source address
// (a copy of a pod's packet the host forwarded back into OVS) is dropped before conntrack, in
// both families; the gateway's own address (the first of each podCIDR) is classified as from
// the gateway, and only podCIDRs of a served family get flows.
func TestGatewayFlowsPodSourceGuard(t *testing.T) {
	gw := Gateway{OFPort: 2, MAC: mustMAC(t, "0e:00:00:00:00:01"), IPv4: true, IPv6: true,
		PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24"), netip.MustParsePrefix("fd00:10:244:1::/64")}}
	want := `cookie=0x3050000000000,table=0,priority=210,ip,in_port=2,nw_src=10.244.1.1 actions=set_field:0x1/0xf->reg0,goto_table:5
cookie=0x3050000000000,table=0,priority=205,ip,in_port=2,nw_src=10.244.1.0/24 actions=drop
cookie=0x3050000000000,table=0,priority=210,ipv6,in_port=2,ipv6_src=fd00:10:244:1::1 actions=set_field:0x1/0xf->reg0,goto_table:5
cookie=0x3050000000000,table=0,priority=205,ipv6,in_port=2,ipv6_src=fd00:10:244:1::/64 actions=drop
`
	if diff := cmp.Diff(want, renderFlows(classifierFlows(GatewayFlows(3, gw)))); diff != "" {
		t.Errorf("gateway Classifier flows (-want +got):\n%s", diff)
	}
	gw.IPv6 = false
	if n := len(classifierFlows(GatewayFlows(3, gw))); n != 2 {
		t.Errorf("IPv4-only gateway with a dual-stack podCIDR list: %d Classifier flows, want 2 (IPv4 only)", n)
	}
}

func classifierFlows(flows []of.Flow) []of.Flow {
	var out []of.Flow
	for _, f := range flows {
		if f.Table == TableClassifier {
			out = append(out, f)
		}
	}
	return out
}

func TestGatewayFlowsCookie(t *testing.T) {
	gw := Gateway{OFPort: 2, MAC: mustMAC(t, "0e:00:00:00:00:01"), IPv4: true, IPv6: true}
	for _, f := range GatewayFlows(7, gw) {
		if CookieCategory(f.Cookie) != CategoryGateway || CookieRound(f.Cookie) != 7 || CookieObject(f.Cookie) != 0 {
			t.Errorf("flow %v has cookie %#x, want round 7, category gateway, object 0", f, f.Cookie)
		}
	}
	if got := CategoryGateway.String(); got != "gateway" {
		t.Errorf("CategoryGateway.String() = %q", got)
	}
	if n := len(GatewayFlows(7, gw)); n != 6 {
		t.Errorf("dual-stack gateway without NodePort virtual IPs: %d flows, want 6", n)
	}
}
