package native

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/ofctl"
	"github.com/antrea-proxy/antrea-proxy/test/ovssandbox"
)

// startOVS runs a private OVS in its own network namespace (the netdev datapath's tap device
// allows one ovs-vswitchd per namespace).
func startOVS(t testing.TB) *ovssandbox.Instance {
	t.Helper()
	ns := ovssandbox.NewNetNS(t, "native")
	return ovssandbox.Start(t, ovssandbox.Options{NetNS: ns.Name})
}

// addBridge creates a netdev bridge with no flows that speaks OpenFlow 1.5.
func addBridge(t testing.TB, o *ovssandbox.Instance) string {
	t.Helper()
	br := fmt.Sprintf("br%06x", rand.IntN(1<<24))
	_, err := o.Vsctl("add-br", br, "--", "set", "bridge", br, "datapath_type=netdev",
		"protocols=OpenFlow10,OpenFlow13,OpenFlow15", "fail_mode=secure")
	require.NoError(t, err)
	require.NoError(t, o.WaitForBridge(br))
	return br
}

// dump returns a bridge's flows and groups as ovs-ofctl prints them, each sorted.
func dump(t *testing.T, o *ovssandbox.Instance, br string) (string, string) {
	t.Helper()
	sorted := func(s string) string {
		var lines []string
		for _, l := range strings.Split(s, "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "OFPST_") && !strings.HasPrefix(l, "NXST_") {
				lines = append(lines, l)
			}
		}
		slices.Sort(lines)
		return strings.Join(lines, "\n")
	}
	flows, err := o.Ofctl("dump-flows", br, "--no-stats")
	require.NoError(t, err)
	groups, err := o.Ofctl("dump-groups", br)
	require.NoError(t, err)
	return sorted(flows), sorted(groups)
}

// clearOps deletes the flows and groups that ops add (table by table: Open vSwitch refuses a
// delete of every table in a bundle with OFPBRC_EPERM).
func clearOps(ops []openflow.Op) []openflow.Op {
	var clear []openflow.Op
	tables := map[uint8]bool{}
	for _, op := range ops {
		switch {
		case op.Kind == openflow.AddGroup:
			clear = append(clear, openflow.Op{Kind: openflow.DeleteGroup, Group: &openflow.Group{ID: op.Group.ID}})
		case !tables[op.Flow.Table]:
			tables[op.Flow.Table] = true
			clear = append([]openflow.Op{{Kind: openflow.DeleteFlows, Flow: &openflow.Flow{Table: op.Flow.Table, CookieMask: 1 << 63}, TableSet: true}}, clear...)
		}
	}
	return clear
}

// TestIntegrationGoldenRulesetsEqualOfctl applies every golden ruleset (and the pipeline's
// base, gateway and pod flows, then a round of modifications and deletions) through the native
// connection on one bridge and through ovs-ofctl on another, and requires identical flow and
// group dumps after each step.
func TestIntegrationGoldenRulesetsEqualOfctl(t *testing.T) {
	o := startOVS(t)
	nbr, obr := addBridge(t, o), addBridge(t, o)
	// The rate-limits goldens use the reject meters, which must exist before their flows.
	for _, br := range []string{nbr, obr} {
		for id := uint32(1); id <= 16; id++ {
			_, err := o.Ofctl("add-meter", br, openflow.FormatMeter(openflow.Meter{ID: id, Rate: 10, Burst: 5}))
			require.NoError(t, err)
		}
	}
	native := New(o.MgmtSocket(nbr), nil)
	defer native.Close()
	oc := ofctl.New(o.MgmtSocket(obr))
	ctx := context.Background()
	apply := func(step string, ops []openflow.Op) {
		t.Helper()
		require.NoError(t, native.Apply(ctx, ops), "%s: native", step)
		require.NoError(t, oc.Apply(ctx, ops), "%s: ofctl", step)
		nf, ng := dump(t, o, nbr)
		of, og := dump(t, o, obr)
		require.Equal(t, of, nf, "%s: flows", step)
		require.Equal(t, og, ng, "%s: groups", step)
	}
	sets := append(goldenSets(t), goldenSet{name: "pipeline", ops: pipelineOps(t)})
	for _, s := range sets {
		apply(s.name, s.ops)
		nf, ng := dump(t, o, nbr)
		flows, groups := 0, 0
		for _, op := range s.ops {
			if op.Kind == openflow.AddFlow {
				flows++
			} else {
				groups++
			}
		}
		require.Equal(t, flows, strings.Count(nf, "\n")+1, "%s: every flow installed", s.name)
		require.Equal(t, groups, strings.Count(ng, "group_id="), "%s: every group installed", s.name)
		apply(s.name+" cleared", clearOps(s.ops))
	}
	// Changes on an installed ruleset: one endpoint more in a group, a flow's actions
	// modified, a flow deleted, flows deleted by cookie.
	base := sets[0].ops
	apply("base", base)
	var changes []openflow.Op
	for _, op := range base {
		switch {
		case op.Kind == openflow.AddGroup && len(changes) == 0:
			g := *op.Group
			g.Buckets = append(slices.Clone(g.Buckets), openflow.Bucket{ID: 99, Weight: 100, Actions: g.Buckets[0].Actions})
			changes = append(changes, openflow.Op{Kind: openflow.ModifyGroup, Group: &g})
		case op.Kind == openflow.AddFlow && op.Flow.Priority == 0 && len(changes) == 1:
			f := *op.Flow
			f.Actions = []openflow.Action{openflow.Drop{}}
			changes = append(changes, openflow.Op{Kind: openflow.ModifyFlowStrict, Flow: &f})
		case op.Kind == openflow.AddFlow && op.Flow.Priority == 200 && len(changes) == 2:
			changes = append(changes, openflow.Op{Kind: openflow.DeleteFlowStrict, Flow: op.Flow})
		}
	}
	require.Len(t, changes, 3)
	apply("changes", changes)
	apply("delete by cookie", []openflow.Op{{Kind: openflow.DeleteFlows, Flow: &openflow.Flow{Cookie: base[1].Flow.Cookie}}})
}

