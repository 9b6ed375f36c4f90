package openflow_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// dumpTables is `ovs-ofctl -O OpenFlow15 dump-tables` of a bridge with two flows in table 3 and
// one in table 7, as Open vSwitch 3.1 prints it.
const dumpTables = `OFPST_TABLE reply (OF1.5) (xid=0x2):
  table 0:
    active=0, lookup=0, matched=0

  tables 1...2: ditto

  table 3:
    active=2, lookup=12, matched=10

  table 4:
    active=0, lookup=0, matched=0

  tables 5...6: ditto

  table 7:
    active=1, lookup=0, matched=0

  table 8:
    active=0, lookup=0, matched=0

  tables 9...253: ditto
`

func TestParseTableStatsReply(t *testing.T) {
	st, err := of.ParseTableStatsReply(dumpTables)
	require.NoError(t, err)
	require.Len(t, st, 254)
	for i, s := range st {
		require.Equal(t, uint8(i), s.Table)
	}
	require.Equal(t, of.TableStats{Table: 3, Active: 2, Lookups: 12, Matches: 10}, st[3])
	require.Equal(t, of.TableStats{Table: 7, Active: 1}, st[7])
	require.Equal(t, of.TableStats{Table: 200}, st[200])
	require.Equal(t, map[uint8]int{3: 2, 7: 1}, of.FlowsPerTable(st))
}

func TestParseTableStatsReplyDittoOfBusyTable(t *testing.T) {
	st, err := of.ParseTableStatsReply("OFPST_TABLE reply (OF1.5):\n  table 0:\n    active=4, lookup=1, matched=1\n\n  table 1: ditto\n")
	require.NoError(t, err)
	require.Equal(t, []of.TableStats{{Table: 0, Active: 4, Lookups: 1, Matches: 1}, {Table: 1, Active: 4, Lookups: 1, Matches: 1}}, st)
}

func TestParseTableStatsReplyErrors(t *testing.T) {
	for name, in := range map[string]string{
		"empty":          "",
		"header only":    "OFPST_TABLE reply (OF1.5) (xid=0x2):\n",
		"ditto first":    "  tables 1...2: ditto\n",
		"bad number":     "  table 300:\n    active=1\n",
		"reversed range": "  table 0:\n    active=0\n  tables 9...3: ditto\n",
		"bad counter":    "  table 0:\n    active=x, lookup=0, matched=0\n",
		"no colon":       "  table 0\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := of.ParseTableStatsReply(in)
			require.Error(t, err)
		})
	}
}
