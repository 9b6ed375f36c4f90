package openflow

import (
	"net/netip"
	"reflect"
	"testing"
	"unsafe"
)

// dnatSelect builds a group as the pipeline does for a Service port without session affinity:
// one ct action per bucket, the buckets sharing one action list, one NAT array and one exec.
func dnatSelect(id uint32, targets ...string) *Group {
	g := &Group{ID: id, Type: GroupTypeSelect, HashFields: []string{"ip_src", "ip_dst", "tcp_src", "tcp_dst"},
		Buckets: make([]Bucket, len(targets))}
	nats, acts := make([]NAT, len(targets)), make([]Action, len(targets))
	exec := []Action{SetCtMark{Value: 0x10, Mask: 0x10}}
	for i, t := range targets {
		ap := netip.MustParseAddrPort(t)
		nats[i] = NAT{Kind: NATDst, Addr: ap.Addr(), Port: ap.Port()}
		acts[i] = CT{Commit: true, Zone: 65520, Table: 21, HasTable: true, NAT: &nats[i], Exec: exec}
		g.Buckets[i] = Bucket{ID: uint32(i), Weight: 100, Actions: acts[i : i+1 : i+1]}
	}
	return g
}

func mustGroup(t *testing.T, line string) *Group {
	t.Helper()
	g, err := ParseGroup(line)
	if err != nil {
		t.Fatalf("ParseGroup(%q): %v", line, err)
	}
	return &g
}

// TestPackGroupRoundTrip: a packed group comes back deeply equal, rendering the same; groups of
// another shape are kept as they are.
func TestPackGroupRoundTrip(t *testing.T) {
	for _, c := range []struct {
		name   string
		g      *Group
		packed bool
	}{
		{"IPv4 endpoints", dnatSelect(7, "10.0.0.1:80", "10.0.0.2:8080", "10.0.1.3:1"), true},
		{"IPv6 endpoints", dnatSelect(8, "[fd00::1]:80", "[fd00::2]:80"), true},
		{"an IPv4-mapped IPv6 endpoint stays IPv6", dnatSelect(9, "[::ffff:10.0.0.1]:80", "10.0.0.1:80"), true},
		{"one endpoint", dnatSelect(10, "10.0.0.1:80"), true},
		{"parsed, no exec", mustGroup(t, "group_id=3,type=select,selection_method=hash,fields(ip_src,ip_dst),bucket=bucket_id:0,weight:100,actions=ct(commit,table=6,zone=65520,nat(dst=10.0.0.2:8080)),bucket=bucket_id:1,weight:100,actions=ct(commit,table=6,zone=65520,nat(dst=10.0.0.3))"), true},
		{"parsed, own exec lists", mustGroup(t, "group_id=4,type=select,bucket=bucket_id:0,weight:100,actions=ct(commit,table=6,zone=65520,nat(dst=10.0.0.2:8080),exec(set_field:0x1/0x1->ct_mark)),bucket=bucket_id:1,weight:100,actions=ct(commit,table=6,zone=65520,nat(dst=10.0.0.3:8080),exec(set_field:0x1/0x1->ct_mark))"), true},
		{"affinity buckets (three actions)", mustGroup(t, "group_id=2,type=select,bucket=bucket_id:0,weight:100,actions=set_field:0xa000001->reg3,set_field:0x50->reg4,resubmit(,5)"), false},
		{"second-level groups", mustGroup(t, "group_id=5,type=select,bucket=bucket_id:0,weight:4,actions=group:6,bucket=bucket_id:1,weight:4,actions=group:7"), false},
		{"weights differ", mustGroup(t, "group_id=4,type=select,bucket=bucket_id:0,weight:100,actions=ct(commit,table=6,zone=65520,nat(dst=10.0.0.2:8080)),bucket=bucket_id:1,weight:50,actions=ct(commit,table=6,zone=65520,nat(dst=10.0.0.3:8080))"), false},
		{"zones differ", mustGroup(t, "group_id=4,type=select,bucket=bucket_id:0,weight:100,actions=ct(commit,table=6,zone=65520,nat(dst=10.0.0.2:8080)),bucket=bucket_id:1,weight:100,actions=ct(commit,table=6,zone=65521,nat(dst=10.0.0.3:8080))"), false},
		{"exec differs", mustGroup(t, "group_id=4,type=select,bucket=bucket_id:0,weight:100,actions=ct(commit,table=6,zone=65520,nat(dst=10.0.0.2:8080),exec(set_field:0x1/0x1->ct_mark)),bucket=bucket_id:1,weight:100,actions=ct(commit,table=6,zone=65520,nat(dst=10.0.0.3:8080),exec(set_field:0x2/0x2->ct_mark))"), false},
		{"NAT kinds differ", mustGroup(t, "group_id=4,type=select,bucket=bucket_id:0,weight:100,actions=ct(commit,table=6,zone=65520,nat(dst=10.0.0.2:8080)),bucket=bucket_id:1,weight:100,actions=ct(commit,table=6,zone=65520,nat(src=10.0.0.3:8080))"), false},
		{"a port range", mustGroup(t, "group_id=4,type=select,bucket=bucket_id:0,weight:100,actions=ct(commit,table=6,zone=65520,nat(src=10.0.0.2:8080-8090))"), false},
		{"bare nat", mustGroup(t, "group_id=4,type=select,bucket=bucket_id:0,weight:100,actions=ct(table=6,zone=65520,nat)"), false},
		{"bucket IDs out of order", mustGroup(t, "group_id=4,type=select,bucket=bucket_id:1,weight:100,actions=ct(commit,table=6,zone=65520,nat(dst=10.0.0.2:8080)),bucket=bucket_id:0,weight:100,actions=ct(commit,table=6,zone=65520,nat(dst=10.0.0.3:8080))"), false},
		{"no buckets", &Group{ID: 11, Type: GroupTypeSelect}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := PackGroup(c.g)
			if got := p.dnat != nil; got != c.packed {
				t.Fatalf("packed = %v, want %v", got, c.packed)
			}
			back := p.Group()
			if !c.packed && back != c.g {
				t.Errorf("a group of another shape is not kept as it is")
			}
			if !reflect.DeepEqual(back, c.g) {
				t.Errorf("unpacked group differs:\n got %#v\nwant %#v", back, c.g)
			}
			if FormatGroup(back) != FormatGroup(c.g) {
				t.Errorf("renders\n %s\nwant\n %s", FormatGroup(back), FormatGroup(c.g))
			}
			if p.ID() != c.g.ID || p.Len() != len(c.g.Buckets) {
				t.Errorf("ID, Len = %d, %d; want %d, %d", p.ID(), p.Len(), c.g.ID, len(c.g.Buckets))
			}
			if !p.Same(c.g) || !p.Same(PackGroup(c.g).Group()) {
				t.Errorf("not Same as the group it holds")
			}
		})
	}
}

