package proxy_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	st "github.com/antrea-proxy/antrea-proxy/pkg/agent/servicetrace/servicetracetest"
	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// TestInstalledStateIsWhatTheBridgeHolds: the proxier's own state of its flows and groups (a
// tracer's input, without a dump) is exactly what it installed, large split groups included.
func TestInstalledStateIsWhatTheBridgeHolds(t *testing.T) {
	n := st.NewNode(t, true).Add(
		st.Service("web", "10.96.0.10", st.NodePort(30080)), st.Slice("web", []string{st.Endpoint1IP}, st.RemoteEndpoint),
		st.Service("big", "10.96.0.11"), st.Slice("big", nil, st.ManyRemote(600)...),
	)
	n.Inputs() // syncs
	flows, groups := n.P.InstalledState()
	ctx := context.Background()
	dumpFlows, err := n.Bridge.DumpFlows(ctx, of.FlowFilter{})
	require.NoError(t, err)
	dumpGroups, err := n.Bridge.DumpGroups(ctx)
	require.NoError(t, err)
	require.ElementsMatch(t, render(dumpFlows, of.FormatFlow), render(flows, of.FormatFlow))
	require.ElementsMatch(t, render(dumpGroups, of.FormatGroup), render(groups, of.FormatGroup))
	require.Len(t, groups, 4, "web's group, big's group and its two second-level groups")
}

func render[T any](xs []T, f func(*T) string) []string {
	out := make([]string, len(xs))
	for i := range xs {
		out[i] = f(&xs[i])
	}
	return out
}
