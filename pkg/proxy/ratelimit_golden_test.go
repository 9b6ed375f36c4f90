package proxy

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

// TestGoldenRateLimits: with the rate limits on, a Service without endpoints rejects through
// RejectMeter (the client address's shard into reg5, one metered flow per shard), and a
// Service with session affinity learns at most AffinityFlowsPerService flows, writing the
// learn's result for the counting pass. (The agent installs the meters before the first sync.)
func TestGoldenRateLimits(t *testing.T) {
	for _, tc := range []goldenCase{
		{name: "rate-limits-reject", svc: makeService("ns1", "empty", "10.96.0.99"),
			slices: func(*v1.Service) []*discovery.EndpointSlice { return nil }},
		{name: "rate-limits-affinity", svc: makeService("ns1", "web", "10.96.0.10", withAffinity(600))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := testOptions()
			opts.RejectMeters, opts.AffinityFlowsPerService = 4, 100
			h := installGoldenCase(t, goldenCase{name: tc.name, svc: tc.svc, slices: tc.slices,
				opts: func(o *Options) { *o = opts }})
			checkGolden(t, tc.name, h.bridge.Dump())
		})
	}
}
