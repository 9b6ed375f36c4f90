package ovsdb_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestFlowTableNames: named tables show by name in ovs-ofctl --names, a table whose row holds a
// flow limit keeps it (and the name survives a later limit), and naming again writes nothing.
func TestFlowTableNames(t *testing.T) {
	o, c := setup(t)
	br := newBridge(t, c)
	ctx := testContext(t)
	require.NoError(t, c.EnsureFlowTableLimit(ctx, br, 13, 100))
	names := map[uint8]string{0: "Classifier", 13: "SessionAffinity", 14: "ServiceLB"}
	require.NoError(t, c.EnsureFlowTableNames(ctx, br, names))
	require.NoError(t, c.EnsureFlowTableNames(ctx, br, names), "naming again")
	require.NoError(t, c.EnsureFlowTableLimit(ctx, br, 14, 50))

	for table, name := range names {
		uuid := vsctl(t, o, "get", "Bridge", br, "flow_tables:"+strconv.Itoa(int(table)))
		require.Equal(t, name, vsctl(t, o, "get", "Flow_Table", uuid, "name"), "table %d", table)
	}
	uuid13 := vsctl(t, o, "get", "Bridge", br, "flow_tables:13")
	require.Equal(t, "100", vsctl(t, o, "get", "Flow_Table", uuid13, "flow_limit"), "the earlier limit stays")
	uuid14 := vsctl(t, o, "get", "Bridge", br, "flow_tables:14")
	require.Equal(t, "50", vsctl(t, o, "get", "Flow_Table", uuid14, "flow_limit"), "a later limit keeps the name")

	_, err := o.Ofctl("add-flow", br, "table=0,priority=1,actions=goto_table:14")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		out, err := o.Ofctl("dump-flows", br, "--names", "--no-stats")
		return err == nil && strings.Contains(out, "table=Classifier") && strings.Contains(out, "goto_table:ServiceLB")
	}, testTimeout, 20*time.Millisecond, "ovs-ofctl --names shows the table names")
}
