package proxy

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/openflowtest"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

// TestGoldenRateLimits: with the rate limits on, a Service without endpoints rejects through
// the reject group (one metered bucket per meter, hashing the client address), and a Service
// with session affinity learns at most AffinityFlowsPerService flows, writing the learn's
// result for the counting pass. The agent installs the reject groups before the first sync;
// the proxier keeps them (they are reserved, not stale).
func TestGoldenRateLimits(t *testing.T) {
	limit := pipeline.RejectLimit{Rate: 100, Burst: 40, Meters: 4}
	for _, tc := range []goldenCase{
		{name: "rate-limits-reject", svc: makeService("ns1", "empty", "10.96.0.99"),
			slices: func(*v1.Service) []*discovery.EndpointSlice { return nil }},
		{name: "rate-limits-affinity", svc: makeService("ns1", "web", "10.96.0.10", withAffinity(600))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := openflowtest.NewFakeBridge()
			var ops []of.Op
			for _, g := range limit.Groups(pipeline.NodeConfig{IPv4: true, IPv6: true}) {
				ops = append(ops, of.Op{Kind: of.AddGroup, Group: g})
			}
			if err := b.Apply(context.Background(), ops); err != nil {
				t.Fatal(err)
			}
			opts := testOptions()
			opts.RejectMeters, opts.AffinityFlowsPerService = limit.Meters, 100
			h := installGoldenCaseOn(t, tc, newHarnessOn(t, opts, b))
			checkGolden(t, tc.name, h.bridge.Dump())
		})
	}
}
