package openflow_test

import (
	"fmt"
	"net/netip"
	"reflect"
	"runtime"
	"testing"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// TestCTActions checks that actions boxed in place are the same values as actions boxed one by
// one: equal, rendered alike and asserted back to their CT, also after the array is no longer
// referenced but through them.
func TestCTActions(t *testing.T) {
	build := func() []of.CT {
		cts := make([]of.CT, 5)
		for i := range cts {
			nat := &of.NAT{Kind: of.NATDst, Addr: netip.MustParseAddr(fmt.Sprintf("10.0.0.%d", i+1)), Port: uint16(80 + i)}
			cts[i] = of.CT{Commit: true, Zone: 65520, Table: 3, HasTable: true, NAT: nat,
				Exec: []of.Action{of.SetCtMark{Value: 1, Mask: 1}}}
		}
		return cts
	}
	want := build()
	got := of.CTActions(build())
	runtime.GC()
	if len(got) != len(want) {
		t.Fatalf("got %d actions, want %d", len(got), len(want))
	}
	for i := range want {
		var boxed of.Action = want[i]
		ct, ok := got[i].(of.CT)
		if !ok || !reflect.DeepEqual(ct, want[i]) || !reflect.DeepEqual(got[i], boxed) {
			t.Fatalf("action %d: got %#v, want %#v", i, got[i], boxed)
		}
		fw := of.Flow{Table: 1, Actions: []of.Action{boxed}}
		fg := of.Flow{Table: 1, Actions: got[i : i+1]}
		if a, b := of.FormatFlow(&fg), of.FormatFlow(&fw); a != b {
			t.Fatalf("action %d renders %q, want %q", i, a, b)
		}
	}
	if n := len(of.CTActions(nil)); n != 0 {
		t.Fatalf("CTActions(nil) has %d actions", n)
	}
}
