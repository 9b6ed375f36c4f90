package openflow

import (
	"context"
	"fmt"
)

// Meter is an OpenFlow meter with one drop band in packets per second: packets above Rate
// per second (with bursts of up to Burst packets above it) are dropped. Its statistics are
// kept (the stats flag), so MeterStats can report the drops.
type Meter struct {
	ID    uint32
	Rate  uint32 // packets per second
	Burst uint32 // packets; 0 lets the switch choose (Open vSwitch: Rate)
}

// MeterAction sends the packet through a meter. Open vSwitch accepts it only as the first
// action of a list (ovs-actions(7)); in OpenFlow 1.5 it is an action, not an instruction.
type MeterAction struct{ ID uint32 }

func (MeterAction) isAction() {}

// MeterStats are one meter's counters (OFPMP_METER_STATS).
type MeterStats struct {
	ID uint32
	// Flows is the number of flows that use the meter.
	Flows uint32
	// Packets and Bytes entered the meter.
	Packets, Bytes uint64
	// Dropped is the packets its drop band dropped.
	Dropped uint64
}

// Meters programs and reads meters. Meter mods cannot be part of a bundle (Open vSwitch
// bundles take flow and group mods only), so they are not Bridge ops: a meter must exist
// before the flows that use it are added (the switch refuses them otherwise), and it is lost
// with the switch's flows when ovs-vswitchd restarts. Both backends implement it.
type Meters interface {
	// SetMeter adds the meter, or modifies it when its ID exists.
	SetMeter(ctx context.Context, m Meter) error
	// MeterStats returns the counters of meter id.
	MeterStats(ctx context.Context, id uint32) (MeterStats, error)
}

// FormatMeter renders m as `ovs-ofctl add-meter` takes it.
func FormatMeter(m Meter) string {
	s := fmt.Sprintf("meter=%d,pktps,", m.ID)
	if m.Burst != 0 {
		s += "burst,"
	}
	s += fmt.Sprintf("stats,band=type=drop,rate=%d", m.Rate)
	if m.Burst != 0 {
		s += fmt.Sprintf(",burst_size=%d", m.Burst)
	}
	return s
}

// Check reports what is wrong with m: a zero ID or rate, or an ID above the switch's
// largest (0xffff0000, OFPM_MAX).
func (m Meter) Check() error {
	switch {
	case m.ID == 0 || m.ID > MaxMeterID:
		return fmt.Errorf("meter id %d is not in [1, %d]", m.ID, MaxMeterID)
	case m.Rate == 0:
		return fmt.Errorf("meter %d: rate must be positive", m.ID)
	}
	return nil
}

// MaxMeterID is the largest meter ID (OFPM_MAX).
const MaxMeterID = 0xffff0000
