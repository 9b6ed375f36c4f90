package openflow

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// TableStats is one table's entry of a table statistics reply (OFPMP_TABLE_STATS, `ovs-ofctl
// dump-tables`).
type TableStats struct {
	Table uint8
	// Active is the number of flows in the table.
	Active uint64
	// Lookups and Matches count the packets looked up in the table and those that matched.
	Lookups, Matches uint64
}

// TableCounter reports every table's flow count in one request: Open vSwitch answers a table
// statistics request from counters it keeps per table, so the cost for the switch grows with
// the number of tables (255), not with the number of flows, unlike a FlowCounter's aggregate
// request, for which it walks every flow the filter may select.
type TableCounter interface {
	TableStats(ctx context.Context) ([]TableStats, error)
}

// FlowsPerTable returns the flow count of each table of stats that holds at least one flow.
func FlowsPerTable(stats []TableStats) map[uint8]int {
	out := make(map[uint8]int)
	for _, s := range stats {
		if s.Active > 0 {
			out[s.Table] = int(s.Active)
		}
	}
	return out
}

// ParseTableStatsReply parses the output of `ovs-ofctl -O OpenFlow15 dump-tables`, e.g.
//
//	OFPST_TABLE reply (OF1.5) (xid=0x2):
//	  table 0:
//	    active=1, lookup=0, matched=0
//
//	  tables 1...253: ditto
//
// "tables A...B: ditto" (or "table A: ditto") repeats the statistics of the table printed
// before it. The result is sorted by table; a reply that names no table is an error.
func ParseTableStatsReply(out string) ([]TableStats, error) {
	var (
		res  []TableStats
		cur  *TableStats
		prev TableStats
	)
	for _, line := range strings.Split(out, "\n") {
		s := strings.TrimSpace(line)
		switch {
		case s == "" || isHeaderLine(s):
		case strings.HasPrefix(s, "table"):
			first, last, ditto, err := parseTableHeading(s)
			if err != nil {
				return nil, err
			}
			if !ditto {
				res = append(res, TableStats{Table: first})
				cur = &res[len(res)-1]
				continue
			}
			if cur == nil {
				return nil, fmt.Errorf("parsing table stats: %q repeats no table", s)
			}
			prev = *cur
			for t := int(first); t <= int(last); t++ {
				e := prev
				e.Table = uint8(t)
				res = append(res, e)
			}
			cur = &res[len(res)-1]
		case cur != nil:
			if err := parseTableCounters(s, cur); err != nil {
				return nil, err
			}
		}
	}
	if len(res) == 0 {
		return nil, fmt.Errorf("parsing table stats: no table in %q", truncateText(out, 200))
	}
	sort.Slice(res, func(i, j int) bool { return res[i].Table < res[j].Table })
	return res, nil
}

// parseTableHeading parses "table 3:", "table 3: ditto" or "tables 4...253: ditto".
func parseTableHeading(s string) (first, last uint8, ditto bool, err error) {
	head, rest, ok := strings.Cut(s, ":")
	if !ok {
		return 0, 0, false, fmt.Errorf("parsing table stats: %q: no colon", s)
	}
	ditto = strings.TrimSpace(rest) == "ditto"
	fields := strings.Fields(head)
	if len(fields) != 2 || (fields[0] != "table" && fields[0] != "tables") {
		return 0, 0, false, fmt.Errorf("parsing table stats: %q: want \"table N:\" or \"tables A...B: ditto\"", s)
	}
	lo, hi, isRange := strings.Cut(fields[1], "...")
	if !isRange {
		hi = lo
	}
	a, err1 := strconv.ParseUint(lo, 10, 8)
	b, err2 := strconv.ParseUint(hi, 10, 8)
	if err1 != nil || err2 != nil || b < a {
		return 0, 0, false, fmt.Errorf("parsing table stats: %q: bad table number", s)
	}
	return uint8(a), uint8(b), ditto, nil
}

// parseTableCounters reads "active=1, lookup=0, matched=0" into st; other lines of the entry
// (table features in longer formats) are ignored.
func parseTableCounters(s string, st *TableStats) error {
	_, err := parseCounters(s, map[string]*uint64{"active": &st.Active, "lookup": &st.Lookups, "matched": &st.Matches})
	if err != nil {
		return fmt.Errorf("parsing table stats: table %d: %w", st.Table, err)
	}
	return nil
}

// InstalledFlows is what one writer of a bridge installed, per table, for a check against a
// table statistics reply (TableCounter).
type InstalledFlows struct {
	// PerTable counts the writer's flows in each table.
	PerTable map[uint8]int
	// Learned lists the tables in which the switch adds flows of its own next to the writer's
	// (learn actions): their counts change without anyone writing, so a check can only require
	// the switch to hold at least PerTable's count there.
	Learned []uint8
	// Version changes whenever what the writer installed changes.
	Version uint64
}
