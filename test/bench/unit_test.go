//go:build bench

package bench

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/netutil"
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

// TestFitPerService: a cost of 2 ms + 3 ms per 1,000 Services stored is recovered from the
// tenths (midpoints), the first tenth left out.
func TestFitPerService(t *testing.T) {
	var ts []loadTenth
	for i := 1; i <= 10; i++ {
		mid := float64(2*i-1) / 2 // thousands, the tenth's midpoint
		ts = append(ts, loadTenth{Services: i * 1000, WallMS: 2 + 3*mid})
	}
	ts[0].WallMS = 100 // start-up, ignored
	a, k, ok := fitPerService(ts, func(t loadTenth) float64 { return t.WallMS })
	require.True(t, ok)
	require.InDelta(t, 2, a, 1e-9)
	require.InDelta(t, 3, k, 1e-9)
	_, _, ok = fitPerService(ts[:3], func(t loadTenth) float64 { return t.WallMS })
	require.False(t, ok)
}

// TestChainHolds loads kube-proxy-like Service chains (v1.37's DNAT through a numgen map of
// address . port, and a jump to an endpoint chain) into a network namespace of its own and reads
// them back over netlink.
func TestChainHolds(t *testing.T) {
	ns := fmt.Sprintf("bench-nl-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", ns, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	rules := `add table ip kube-proxy
add chain ip kube-proxy endpoint-C-bench/svc-00002/tcp/http__172.16.0.3/8080
add chain ip kube-proxy service-X-bench/svc-00001/tcp/http
add chain ip kube-proxy service-Y-bench/svc-00002/tcp/http
add rule ip kube-proxy service-X-bench/svc-00001/tcp/http meta l4proto tcp dnat ip to numgen random mod 2 map { 0 : 172.16.0.1 . 8080, 1 : 172.31.0.12 . 8080 }
add rule ip kube-proxy service-Y-bench/svc-00002/tcp/http goto endpoint-C-bench/svc-00002/tcp/http__172.16.0.3/8080
`
	cmd := exec.Command("ip", "netns", "exec", ns, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft -f: %v: %s", err, out)
	}
	check := func(chain, ip string, port uint16) bool {
		var ok bool
		require.NoError(t, netutil.InNetNS("/var/run/netns/"+ns, func() (err error) {
			ok, err = chainHolds("kube-proxy", chain, netip.MustParseAddr(ip), port)
			return err
		}))
		return ok
	}
	require.True(t, check("service-X-bench/svc-00001/tcp/http", "172.31.0.12", 8080), "through the DNAT map")
	require.False(t, check("service-X-bench/svc-00001/tcp/http", "172.31.0.12", 8081), "another port")
	require.False(t, check("service-X-bench/svc-00001/tcp/http", "172.31.0.1", 8080), "another address")
	require.False(t, check("service-X-bench/svc-00001/tcp/http", "172.16.0.3", 8080), "another Service's endpoint")
	require.True(t, check("service-Y-bench/svc-00002/tcp/http", "172.16.0.3", 8080), "a jump to the endpoint's chain")
}

// TestParseMemStat: the heap in use of a heap profile's text form, in MB; a missing figure is
// an error.
func TestParseMemStat(t *testing.T) {
	text := []byte("heap profile: 1: 2 [3: 4] @ heap/1048576\n\n# runtime.MemStats\n# Alloc = 1\n# HeapInuse = 104857600\n# HeapReleased = 0\n")
	mb, err := parseMemStat(text, "HeapInuse")
	require.NoError(t, err)
	require.InDelta(t, 100, mb, 1e-9)
	_, err = parseMemStat(text, "StackInuse")
	require.Error(t, err)
}

// TestPerMinute: what the agent allocated and collected over an idle window, per minute.
func TestPerMinute(t *testing.T) {
	alloc, gcs := perMinute(allocStats{TotalAllocMB: 100, NumGC: 20}, allocStats{TotalAllocMB: 130, NumGC: 23}, 2*time.Minute)
	require.InDelta(t, 15, alloc, 1e-9)
	require.InDelta(t, 1.5, gcs, 1e-9)
}

// TestContextSwitches: a status file's two counts are summed; this process's threads have
// switched at least once (the test blocks on a timer first); a file without them is an error.
func TestContextSwitches(t *testing.T) {
	n, err := switchesOf("Name:\tx\nvoluntary_ctxt_switches:\t120\nnonvoluntary_ctxt_switches:\t7\n")
	require.NoError(t, err)
	require.Equal(t, 127.0, n)
	_, err = switchesOf("Name:\tx\n")
	require.Error(t, err)
	before, err := contextSwitches(os.Getpid())
	require.NoError(t, err)
	<-time.After(10 * time.Millisecond)
	after, err := contextSwitches(os.Getpid())
	require.NoError(t, err)
	require.Greater(t, after, before, "blocking on a timer switches a thread out")
}
