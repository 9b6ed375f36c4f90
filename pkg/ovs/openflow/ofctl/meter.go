package ofctl

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

var _ openflow.Meters = (*Bridge)(nil)

// SetMeter adds m with `ovs-ofctl add-meter`, or, when the switch has its ID already
// (OFPMMFC_METER_EXISTS), modifies it with `ovs-ofctl mod-meter`.
func (b *Bridge) SetMeter(ctx context.Context, m openflow.Meter) error {
	if err := m.Check(); err != nil {
		return err
	}
	spec := openflow.FormatMeter(m)
	_, err := b.output(ctx, "add-meter", []string{"-O", "OpenFlow15", "add-meter", b.target, spec})
	if err != nil && strings.Contains(err.Error(), "OFPMMFC_METER_EXISTS") {
		_, err = b.output(ctx, "mod-meter", []string{"-O", "OpenFlow15", "mod-meter", b.target, spec})
	}
	return err
}

// MeterStats returns the counters of meter id, from `ovs-ofctl meter-stats`.
func (b *Bridge) MeterStats(ctx context.Context, id uint32) (openflow.MeterStats, error) {
	out, err := b.output(ctx, "meter-stats", []string{"-O", "OpenFlow15", "meter-stats", b.target, "meter=" + strconv.FormatUint(uint64(id), 10)})
	if err != nil {
		return openflow.MeterStats{}, err
	}
	st, err := openflow.ParseMeterStatsReply(out, id)
	if err != nil {
		return openflow.MeterStats{}, fmt.Errorf("ovs-ofctl meter-stats %s: %w", b.target, err)
	}
	return st, nil
}
