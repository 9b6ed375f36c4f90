package pipeline

import (
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

func renderFlows(flows []of.Flow) string {
	var sb strings.Builder
	for i := range flows {
		sb.WriteString(of.FormatFlow(&flows[i]))
		sb.WriteString("\n")
	}
	return sb.String()
}

func mustMAC(t *testing.T, s string) net.HardwareAddr {
	t.Helper()
	m, err := net.ParseMAC(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestPodFlowsGolden(t *testing.T) {
	podMAC := mustMAC(t, "0a:58:0a:0a:00:05")
	gwMAC := mustMAC(t, "0a:58:0a:0a:00:01")
	for _, tc := range []struct {
		name string
		gw   net.HardwareAddr
		ips  []string
		want string
	}{
		{
			name: "IPv4 with gateway MAC",
			gw:   gwMAC,
			ips:  []string{"10.10.0.5"},
			want: `cookie=0x3040000000007,table=0,priority=200,ip,in_port=7,dl_src=0a:58:0a:0a:00:05,nw_src=10.10.0.5 actions=set_field:0x2/0xf->reg0,goto_table:5
cookie=0x3040000000007,table=0,priority=190,in_port=7 actions=drop
cookie=0x3040000000007,table=0,priority=230,arp,in_port=7,dl_src=0a:58:0a:0a:00:05,arp_spa=10.10.0.5,arp_sha=0a:58:0a:0a:00:05 actions=NORMAL
cookie=0x3040000000007,table=0,priority=230,arp,in_port=7,dl_src=0a:58:0a:0a:00:05,arp_spa=0.0.0.0,arp_tpa=10.10.0.5,arp_op=1,arp_sha=0a:58:0a:0a:00:05 actions=NORMAL
cookie=0x3040000000007,table=0,priority=225,arp,in_port=7 actions=drop
cookie=0x3040000000007,table=0,priority=225,icmp6,in_port=7,icmp_type=134 actions=drop
cookie=0x3040000000007,table=0,priority=225,icmp6,in_port=7,icmp_type=135 actions=drop
cookie=0x3040000000007,table=0,priority=225,icmp6,in_port=7,icmp_type=136 actions=drop
cookie=0x3040000000007,table=0,priority=225,icmp6,in_port=7,icmp_type=137 actions=drop
cookie=0x3040000000007,table=20,priority=200,ip,nw_dst=10.10.0.5 actions=set_field:0a:58:0a:0a:00:01->eth_src,set_field:0a:58:0a:0a:00:05->eth_dst,output:7
cookie=0x3040000000007,table=16,priority=210,ct_state=+new+trk,ip,in_port=7,nw_dst=10.10.0.5 actions=ct(commit,table=20,zone=65521,nat(src=169.254.0.254),exec(set_field:0x2/0x2->ct_mark))
cookie=0x3040000000007,table=20,priority=210,ip,in_port=7,nw_dst=10.10.0.5 actions=set_field:0a:58:0a:0a:00:01->eth_src,set_field:0a:58:0a:0a:00:05->eth_dst,IN_PORT
`,
		},
		{
			name: "dual stack without gateway MAC",
			ips:  []string{"10.10.0.5", "fd00:10:10::5"},
			want: `cookie=0x3040000000007,table=0,priority=200,ip,in_port=7,dl_src=0a:58:0a:0a:00:05,nw_src=10.10.0.5 actions=set_field:0x2/0xf->reg0,goto_table:5
cookie=0x3040000000007,table=0,priority=200,ipv6,in_port=7,dl_src=0a:58:0a:0a:00:05,ipv6_src=fd00:10:10::5 actions=set_field:0x2/0xf->reg0,goto_table:5
cookie=0x3040000000007,table=0,priority=200,ipv6,in_port=7,dl_src=0a:58:0a:0a:00:05,ipv6_src=fe80::/10 actions=set_field:0x2/0xf->reg0,goto_table:5
cookie=0x3040000000007,table=0,priority=190,in_port=7 actions=drop
cookie=0x3040000000007,table=0,priority=230,arp,in_port=7,dl_src=0a:58:0a:0a:00:05,arp_spa=10.10.0.5,arp_sha=0a:58:0a:0a:00:05 actions=NORMAL
cookie=0x3040000000007,table=0,priority=230,arp,in_port=7,dl_src=0a:58:0a:0a:00:05,arp_spa=0.0.0.0,arp_tpa=10.10.0.5,arp_op=1,arp_sha=0a:58:0a:0a:00:05 actions=NORMAL
cookie=0x3040000000007,table=0,priority=230,icmp6,in_port=7,dl_src=0a:58:0a:0a:00:05,ipv6_src=fd00:10:10::5,icmp_type=135,icmp_code=0,nd_sll=0a:58:0a:0a:00:05 actions=NORMAL
cookie=0x3040000000007,table=0,priority=230,icmp6,in_port=7,dl_src=0a:58:0a:0a:00:05,icmp_type=136,icmp_code=0,nd_target=fd00:10:10::5,nd_tll=0a:58:0a:0a:00:05 actions=NORMAL
cookie=0x3040000000007,table=0,priority=230,icmp6,in_port=7,dl_src=0a:58:0a:0a:00:05,ipv6_src=fd00:10:10::5,icmp_type=135,icmp_code=0,nd_sll=00:00:00:00:00:00 actions=NORMAL
cookie=0x3040000000007,table=0,priority=230,icmp6,in_port=7,dl_src=0a:58:0a:0a:00:05,icmp_type=136,icmp_code=0,nd_target=fd00:10:10::5,nd_tll=00:00:00:00:00:00 actions=NORMAL
cookie=0x3040000000007,table=0,priority=230,icmp6,in_port=7,dl_src=0a:58:0a:0a:00:05,ipv6_src=::,icmp_type=135,icmp_code=0,nd_target=fd00:10:10::5,nd_sll=00:00:00:00:00:00 actions=NORMAL
cookie=0x3040000000007,table=0,priority=230,icmp6,in_port=7,dl_src=0a:58:0a:0a:00:05,ipv6_src=fe80::858:aff:fe0a:5,icmp_type=135,icmp_code=0,nd_sll=0a:58:0a:0a:00:05 actions=NORMAL
cookie=0x3040000000007,table=0,priority=230,icmp6,in_port=7,dl_src=0a:58:0a:0a:00:05,icmp_type=136,icmp_code=0,nd_target=fe80::858:aff:fe0a:5,nd_tll=0a:58:0a:0a:00:05 actions=NORMAL
cookie=0x3040000000007,table=0,priority=230,icmp6,in_port=7,dl_src=0a:58:0a:0a:00:05,ipv6_src=fe80::858:aff:fe0a:5,icmp_type=135,icmp_code=0,nd_sll=00:00:00:00:00:00 actions=NORMAL
cookie=0x3040000000007,table=0,priority=230,icmp6,in_port=7,dl_src=0a:58:0a:0a:00:05,icmp_type=136,icmp_code=0,nd_target=fe80::858:aff:fe0a:5,nd_tll=00:00:00:00:00:00 actions=NORMAL
cookie=0x3040000000007,table=0,priority=230,icmp6,in_port=7,dl_src=0a:58:0a:0a:00:05,ipv6_src=::,icmp_type=135,icmp_code=0,nd_target=fe80::858:aff:fe0a:5,nd_sll=00:00:00:00:00:00 actions=NORMAL
cookie=0x3040000000007,table=0,priority=225,arp,in_port=7 actions=drop
cookie=0x3040000000007,table=0,priority=225,icmp6,in_port=7,icmp_type=134 actions=drop
cookie=0x3040000000007,table=0,priority=225,icmp6,in_port=7,icmp_type=135 actions=drop
cookie=0x3040000000007,table=0,priority=225,icmp6,in_port=7,icmp_type=136 actions=drop
cookie=0x3040000000007,table=0,priority=225,icmp6,in_port=7,icmp_type=137 actions=drop
cookie=0x3040000000007,table=20,priority=200,ip,nw_dst=10.10.0.5 actions=set_field:0a:58:0a:0a:00:05->eth_dst,output:7
cookie=0x3040000000007,table=16,priority=210,ct_state=+new+trk,ip,in_port=7,nw_dst=10.10.0.5 actions=ct(commit,table=20,zone=65521,nat(src=169.254.0.254),exec(set_field:0x2/0x2->ct_mark))
cookie=0x3040000000007,table=20,priority=210,ip,in_port=7,nw_dst=10.10.0.5 actions=set_field:0a:58:0a:0a:00:05->eth_dst,IN_PORT
cookie=0x3040000000007,table=20,priority=200,ipv6,ipv6_dst=fd00:10:10::5 actions=set_field:0a:58:0a:0a:00:05->eth_dst,output:7
cookie=0x3040000000007,table=16,priority=210,ct_state=+new+trk,ipv6,in_port=7,ipv6_dst=fd00:10:10::5 actions=ct(commit,table=20,zone=65511,nat(src=fc01::aabb:ccdd:ef00),exec(set_field:0x2/0x2->ct_mark))
cookie=0x3040000000007,table=20,priority=210,ipv6,in_port=7,ipv6_dst=fd00:10:10::5 actions=set_field:0a:58:0a:0a:00:05->eth_dst,IN_PORT
`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ips []netip.Addr
			for _, s := range tc.ips {
				ips = append(ips, netip.MustParseAddr(s))
			}
			got := renderFlows(PodFlows(3, tc.gw, Pod{ID: 7, OFPort: 7, MAC: podMAC, IPs: ips}))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("pod flows (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPodCookieSelectsOnlyThatPod(t *testing.T) {
	c := PodCookie(9, 42)
	if CookieCategory(c) != CategoryPod || CookieObject(c) != 42 || CookieRound(c) != 9 {
		t.Fatalf("PodCookie(9, 42) = %#x: round %d category %v object %d", c, CookieRound(c), CookieCategory(c), CookieObject(c))
	}
	for _, other := range []uint64{PodCookie(9, 43), Cookie(9, CategoryService, 42), PodCookie(9, 42|1<<39)} {
		if other&PodCookieMask == c&PodCookieMask {
			t.Errorf("cookie %#x is selected by the mask of %#x", other, c)
		}
	}
	if PodCookie(1, 42)&PodCookieMask != c&PodCookieMask {
		t.Error("the pod cookie mask must select every round")
	}
}
