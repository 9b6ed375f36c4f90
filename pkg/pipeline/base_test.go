package pipeline

import (
	"net/netip"
	"testing"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// TestZeroSNATOnlyForServiceTuples: ConntrackCommit commits with nat only the connections
// whose tuple SNATConntrackZone found to be a Service connection's DNATed tuple
// (BitServiceTuple), in both families. A zero SNAT that moves nothing leaves OVS 3.1 an un-NAT
// entry with the connection's own tuple, on which ovs-vswitchd aborts once the connection
// expired (docs/design/ovs-pipeline.md, "Conntrack zones and marks").
func TestZeroSNATOnlyForServiceTuples(t *testing.T) {
	n := NodeConfig{Round: 1, IPv4: true, IPv6: true, GatewayOFPort: 2,
		GatewayIPv4: netip.MustParseAddr("169.254.0.253"), GatewayIPv6: netip.MustParseAddr("fd00::253")}
	flows := BaseFlows(n)
	var plain, zeroSNAT int
	for _, f := range tableFlows(flows, TableConntrackCommit) {
		for _, a := range f.Actions {
			ct, ok := a.(of.CT)
			if !ok {
				continue
			}
			tagged := len(f.Match.Regs) == 1 && f.Match.Regs[0] == of.RegMatch{Reg: RegSource, Value: BitServiceTuple, Mask: BitServiceTuple}
			switch {
			case ct.NAT == nil:
				plain++
			case tagged && ct.NAT.Kind == of.NATSrc && f.Priority > PriorityNormal:
				zeroSNAT++
			default:
				t.Errorf("ConntrackCommit flow %v: nat on a connection not tagged BitServiceTuple", f)
			}
		}
	}
	if plain != 2 || zeroSNAT != 2 {
		t.Errorf("ConntrackCommit: %d plain commits and %d zero-SNAT commits, want one of each per family", plain, zeroSNAT)
	}
	// The tag comes from entries of the SNAT zone in the original direction: SNAT entries and
	// the records of connections not SNATed.
	tags := map[uint32]int{}
	for _, f := range tableFlows(flows, TableSNATConntrackZone) {
		if f.Priority == PriorityServiceTuple && f.Match.CtMark != nil && f.Match.CtState != nil && f.Match.CtState.Unset&of.CtRpl != 0 {
			tags[f.Match.CtMark.Value]++
		}
	}
	if tags[CtMarkSNAT] != 2 || tags[CtMarkServiceTuple] != 2 {
		t.Errorf("SNATConntrackZone tags %v (by ct_mark), want CtMarkSNAT and CtMarkServiceTuple in both families", tags)
	}
	// Every new Service connection that ServiceSNAT leaves alone is recorded with
	// CtMarkServiceTuple, below the SNAT flows.
	for _, f := range tableFlows(flows, TableServiceSNAT) {
		if f.Priority != PriorityLow {
			continue
		}
		ct, ok := f.Actions[0].(of.CT)
		if !ok || !ct.Commit || ct.NAT != nil || (ct.Zone != ZoneSNATV4 && ct.Zone != ZoneSNATV6) {
			t.Errorf("ServiceSNAT flow %v: want a commit without nat in the SNAT zone", f)
		}
	}
}
