//go:build bench

package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestGrowthExponent: linear, flat and quadratic growth read as 1, 0 and 2; a missing value
// has none.
func TestGrowthExponent(t *testing.T) {
	e, ok := growthExponent(1000, 10000, 1, 10)
	require.True(t, ok)
	require.InDelta(t, 1, e, 1e-9)
	e, _ = growthExponent(1000, 10000, 5, 5)
	require.InDelta(t, 0, e, 1e-9)
	e, _ = growthExponent(10000, 30000, 1, 9)
	require.InDelta(t, 2, e, 1e-9)
	_, ok = growthExponent(1000, 10000, 0, 3)
	require.False(t, ok)
	require.Equal(t, "linear", growthVerdict(total, 1.1))
	require.Equal(t, "flat", growthVerdict(perChange, 0.1))
	require.Equal(t, "superlinear (≈ N^2.1)", growthVerdict(total, 2.06))
}

// TestFormatGrowth: every figure of both proxies at each size, per 1k Services for totals, the
// exponents between consecutive sizes and the verdict.
func TestFormatGrowth(t *testing.T) {
	mk := func(n int, start, partial float64, load time.Duration) sizeResult {
		return sizeResult{Services: n, Load: loadStats{Took: load}, Figures: []figure{
			{Name: "start → all Services programmed", Unit: "s", Kind: total, A: start, K: start * start},
			{Name: "partial sync p50", Unit: "ms", Kind: perChange, A: partial, K: partial},
			{Name: "OVS floor, one native bundle", Unit: "s", Kind: total, A: start / 2, AOnly: true},
		}}
	}
	out := formatGrowth(mergeResults([]sizeResult{mk(10000, 10, 4, 100*time.Second)}, []sizeResult{mk(1000, 1, 4, 10*time.Second)}))
	require.Contains(t, out, "| start → all Services programmed | antrea-agent | 1.00 s | 10.00 s | 1 → 1 s | 1.00 | linear |")
	require.Contains(t, out, "| start → all Services programmed | kube-proxy | 1.00 s | 100.00 s | 1 → 10 s | 2.00 | superlinear (≈ N^2.0) |")
	require.Contains(t, out, "| partial sync p50 | kube-proxy | 4 ms | 4 ms | – | 0.00 | flat |")
	require.Contains(t, out, "| loader (Services + EndpointSlices) | kube-apiserver |")
	require.NotContains(t, out, "OVS floor, one native bundle | kube-proxy")
	require.Empty(t, formatGrowth([]sizeResult{mk(1000, 1, 4, time.Second)}))
}

// TestNFTMonitorRead: rules added to Service chains are kept with their chain; others are not,
// and an address is not matched by a longer one.
func TestNFTMonitorRead(t *testing.T) {
	m := &nftMonitor{done: make(chan struct{}), rules: map[string][]monitoredRule{}}
	m.read(strings.NewReader(strings.Join([]string{
		"add rule ip kube-proxy endpoint-X__172.31.0.1/8080 ip saddr 172.31.0.1 meta mark set 0x00004000",
		"add rule ip kube-proxy service-ABC-bench/svc-00001/tcp/http numgen random mod 2 vmap { 0 : goto endpoint-A__172.31.0.12/8080, 1 : goto endpoint-B__172.16.0.2/8080 }",
		"delete rule ip kube-proxy service-ABC-bench/svc-00001/tcp/http handle 4",
	}, "\n")))
	_, ok, err := m.seen("kube-proxy", "service-ABC-bench/svc-00001/tcp/http", "172.31.0.1")
	require.False(t, ok, "172.31.0.12 is not 172.31.0.1")
	require.Error(t, err, "the monitor has exited")
	at, ok, _ := m.seen("kube-proxy", "service-ABC-bench/svc-00001/tcp/http", "172.31.0.12")
	require.True(t, ok)
	require.False(t, at.IsZero())
	require.Len(t, m.rules, 1)
}
