package pipeline

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
)

func ep(ip string, ready, serving, terminating bool, zones ...string) model.Endpoint {
	return model.Endpoint{IP: netip.MustParseAddr(ip), Port: 80, Ready: ready, Serving: serving,
		Terminating: terminating, ZoneHints: zones}
}

func ips(eps []model.Endpoint) []string {
	var out []string
	for _, e := range eps {
		out = append(out, e.IP.String())
	}
	return out
}

// TestCategorizeTopology pins kube-proxy's rules: zone hints filter the ready endpoints (all of
// them hinted, one for this zone), and the fallback to serving-terminating endpoints when none
// is ready ignores the hints.
func TestCategorizeTopology(t *testing.T) {
	for _, tc := range []struct {
		name string
		eps  []model.Endpoint
		want []string
	}{
		{"ready endpoints filtered by zone hints",
			[]model.Endpoint{ep("10.0.0.1", true, true, false, "a"), ep("10.0.0.2", true, true, false, "b")},
			[]string{"10.0.0.1"}},
		{"one ready endpoint without hints: all used",
			[]model.Endpoint{ep("10.0.0.1", true, true, false, "a"), ep("10.0.0.2", true, true, false)},
			[]string{"10.0.0.1", "10.0.0.2"}},
		{"no ready endpoint for this zone: all used",
			[]model.Endpoint{ep("10.0.0.1", true, true, false, "b"), ep("10.0.0.2", true, true, false, "b")},
			[]string{"10.0.0.1", "10.0.0.2"}},
		{"terminating fallback ignores zone hints",
			[]model.Endpoint{ep("10.0.0.1", false, true, true, "a"), ep("10.0.0.2", false, true, true, "b")},
			[]string{"10.0.0.1", "10.0.0.2"}},
		{"hints of terminating endpoints do not matter when some are ready",
			[]model.Endpoint{ep("10.0.0.1", true, true, false, "b"), ep("10.0.0.2", false, true, true, "a")},
			[]string{"10.0.0.1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := categorize(tc.eps, false, "node-1", "a")
			require.Equal(t, tc.want, ips(got.cluster))
		})
	}
}