// TestIntegrationRefusedOpChangesNothing adds an existing group in a bundle: Open vSwitch
// refuses it at commit, the error names the op, and no op of the batch took effect.
func TestIntegrationRefusedOpChangesNothing(t *testing.T) {
	o := startOVS(t)
	br := addBridge(t, o)
	b := New(o.MgmtSocket(br), nil)
	defer b.Close()
	ctx := context.Background()
	require.NoError(t, b.Apply(ctx, testOps()))
	before, beforeGroups := dump(t, o, br)
	err := b.Apply(ctx, []openflow.Op{
		{Kind: openflow.AddGroup, Group: testGroup(3, 1)},
		{Kind: openflow.AddFlow, Flow: testFlow(3)},
		{Kind: openflow.AddGroup, Group: testGroup(7, 2)},
	})
	idx, ok := openflow.RejectedOpIndex(err)
	require.True(t, ok, "error %v names no op", err)
	require.Equal(t, 2, idx, "error %v", err)
	require.Contains(t, err.Error(), "OFPGMFC_GROUP_EXISTS")
	after, afterGroups := dump(t, o, br)
	require.Equal(t, before, after)
	require.Equal(t, beforeGroups, afterGroups)
	require.NoError(t, b.Apply(ctx, []openflow.Op{{Kind: openflow.AddGroup, Group: testGroup(3, 1)}, {Kind: openflow.AddFlow, Flow: testFlow(3)}}),
		"the connection survives")
}

// TestIntegrationLargeGroup installs a select group whose buckets are split over several
// messages (the message limit lowered to 8 KiB, as OVS 3.1 cannot dump a group description
// over 64 KiB) natively and through ovs-ofctl, and compares the buckets OVS holds.
func TestIntegrationLargeGroup(t *testing.T) {
	o := startOVS(t)
	nbr, obr := addBridge(t, o), addBridge(t, o)
	b := New(o.MgmtSocket(nbr), nil, withMaxMessageLen(8192))
	defer b.Close()
	ops := []openflow.Op{{Kind: openflow.AddGroup, Group: testGroup(5, 500)}}
	require.NoError(t, b.Apply(context.Background(), ops))
	require.NoError(t, ofctl.New(o.MgmtSocket(obr), ofctl.WithMaxMessageBytes(8192)).Apply(context.Background(), ops))
	_, ng := dump(t, o, nbr)
	_, og := dump(t, o, obr)
	require.Equal(t, og, ng)
	require.Equal(t, 500, strings.Count(ng, "bucket="))
}

// TestIntegrationResetAfterVSwitchdRestart restarts ovs-vswitchd under a running Bridge: it
// reports a reset, and the next Apply programs the new switch.
func TestIntegrationResetAfterVSwitchdRestart(t *testing.T) {
	o := startOVS(t)
	br := addBridge(t, o)
	b := New(o.MgmtSocket(br), nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { b.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	require.NoError(t, b.Apply(ctx, testOps()))
	require.NoError(t, o.RestartVSwitchd(false))
	select {
	case <-b.Resets():
	case <-time.After(30 * time.Second):
		t.Fatal("no reset within 30 s of the restart")
	}
	r, ok := b.LastReset()
	require.True(t, ok)
	require.Equal(t, 1, r.Count)
	require.NoError(t, b.Apply(ctx, testOps()))
	flows, groups := dump(t, o, br)
	require.Equal(t, 2, strings.Count(flows, "\n")+1)
	require.Equal(t, 2, strings.Count(groups, "group_id="))
}
