package native

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/ofconn"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// Meter mod (OFPT_METER_MOD) and meter statistics (OFPMP_METER_STATS) of OpenFlow 1.5.
const (
	typeMeterMod uint8 = 29

	meterAdd    uint16 = 0 // OFPMC_ADD
	meterModify uint16 = 1 // OFPMC_MODIFY

	meterFlagPktps uint16 = 2 // OFPMF_PKTPS
	meterFlagBurst uint16 = 4 // OFPMF_BURST
	meterFlagStats uint16 = 8 // OFPMF_STATS

	meterBandDrop uint16 = 1 // OFPMBT_DROP
	meterBandLen  uint16 = 16

	errTypeMeterModFailed uint16 = 12 // OFPET_METER_MOD_FAILED
	errCodeMeterExists    uint16 = 1  // OFPMMFC_METER_EXISTS

	multipartMeterStats uint16 = 9 // OFPMP_METER_STATS
	// meterStatsLen is ofp_meter_stats without its band stats: meter_id, len, 6 pad,
	// flow_count, packet_in_count, byte_in_count, duration_sec, duration_nsec.
	meterStatsLen     = 40
	meterBandStatsLen = 16
)

var _ openflow.Meters = (*Bridge)(nil)

// encodeMeterMod is the meter mod `ovs-ofctl -O OpenFlow15 add-meter` (command meterAdd) or
// `mod-meter` (meterModify) sends for openflow.FormatMeter(m).
func encodeMeterMod(xid uint32, command uint16, m openflow.Meter) []byte {
	var w buf
	start := w.header(typeMeterMod, xid)
	flags := meterFlagPktps | meterFlagStats
	if m.Burst != 0 {
		flags |= meterFlagBurst
	}
	w.u16(command)
	w.u16(flags)
	w.u32(m.ID)
	w.u16(meterBandDrop)
	w.u16(meterBandLen)
	w.u32(m.Rate)
	w.u32(m.Burst)
	w.zeros(4)
	w.setLen16(start, 2)
	return w.b
}

// SetMeter adds m over the persistent connection, or modifies it when the switch already has
// its ID. A barrier follows each meter mod, so the switch has applied it (or refused it) when
// SetMeter returns.
func (b *Bridge) SetMeter(ctx context.Context, m openflow.Meter) error {
	if err := m.Check(); err != nil {
		return err
	}
	err := b.meterMod(ctx, meterAdd, m)
	var se *ofconn.Error
	if errors.As(err, &se) && se.Type == errTypeMeterModFailed && se.Code == errCodeMeterExists {
		err = b.meterMod(ctx, meterModify, m)
	}
	if err != nil {
		return fmt.Errorf("openflow meter %d %s: %w", m.ID, b.target, err)
	}
	return nil
}

// meterMod sends one meter mod and a barrier and returns the switch's error, if any.
func (b *Bridge) meterMod(ctx context.Context, command uint16, m openflow.Meter) error {
	c, err := b.connection(ctx)
	if err != nil {
		return err
	}
	xid := c.ReserveXids(2)
	modCh, cancelMod := c.Expect(xid)
	defer cancelMod()
	barrierCh, cancelBarrier := c.Expect(xid + 1)
	defer cancelBarrier()
	msg := encodeMeterMod(xid, command, m)
	var w buf
	w.setLen16(w.header(typeBarrierRequest, xid+1), 2)
	if err := c.Write(ctx, append(msg, w.b...)); err != nil {
		return err
	}
	r, err := c.Await(ctx, barrierCh)
	if err != nil {
		return err
	}
	if r.Err != nil {
		return r.Err
	}
	// The switch answers in order: an error for the meter mod came before the barrier reply.
	select {
	case r := <-modCh:
		if r.Err != nil {
			return r.Err
		}
	default:
	}
	return nil
}

// encodeMeterStatsRequest is the OFPMP_METER_STATS request of `ovs-ofctl -O OpenFlow15
// meter-stats BRIDGE meter=ID`.
func encodeMeterStatsRequest(xid, id uint32) []byte {
	var w buf
	start := w.header(typeMultipartRequest, xid)
	w.u16(multipartMeterStats)
	w.u16(0) // flags
	w.zeros(4)
	w.u32(id)
	w.zeros(4)
	w.setLen16(start, 2)
	return w.b
}

// decodeMeterStatsReply returns the stats of meter id in one OFPMP_METER_STATS reply message,
// whether it was there, and whether more replies follow.
func decodeMeterStatsReply(msg []byte, id uint32) (openflow.MeterStats, bool, bool, error) {
	if len(msg) < multipartHeaderLen || msg[1] != typeMultipartReply {
		return openflow.MeterStats{}, false, false, fmt.Errorf("meter stats reply: not a multipart reply (%d bytes)", len(msg))
	}
	if t := binary.BigEndian.Uint16(msg[headerLen:]); t != multipartMeterStats {
		return openflow.MeterStats{}, false, false, fmt.Errorf("meter stats reply: multipart type %d, want %d", t, multipartMeterStats)
	}
	more := binary.BigEndian.Uint16(msg[headerLen+2:])&multipartMore != 0
	for body := msg[multipartHeaderLen:]; len(body) > 0; {
		if len(body) < meterStatsLen {
			return openflow.MeterStats{}, false, false, fmt.Errorf("meter stats reply: %d bytes left, want %d", len(body), meterStatsLen)
		}
		n := int(binary.BigEndian.Uint16(body[4:]))
		if n < meterStatsLen || n > len(body) || (n-meterStatsLen)%meterBandStatsLen != 0 {
			return openflow.MeterStats{}, false, false, fmt.Errorf("meter stats reply: entry length %d", n)
		}
		if binary.BigEndian.Uint32(body) == id {
			s := openflow.MeterStats{ID: id, Flows: binary.BigEndian.Uint32(body[12:]),
				Packets: binary.BigEndian.Uint64(body[16:]), Bytes: binary.BigEndian.Uint64(body[24:])}
			for band := body[meterStatsLen:n]; len(band) > 0; band = band[meterBandStatsLen:] {
				s.Dropped += binary.BigEndian.Uint64(band)
			}
			return s, true, more, nil
		}
		body = body[n:]
	}
	return openflow.MeterStats{}, false, more, nil
}

// MeterStats returns the counters of meter id over the persistent connection.
func (b *Bridge) MeterStats(ctx context.Context, id uint32) (openflow.MeterStats, error) {
	c, err := b.connection(ctx)
	if err != nil {
		return openflow.MeterStats{}, fmt.Errorf("openflow meter stats %s: %w", b.target, err)
	}
	var (
		stats openflow.MeterStats
		found bool
	)
	xid := c.NextXid()
	err = c.Multipart(ctx, xid, encodeMeterStatsRequest(xid, id), func(part []byte) (bool, error) {
		s, ok, _, err := decodeMeterStatsReply(part, id)
		stats, found = s, ok
		return ok, err
	})
	switch {
	case err != nil:
		return openflow.MeterStats{}, fmt.Errorf("openflow meter stats %s: %w", b.target, err)
	case !found:
		return openflow.MeterStats{}, fmt.Errorf("openflow meter stats %s: no meter %d", b.target, id)
	}
	return stats, nil
}
