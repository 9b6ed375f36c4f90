package agent

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/config"
	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

// TestIntegrationFlowTableNames: the agent's set-up names every pipeline table in OVSDB and
// keeps SessionAffinity's flow limit, so that ovs-ofctl --names shows the tables as the
// agent's own dumps do, while a plain (non-interactive) dump stays numeric.
func TestIntegrationFlowTableNames(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, b, _, _ := limitsLab(t, ctx, config.RateLimitConfig{AffinityFlowsTotal: 6})
	vsctl := func(args ...string) string {
		out, err := l.OVS.Vsctl(args...)
		require.NoError(t, err)
		return strings.Trim(strings.TrimSpace(out), `"`)
	}
	for table, name := range pipeline.TableNames {
		row := vsctl("get", "Bridge", l.Bridge, "flow_tables:"+strconv.Itoa(int(table)))
		require.Equal(t, name, vsctl("get", "Flow_Table", row, "name"), "table %d", table)
	}
	row := vsctl("get", "Bridge", l.Bridge, "flow_tables:"+strconv.Itoa(int(pipeline.TableSessionAffinity)))
	require.Equal(t, strconv.Itoa(6+affinityTableMargin), vsctl("get", "Flow_Table", row, "flow_limit"))

	var ops []of.Op
	for _, f := range pipeline.BaseFlows(pipeline.NodeConfig{Round: 1, IPv4: true}) {
		ops = append(ops, of.Op{Kind: of.AddFlow, Flow: &f})
	}
	require.NoError(t, b.Apply(ctx, ops))
	named, err := l.OVS.Ofctl("dump-flows", l.Bridge, "--names", "--no-stats")
	require.NoError(t, err)
	require.Contains(t, named, "table=ServiceLB")
	require.Contains(t, named, "goto_table:ConntrackCommit")
	plain, err := l.OVS.Ofctl("dump-flows", l.Bridge, "--no-stats")
	require.NoError(t, err)
	flows, err := of.ParseFlowDump(plain)
	require.NoError(t, err, "a dump without --names stays numeric")
	require.Len(t, flows, len(ops))
}
