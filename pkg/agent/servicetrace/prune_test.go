package servicetrace

import (
	"net/netip"
	"testing"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

// TestPrune: ServiceLB flows for other addresses are left out, those without a destination or
// whose prefix holds it are kept, and a flow before ServiceLB that may rewrite the destination
// keeps everything.
func TestPrune(t *testing.T) {
	dst := netip.MustParseAddr("10.96.0.10")
	lb := func(p string) of.Flow {
		f := of.Flow{Table: pipeline.TableServiceLB, Priority: 200}
		if p != "" {
			f.Match.Dst = netip.MustParsePrefix(p)
		}
		return f
	}
	other := of.Flow{Table: pipeline.TableL3Forwarding, Match: of.Match{Dst: netip.MustParsePrefix("10.10.1.6/32")}}
	flows := []of.Flow{lb("10.96.0.10/32"), lb("10.96.0.11/32"), lb(""), lb("10.96.0.0/12"), other}
	if got := prune(flows, dst); len(got) != 4 {
		t.Fatalf("prune kept %d flows, want 4 (all but 10.96.0.11): %v", len(got), got)
	}
	for _, f := range prune(flows, dst) {
		if f.Match.Dst == netip.MustParsePrefix("10.96.0.11/32") {
			t.Errorf("kept the flow of another address")
		}
	}
	rewrite := of.Flow{Table: pipeline.TableConntrackZone, Actions: []of.Action{of.CT{Commit: true, HasTable: true, Table: 11,
		NAT: &of.NAT{Kind: of.NATDst, Addr: netip.MustParseAddr("10.10.1.9")}}}}
	if got := prune(append([]of.Flow{rewrite}, flows...), dst); len(got) != len(flows)+1 {
		t.Errorf("with a DNAT before ServiceLB, prune kept %d of %d flows", len(got), len(flows)+1)
	}
}
