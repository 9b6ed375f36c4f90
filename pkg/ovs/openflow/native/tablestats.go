package native

import (
	"context"
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/ofconn"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// Multipart (OFPMP_*) request and reply layout of OpenFlow 1.5.
const (
	multipartTable uint16 = 3 // OFPMP_TABLE_STATS
	// multipartMore is OFPMPF_REPLY_MORE: more replies with the same xid follow.
	multipartMore = ofconn.MultipartReplyMore
	// multipartHeaderLen is the OpenFlow header, type, flags and 4 bytes of padding.
	multipartHeaderLen = headerLen + 8
	// tableStatsLen is one ofp_table_stats entry: table_id, 3 pad, active_count (32 bits),
	// lookup_count and matched_count (64 bits each).
	tableStatsLen = 24
)

var _ openflow.TableCounter = (*Bridge)(nil)

// encodeTableStatsRequest is the OFPMP_TABLE_STATS request `ovs-ofctl -O OpenFlow15
// dump-tables` sends.
func encodeTableStatsRequest(xid uint32) []byte {
	var w buf
	start := w.header(typeMultipartRequest, xid)
	w.u16(multipartTable)
	w.u16(0) // flags
	w.zeros(4)
	w.setLen16(start, 2)
	return w.b
}

// decodeTableStatsReply appends the entries of one OFPMP_TABLE_STATS reply message to out and
// says whether more replies follow.
func decodeTableStatsReply(msg []byte, out []openflow.TableStats) ([]openflow.TableStats, bool, error) {
	if len(msg) < multipartHeaderLen || msg[1] != typeMultipartReply {
		return out, false, fmt.Errorf("table stats reply: not a multipart reply (%d bytes, type %d)", len(msg), msg[1])
	}
	if t := binary.BigEndian.Uint16(msg[headerLen:]); t != multipartTable {
		return out, false, fmt.Errorf("table stats reply: multipart type %d, want %d", t, multipartTable)
	}
	more := binary.BigEndian.Uint16(msg[headerLen+2:])&multipartMore != 0
	body := msg[multipartHeaderLen:]
	if len(body)%tableStatsLen != 0 {
		return out, false, fmt.Errorf("table stats reply: body of %d bytes is not a multiple of %d", len(body), tableStatsLen)
	}
	for ; len(body) > 0; body = body[tableStatsLen:] {
		out = append(out, openflow.TableStats{
			Table:   body[0],
			Active:  uint64(binary.BigEndian.Uint32(body[4:])),
			Lookups: binary.BigEndian.Uint64(body[8:]),
			Matches: binary.BigEndian.Uint64(body[16:]),
		})
	}
	return out, more, nil
}

// TableStats returns every table's statistics (OFPMP_TABLE_STATS) over the persistent
// connection, dialling it when there is none: the switch answers from its per-table counters
// without walking the flows, and no ovs-ofctl process runs. The result is sorted by table.
func (b *Bridge) TableStats(ctx context.Context) ([]openflow.TableStats, error) {
	c, err := b.connection(ctx)
	if err != nil {
		return nil, fmt.Errorf("openflow table stats %s: %w", b.target, err)
	}
	var out []openflow.TableStats
	xid := c.NextXid()
	err = c.Multipart(ctx, xid, encodeTableStatsRequest(xid), func(part []byte) (bool, error) {
		var err error
		out, _, err = decodeTableStatsReply(part, out)
		return false, err
	})
	if err != nil {
		return nil, fmt.Errorf("openflow table stats %s: %w", b.target, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Table < out[j].Table })
	return out, nil
}
