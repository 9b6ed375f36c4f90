package openflow

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// AggregateStats is an aggregate statistics reply (ovs-ofctl dump-aggregate).
type AggregateStats struct {
	PacketCount uint64
	ByteCount   uint64
	FlowCount   uint64
}

// AggregateReader reads aggregate flow statistics (OFPMP_AGGREGATE_FLOW): the flow, packet
// and byte counts of the flows a filter selects (an exact cookie and mask select one flow).
type AggregateReader interface {
	AggregateStats(ctx context.Context, filter FlowFilter) (AggregateStats, error)
}

// ParseAggregateReply parses the output of `ovs-ofctl -O OpenFlow15 dump-aggregate`, e.g.
// "OFPST_AGGREGATE reply (OF1.5) (xid=0x2): packet_count=0 byte_count=0 flow_count=1". The
// counters may follow the header on the same line or on the next lines; flow_count is
// required, the other counters default to 0.
func ParseAggregateReply(out string) (AggregateStats, error) {
	var st AggregateStats
	seen := false
	for _, line := range strings.Split(out, "\n") {
		s := strings.TrimSpace(line)
		if isHeaderLine(s) {
			// The header ends with "(xid=0x..):"; the counters may follow it.
			i := strings.LastIndex(s, "):")
			if i < 0 {
				continue
			}
			s = s[i+2:]
		}
		found, err := parseCounters(s, map[string]*uint64{
			"packet_count": &st.PacketCount, "byte_count": &st.ByteCount, "flow_count": &st.FlowCount})
		if err != nil {
			return AggregateStats{}, fmt.Errorf("parsing aggregate reply: %w", err)
		}
		seen = seen || found["flow_count"]
	}
	if !seen {
		return AggregateStats{}, fmt.Errorf("parsing aggregate reply: no flow_count in %q", truncateText(out, 200))
	}
	return st, nil
}

// parseCounters reads the "key=value" tokens of s (separated by spaces or commas) whose key is
// in dst into the counter dst names; other tokens are ignored. It reports which keys it found.
func parseCounters(s string, dst map[string]*uint64) (map[string]bool, error) {
	found := map[string]bool{}
	for _, tok := range strings.Fields(strings.ReplaceAll(s, ",", " ")) {
		key, val, ok := strings.Cut(tok, "=")
		if !ok || dst[key] == nil {
			continue
		}
		n, err := strconv.ParseUint(val, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		*dst[key] = n
		found[key] = true
	}
	return found, nil
}

// truncateText shortens s to at most n bytes for an error message.
func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
