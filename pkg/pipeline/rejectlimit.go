package pipeline

import (
	"slices"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// The reject groups and meters. Packets sent to the reject responder pass a select group that
// hashes the client address into one of NodeConfig.RejectMeters buckets; each bucket applies
// its own meter, then sends the packet to the controller. A client flooding closed ports uses
// up one meter's share of the rate: clients hashed to the other meters are still refused.
const (
	// RejectGroupIPv4 and RejectGroupIPv6 are the reject groups, above the IDs the proxier
	// hands out to Service ports (which count up from 1); the proxier never deletes them
	// (IsReservedGroup).
	RejectGroupIPv4 uint32 = 0xfffff000
	RejectGroupIPv6 uint32 = 0xfffff001
	// FirstRejectMeter is the ID of the first reject meter; the others follow.
	FirstRejectMeter uint32 = 1
)

// IsReservedGroup reports whether id is a group the agent installs for the pipeline rather
// than a Service port's.
func IsReservedGroup(id uint32) bool { return id == RejectGroupIPv4 || id == RejectGroupIPv6 }

// RejectActions are the actions of a flow that rejects a new connection: RejectAction, through
// the family's reject group when n.RejectMeters is set.
func RejectActions(n NodeConfig, ipv6 bool) []of.Action {
	if n.RejectMeters == 0 {
		return []of.Action{RejectAction()}
	}
	if ipv6 {
		return []of.Action{of.GroupAction{ID: RejectGroupIPv6}}
	}
	return []of.Action{of.GroupAction{ID: RejectGroupIPv4}}
}

// RejectLimit is the OVS side of the reject rate limit: Rate packets per second to the
// responder in total (bursts of Burst above it), split evenly over Meters meters.
type RejectLimit struct {
	Rate, Burst uint32
	Meters      uint32
}

// MeterList returns the meters: each Rate/Meters packets per second with bursts of
// Burst/Meters (at least 1 each).
func (l RejectLimit) MeterList() []of.Meter {
	out := make([]of.Meter, l.Meters)
	for i := range out {
		out[i] = of.Meter{ID: FirstRejectMeter + uint32(i), Rate: max(l.Rate/l.Meters, 1), Burst: max(l.Burst/l.Meters, 1)}
	}
	return out
}

// Groups returns the reject groups of the families n serves: select groups hashing the source
// address, one bucket per meter (meter, then RejectAction).
func (l RejectLimit) Groups(n NodeConfig) []*of.Group {
	var out []*of.Group
	for _, f := range []struct {
		on    bool
		id    uint32
		field string
	}{{n.IPv4, RejectGroupIPv4, "ip_src"}, {n.IPv6, RejectGroupIPv6, "ipv6_src"}} {
		if !f.on || l.Meters == 0 {
			continue
		}
		g := &of.Group{ID: f.id, Type: of.GroupTypeSelect, HashFields: []string{f.field}, Buckets: make([]of.Bucket, l.Meters)}
		for i := range g.Buckets {
			g.Buckets[i] = of.Bucket{ID: uint32(i), Weight: 100,
				Actions: []of.Action{of.MeterAction{ID: FirstRejectMeter + uint32(i)}, RejectAction()}}
		}
		out = append(out, g)
	}
	return slices.Clip(out)
}
