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
// the gateway and from the node itself (BitFromHost), and only podCIDRs of a served family get
// flows.
func TestGatewayFlowsPodSourceGuard(t *testing.T) {
	gw := Gateway{OFPort: 2, MAC: mustMAC(t, "0e:00:00:00:00:01"), IPv4: true, IPv6: true,
		PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24"), netip.MustParsePrefix("fd00:10:244:1::/64")}}
	want := `cookie=0x3050000000000,table=0,priority=210,ip,in_port=2,nw_src=10.244.1.1 actions=set_field:0x41/0x4f->reg0,goto_table:5
cookie=0x3050000000000,table=0,priority=205,ip,in_port=2,nw_src=10.244.1.0/24 actions=drop
cookie=0x3050000000000,table=0,priority=210,ipv6,in_port=2,ipv6_src=fd00:10:244:1::1 actions=set_field:0x41/0x4f->reg0,goto_table:5
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

// TestGatewayFlowsHostToLocalPod: the node's own Service connections DNATed to a local pod
// skip the SNAT of ServiceSNAT, in both families, above both SNAT flows of BaseFlows (their
// DNATed tuple is recorded in the SNAT zone instead, as for every connection not SNATed); to
// any other endpoint they are SNATed by the base flow for host connections.
func TestGatewayFlowsHostToLocalPod(t *testing.T) {
	gw := Gateway{OFPort: 2, MAC: mustMAC(t, "0e:00:00:00:00:01"), IPv4: true, IPv6: true,
		PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24"), netip.MustParsePrefix("fd00:10:244:1::/64")}}
	want := `cookie=0x3050000000000,table=16,priority=205,ct_state=+new+trk,ip,reg0=0x40/0x40,nw_dst=10.244.1.0/24 actions=ct(commit,table=20,zone=65521,exec(set_field:0x5/0x5->ct_mark))
cookie=0x3050000000000,table=16,priority=205,ct_state=+new+trk,ipv6,reg0=0x40/0x40,ipv6_dst=fd00:10:244:1::/64 actions=ct(commit,table=20,zone=65511,exec(set_field:0x5/0x5->ct_mark))
`
	if diff := cmp.Diff(want, renderFlows(tableFlows(GatewayFlows(3, gw), TableServiceSNAT))); diff != "" {
		t.Errorf("gateway ServiceSNAT flows (-want +got):\n%s", diff)
	}
	base := tableFlows(BaseFlows(NodeConfig{Round: 3, IPv4: true, GatewayOFPort: 2, GatewayIPv4: netip.MustParseAddr("169.254.0.253")}), TableServiceSNAT)
	wantBase := `cookie=0x3010000000000,table=16,priority=0 actions=goto_table:20
cookie=0x3010000000000,table=16,priority=190,ct_state=+new+trk,ip actions=ct(commit,table=20,zone=65521,exec(set_field:0x5/0x5->ct_mark))
cookie=0x3010000000000,table=16,priority=200,ct_state=+new+trk,ip,reg0=0x21/0x2f actions=ct(commit,table=20,zone=65521,nat(src=169.254.0.253),exec(set_field:0x2/0x2->ct_mark))
cookie=0x3010000000000,table=16,priority=201,ct_state=+new+trk,ip,reg0=0x40/0x40 actions=ct(commit,table=20,zone=65521,nat(src=169.254.0.253),exec(set_field:0x2/0x2->ct_mark))
`
	if diff := cmp.Diff(wantBase, renderFlows(base)); diff != "" {
		t.Errorf("base ServiceSNAT flows (-want +got):\n%s", diff)
	}
	for _, f := range base {
		if f.Priority >= priorityHostToLocalPod {
			t.Errorf("base ServiceSNAT flow %v is not below the exemption of host connections to local pods", f)
		}
	}
}

func classifierFlows(flows []of.Flow) []of.Flow { return tableFlows(flows, TableClassifier) }

func tableFlows(flows []of.Flow, table uint8) []of.Flow {
	var out []of.Flow
	for _, f := range flows {
		if f.Table == table {
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
