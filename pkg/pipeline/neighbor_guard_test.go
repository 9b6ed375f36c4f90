package pipeline

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLinkLocalEUI64(t *testing.T) {
	for mac, want := range map[string]string{
		"0a:58:0a:0a:00:05": "fe80::858:aff:fe0a:5",
		"00:00:5e:00:53:01": "fe80::200:5eff:fe00:5301",
	} {
		if got := LinkLocalEUI64(mustMAC(t, mac)); got != netip.MustParseAddr(want) {
			t.Errorf("LinkLocalEUI64(%s) = %s, want %s", mac, got, want)
		}
	}
}

// TestNeighborGuardWithoutAddresses: a pod without an address of a family may claim nothing in
// it: every ARP and neighbour discovery message from its port is dropped.
func TestNeighborGuardWithoutAddresses(t *testing.T) {
	got := renderFlows(NeighborGuardFlows(PodCookie(3, 7), Pod{ID: 7, OFPort: 7, MAC: mustMAC(t, "0a:58:0a:0a:00:05")}))
	want := `cookie=0x3040000000007,table=0,priority=225,arp,in_port=7 actions=drop
cookie=0x3040000000007,table=0,priority=225,icmp6,in_port=7,icmp_type=134 actions=drop
cookie=0x3040000000007,table=0,priority=225,icmp6,in_port=7,icmp_type=135 actions=drop
cookie=0x3040000000007,table=0,priority=225,icmp6,in_port=7,icmp_type=136 actions=drop
cookie=0x3040000000007,table=0,priority=225,icmp6,in_port=7,icmp_type=137 actions=drop
`
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("guard of a pod without addresses (-want +got):\n%s", d)
	}
}
