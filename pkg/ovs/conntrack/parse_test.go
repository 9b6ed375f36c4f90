package conntrack

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func tuple(src, dst string, sport, dport uint16) Tuple {
	return Tuple{Src: netip.MustParseAddr(src), Dst: netip.MustParseAddr(dst), SrcPort: sport, DstPort: dport}
}

func TestParseDump(t *testing.T) {
	out := strings.Join([]string{
		"udp,orig=(src=10.10.0.10,dst=10.96.0.53,sport=5300,dport=53),reply=(src=10.10.0.11,dst=10.10.0.10,sport=5353,dport=5300),zone=65520",
		"tcp,orig=(src=10.10.0.10,dst=10.96.0.80,sport=40000,dport=80),reply=(src=10.10.0.12,dst=10.10.0.10,sport=8080,dport=40000),zone=65520,mark=2,labels=0x1,protoinfo=(state=ESTABLISHED)",
		"udp,orig=(src=fd00:10::a,dst=fd00:96::35,sport=5300,dport=53),reply=(src=fd00:10::b,dst=fd00:10::a,sport=5353,dport=5300),zone=65510",
		"icmp,orig=(src=10.10.0.10,dst=10.10.0.11,id=7,type=8,code=0),reply=(src=10.10.0.11,dst=10.10.0.10,id=7,type=0,code=0),zone=1",
		"udp,orig=(src=10.10.0.10,dst=10.96.0.53,sport=5300", // truncated
		"garbage",
		"",
	}, "\n")
	got, bad := ParseDump(out)
	want := []Entry{
		{Zone: 65520, Proto: ProtoUDP, Orig: tuple("10.10.0.10", "10.96.0.53", 5300, 53), Reply: tuple("10.10.0.11", "10.10.0.10", 5353, 5300)},
		{Zone: 65520, Proto: ProtoTCP, Orig: tuple("10.10.0.10", "10.96.0.80", 40000, 80), Reply: tuple("10.10.0.12", "10.10.0.10", 8080, 40000)},
		{Zone: 65510, Proto: ProtoUDP, Orig: tuple("fd00:10::a", "fd00:96::35", 5300, 53), Reply: tuple("fd00:10::b", "fd00:10::a", 5353, 5300)},
		{Zone: 1, Proto: ProtoICMP, Orig: tuple("10.10.0.10", "10.10.0.11", 0, 0), Reply: tuple("10.10.0.11", "10.10.0.10", 0, 0)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("entries:\n got %v\nwant %v", got, want)
	}
	if bad != 2 {
		t.Errorf("bad lines = %d, want 2 (the truncated line and the garbage)", bad)
	}
	for i, e := range want[:3] {
		again, err := ParseEntry(e.String())
		if err != nil || again != e {
			t.Errorf("entry %d does not round-trip through String: %v, %v", i, again, err)
		}
	}
}

func TestEntryDNATedAndFlushArgs(t *testing.T) {
	dnat := Entry{Zone: 65520, Proto: ProtoUDP, Orig: tuple("10.10.0.10", "10.96.0.53", 5300, 53), Reply: tuple("10.10.0.11", "10.10.0.10", 5353, 5300)}
	plain := Entry{Zone: 65520, Proto: ProtoUDP, Orig: tuple("10.10.0.10", "10.96.0.53", 5300, 53), Reply: tuple("10.96.0.53", "10.10.0.10", 53, 5300)}
	if !dnat.DNATed() || plain.DNATed() {
		t.Errorf("DNATed: %v for the translated entry, %v for the plain one", dnat.DNATed(), plain.DNATed())
	}
	if got, want := dnat.FlushArgs(), []string{"zone=65520", "ct_nw_src=10.10.0.10,ct_nw_dst=10.96.0.53,ct_nw_proto=17,ct_tp_src=5300,ct_tp_dst=53"}; !reflect.DeepEqual(got, want) {
		t.Errorf("FlushArgs = %q, want %q", got, want)
	}
	v6 := Entry{Zone: 65510, Proto: ProtoUDP, Orig: tuple("fd00:10::a", "fd00:96::35", 5300, 53)}
	if got, want := v6.FlushArgs()[1], "ct_ipv6_src=fd00:10::a,ct_ipv6_dst=fd00:96::35,ct_nw_proto=17,ct_tp_src=5300,ct_tp_dst=53"; got != want {
		t.Errorf("IPv6 FlushArgs = %q, want %q", got, want)
	}
}

// TestTableTarget: the control socket is RunDir/ovs-vswitchd.ctl when it exists, else the
// pidfile's; every call is bounded and names what failed.
func TestTableTarget(t *testing.T) {
	dir := t.TempDir()
	var gotArgs []string
	tb := &Table{RunDir: dir, Run: func(_ context.Context, args []string) (string, error) {
		gotArgs = args
		return "udp,orig=(src=10.10.0.10,dst=10.96.0.53,sport=5300,dport=53),reply=(src=10.10.0.11,dst=10.10.0.10,sport=5353,dport=5300),zone=7\n", nil
	}}
	if _, err := tb.Dump(context.Background(), 7); err == nil {
		t.Fatal("Dump without a pidfile or control socket succeeded")
	}
	if err := os.WriteFile(filepath.Join(dir, "ovs-vswitchd.pid"), []byte("4242\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	entries, err := tb.Dump(context.Background(), 7)
	if err != nil || len(entries) != 1 {
		t.Fatalf("Dump = %v, %v", entries, err)
	}
	if want := []string{"-t", filepath.Join(dir, "ovs-vswitchd.4242.ctl"), "dpctl/dump-conntrack", "zone=7"}; !reflect.DeepEqual(gotArgs, want) {
		t.Errorf("args = %q, want %q", gotArgs, want)
	}
	if err := os.WriteFile(filepath.Join(dir, "ovs-vswitchd.ctl"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := tb.Delete(context.Background(), entries[0]); err != nil {
		t.Fatal(err)
	}
	if want := []string{"-t", filepath.Join(dir, "ovs-vswitchd.ctl"), "dpctl/flush-conntrack", "zone=7", "ct_nw_src=10.10.0.10,ct_nw_dst=10.96.0.53,ct_nw_proto=17,ct_tp_src=5300,ct_tp_dst=53"}; !reflect.DeepEqual(gotArgs, want) {
		t.Errorf("args = %q, want %q", gotArgs, want)
	}
}
