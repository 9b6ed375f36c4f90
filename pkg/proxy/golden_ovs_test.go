package proxy

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/test/ovssandbox"
)

// groupDumper is a bridge that can dump its groups (ofctl and the fake offer it for tests; the
// proxier never dumps groups).
type groupDumper interface {
	of.Bridge
	DumpGroups(ctx context.Context) ([]of.Group, error)
}

// canonicalDump renders a bridge's flows and groups canonically, one per line, sorted.
func canonicalDump(t *testing.T, b groupDumper) string {
	t.Helper()
	flows, groups := canonicalState(t, b)
	var lines []string
	for i := range flows {
		lines = append(lines, of.FormatFlow(&flows[i]))
	}
	for i := range groups {
		lines = append(lines, of.FormatGroup(&groups[i]))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// canonicalState dumps b's flows and groups in their canonical forms.
func canonicalState(t *testing.T, b groupDumper) ([]of.Flow, []of.Group) {
	t.Helper()
	ctx := context.Background()
	flows, err := b.DumpFlows(ctx, of.FlowFilter{})
	if err != nil {
		t.Fatal(err)
	}
	groups, err := b.DumpGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range flows {
		flows[i] = of.CanonicalFlow(flows[i])
	}
	for i := range groups {
		groups[i] = of.CanonicalGroup(groups[i])
	}
	return flows, groups
}

// TestIntegrationGoldenShapesInRealOVS installs every golden Service shape into a real OVS and
// requires OVS to accept the bundle and hold exactly what the fake bridge holds.
func TestIntegrationGoldenShapesInRealOVS(t *testing.T) {
	o := ovssandbox.Start(t, ovssandbox.Options{})
	for i, tc := range goldenCases() {
		t.Run(tc.name, func(t *testing.T) {
			want := canonicalDump(t, installGoldenCase(t, tc).bridge)
			real := addOVSBridge(t, o, fmt.Sprintf("brg%d", i))
			opts := testOptions()
			if tc.opts != nil {
				tc.opts(&opts)
			}
			p, err := New(opts, real)
			if err != nil {
				t.Fatal(err)
			}
			installGoldenCaseOn(t, tc, &harness{t: t, p: p})
			got := canonicalDump(t, real)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("real OVS holds something else than the fake bridge (-fake +ovs):\n%s", diff)
			}
		})
	}
}