// TestPackedGroupSame: Same tells every change of a packed group apart, and takes a group that
// renders the same as the same.
func TestPackedGroupSame(t *testing.T) {
	p := PackGroup(dnatSelect(7, "10.0.0.1:80", "10.0.0.2:80"))
	for _, c := range []struct {
		name   string
		change func(*Group)
		same   bool
	}{
		{"unchanged", func(*Group) {}, true},
		{"an exec list of its own, equal", func(g *Group) {
			ct := g.Buckets[1].Actions[0].(CT)
			ct.Exec = []Action{SetCtMark{Value: 0x10, Mask: 0x10}}
			g.Buckets[1].Actions = []Action{ct}
		}, true},
		{"an endpoint address", func(g *Group) { g.Buckets[1].Actions[0].(CT).NAT.Addr = netip.MustParseAddr("10.0.0.3") }, false},
		{"an endpoint port", func(g *Group) { g.Buckets[0].Actions[0].(CT).NAT.Port = 81 }, false},
		{"a weight", func(g *Group) { g.Buckets[0].Weight = 50 }, false},
		{"a bucket fewer", func(g *Group) { g.Buckets = g.Buckets[:1] }, false},
		{"the ID", func(g *Group) { g.ID = 8 }, false},
		{"the hash fields", func(g *Group) { g.HashFields = []string{"ip_src"} }, false},
		{"the selection parameter", func(g *Group) { g.SelectionParam = 3 }, false},
		{"the selection method", func(g *Group) { g.SelectionMethod = "dp_hash" }, false},
		{"the type", func(g *Group) { g.Type = "all" }, false},
		{"the ct table", func(g *Group) {
			ct := g.Buckets[0].Actions[0].(CT)
			ct.Table = 22
			g.Buckets[0].Actions = []Action{ct}
		}, false},
		{"the exec", func(g *Group) {
			ct := g.Buckets[0].Actions[0].(CT)
			ct.Exec = []Action{SetCtMark{Value: 0x20, Mask: 0x20}}
			g.Buckets[0].Actions = []Action{ct}
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := dnatSelect(7, "10.0.0.1:80", "10.0.0.2:80")
			c.change(g)
			if got := p.Same(g); got != c.same {
				t.Errorf("Same = %v, want %v\n%s\n%s", got, c.same, FormatGroup(p.Group()), FormatGroup(g))
			}
		})
	}
}

// TestPackedShapeCoversTheTypes: packing keeps a bucket's ID, weight and actions and compares
// a group's and a ct action's fields one by one; a field added to Group, Bucket or CT must be
// handled in packed.go first.
func TestPackedShapeCoversTheTypes(t *testing.T) {
	if n := reflect.TypeOf(Bucket{}).NumField(); n != 3 {
		t.Errorf("Bucket has %d fields; packed.go keeps ID, Weight and Actions only", n)
	}
	if n := reflect.TypeOf(Group{}).NumField(); n != 6 {
		t.Errorf("Group has %d fields; dnatGroup.equal compares ID, Type, HashFields, SelectionMethod, SelectionParam and the buckets", n)
	}
	if n := reflect.TypeOf(CT{}).NumField(); n != 6 {
		t.Errorf("CT has %d fields; dnatGroup.sameBucket compares six", n)
	}
	if n := reflect.TypeOf(NAT{}).NumField(); n != 4 {
		t.Errorf("NAT has %d fields; natTarget keeps the address and port, the kind is the group's, PortMax is 0", n)
	}
	if s := unsafe.Sizeof(natTarget{}); s != 20 {
		t.Errorf("a packed bucket is %d bytes, want 20", s)
	}
}
