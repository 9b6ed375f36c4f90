package pipeline

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
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
