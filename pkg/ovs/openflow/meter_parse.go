package openflow

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseMeterStatsReply finds meter id in `ovs-ofctl meter-stats` output:
//
//	OFPST_METER reply (OF1.5) (xid=0x2):
//	meter:7 flow_count:1 packet_in_count:12 byte_in_count:888 duration:3.5s bands:
//	0: packet_count:2 byte_count:148
//
// Dropped sums the packet counts of the meter's bands (the lines that follow it).
func ParseMeterStatsReply(out string, id uint32) (MeterStats, error) {
	var st MeterStats
	found := false
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "meter:"):
			if found {
				return st, nil
			}
			kv := keyValues(line)
			if kv["meter"] != strconv.FormatUint(uint64(id), 10) {
				continue
			}
			found = true
			st.ID = id
			var err error
			if st.Flows, err = parseUint32(kv["flow_count"]); err != nil {
				return MeterStats{}, fmt.Errorf("meter %d: flow_count: %w", id, err)
			}
			if st.Packets, err = parseUint(kv["packet_in_count"], 64); err != nil {
				return MeterStats{}, fmt.Errorf("meter %d: packet_in_count: %w", id, err)
			}
			if st.Bytes, err = parseUint(kv["byte_in_count"], 64); err != nil {
				return MeterStats{}, fmt.Errorf("meter %d: byte_in_count: %w", id, err)
			}
		case found && strings.Contains(line, "packet_count:"):
			n, err := parseUint(keyValues(line)["packet_count"], 64)
			if err != nil {
				return MeterStats{}, fmt.Errorf("meter %d band: packet_count: %w", id, err)
			}
			st.Dropped += n
		}
	}
	if !found {
		return MeterStats{}, fmt.Errorf("no meter %d in the reply", id)
	}
	return st, nil
}

// keyValues splits "a:1 b:2" into a map.
func keyValues(line string) map[string]string {
	kv := map[string]string{}
	for _, f := range strings.Fields(line) {
		if k, v, ok := strings.Cut(f, ":"); ok {
			kv[k] = v
		}
	}
	return kv
}
