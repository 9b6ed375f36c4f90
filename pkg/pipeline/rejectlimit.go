package pipeline

import (
	"net/netip"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// The reject meters. A flow that rejects copies the low bits of the client address into
// RegRejectShard and resubmits to RejectMeter, where one flow per shard sends the packet
// through its own meter, then to the reject responder. NodeConfig.RejectMeters meters (a
// power of two) share the rate, so a client flooding closed ports uses up its shard's share
// only: clients of the other shards are still refused. (Open vSwitch 3.1 accepts a meter in a
// group bucket but does not apply it, so the shards are flows.)
const (
	// FirstRejectMeter is the ID of the first reject meter; the others follow.
	FirstRejectMeter uint32 = 1
	// MaxRejectMeters bounds NodeConfig.RejectMeters.
	MaxRejectMeters = 256
)

// RejectActions are the actions of a flow that rejects a new connection: RejectAction, or,
// with n.RejectMeters, the copy of the client address's shard and the resubmit to RejectMeter.
func RejectActions(n NodeConfig, ipv6 bool) []of.Action {
	if n.RejectMeters == 0 {
		return []of.Action{RejectAction()}
	}
	src := "NXM_OF_IP_SRC"
	if ipv6 {
		src = "NXM_NX_IPV6_SRC"
	}
	top := uint16(shardBits(n.RejectMeters) - 1)
	return []of.Action{
		of.Move{Src: of.Subfield{Field: src, Start: 0, End: top}, Dst: of.Subfield{Field: "NXM_NX_REG5", Start: 0, End: top}},
		of.Resubmit{Table: TableRejectMeter},
	}
}

// shardBits is log2 of meters (a power of two, at least 2 so that the move has a bit).
func shardBits(meters uint32) int {
	bits := 1
	for 1<<bits < meters {
		bits++
	}
	return bits
}

// rejectMeterFlows are RejectMeter's flows: per family and shard, the shard's meter, then the
// responder.
func rejectMeterFlows(n NodeConfig) []of.Flow {
	if n.RejectMeters == 0 {
		return nil
	}
	c := Cookie(n.Round, CategoryBase, 0)
	mask := uint32(1)<<shardBits(n.RejectMeters) - 1
	var flows []of.Flow
	for _, f := range []struct {
		on  bool
		eth of.EthType
	}{{n.IPv4, of.EthTypeIP}, {n.IPv6, of.EthTypeIPv6}} {
		if !f.on {
			continue
		}
		for k := uint32(0); k <= mask; k++ {
			flows = append(flows, of.Flow{Table: TableRejectMeter, Priority: PriorityNormal, Cookie: c,
				Match:   of.Match{EthType: f.eth, Regs: []of.RegMatch{{Reg: RegRejectShard, Value: k, Mask: mask}}},
				Actions: []of.Action{of.MeterAction{ID: FirstRejectMeter + k%n.RejectMeters}, RejectAction()}})
		}
	}
	return flows
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

// RejectShard returns the reject meter (FirstRejectMeter + shard) a client address uses with
// meters meters: its low bits.
func RejectShard(src netip.Addr, meters uint32) uint32 {
	if meters == 0 {
		return 0
	}
	b := src.AsSlice()
	low := uint32(b[len(b)-2])<<8 | uint32(b[len(b)-1])
	return FirstRejectMeter + low&(1<<shardBits(meters)-1)%meters
}
