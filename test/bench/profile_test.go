//go:build bench

package bench

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// profileTimeout bounds reading a heap profile, and a CPU profile beyond its duration.
const profileTimeout = time.Minute

// profiler reads the agent's runtime profiles (enablePprof, served on its API socket to root
// only: the benchmark runs as root) and writes them to dir, named for the size.
type profiler struct {
	api  *framework.AgentAPI
	dir  string
	size int
}

func newProfiler(api *framework.AgentAPI, dir string, size int) *profiler {
	return &profiler{api: api, dir: dir, size: size}
}

// get is GET /debug/pprof/<path>?<query> on the agent; it may take up to timeout.
func (p *profiler) get(ctx context.Context, path string, q url.Values, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return p.api.Bytes(ctx, "/debug/pprof/"+path, q)
}

// heapInUseMB is the agent's Go heap in use (runtime.MemStats.HeapInuse) as its heap profile's
// text form reports it, without forcing a collection.
// The runtime's memory statistics at that moment (the text form's "# runtime.MemStats" block)
// are saved as memstats-<size>.txt: how RSS splits into heap, stacks and runtime overhead.
func (p *profiler) heapInUseMB(ctx context.Context) (float64, error) {
	b, err := p.get(ctx, "heap", url.Values{"debug": {"1"}}, profileTimeout)
	if err != nil {
		return 0, err
	}
	if err := p.saveMemStats(b); err != nil {
		return 0, err
	}
	return parseMemStat(b, "HeapInuse")
}

// allocStats is what the agent's runtime had allocated (runtime.MemStats.TotalAlloc, MB) and
// how many collections it had run (NumGC) at one moment.
type allocStats struct {
	TotalAllocMB, NumGC float64
}

// allocStats reads the agent's allocStats from its heap profile's text form, without forcing a
// collection; the statistics are saved as memstats-<name>-<size>.txt.
func (p *profiler) allocStats(ctx context.Context, name string) (allocStats, error) {
	b, err := p.get(ctx, "heap", url.Values{"debug": {"1"}}, profileTimeout)
	if err != nil {
		return allocStats{}, err
	}
	if err := p.saveMemStatsAs("memstats-"+name, b); err != nil {
		return allocStats{}, err
	}
	var s allocStats
	if s.TotalAllocMB, err = parseMemStat(b, "TotalAlloc"); err != nil {
		return allocStats{}, err
	}
	n, err := parseMemStat(b, "NumGC")
	s.NumGC = n * (1 << 20) // parseMemStat reads bytes as MB
	return s, err
}

// saveMemStats writes the "# runtime.MemStats" block of a heap profile's text form as
// memstats-<size>.txt; nothing without a results directory.
func (p *profiler) saveMemStats(text []byte) error { return p.saveMemStatsAs("memstats", text) }

// saveMemStatsAs is saveMemStats into <name>-<size>.txt.
func (p *profiler) saveMemStatsAs(name string, text []byte) error {
	if p.dir == "" {
		return nil
	}
	_, block, ok := strings.Cut(string(text), "# runtime.MemStats\n")
	if !ok {
		return fmt.Errorf("no runtime.MemStats block in the heap profile")
	}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(p.dir, fmt.Sprintf("%s-%d.txt", name, p.size)), []byte(block), 0o644)
}

// parseMemStat reads "# <name> = <bytes>" of a heap profile's text form, in MB.
func parseMemStat(text []byte, name string) (float64, error) {
	prefix := "# " + name + " = "
	for _, line := range strings.Split(string(text), "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return n / (1 << 20), err
		}
	}
	return 0, fmt.Errorf("no %q in the heap profile", name)
}

// saveHeap writes the agent's heap profile (after a collection) as heap-<size>.pb.gz and the
// top of its in-use space as heap-<size>.txt.
func (p *profiler) saveHeap(ctx context.Context) error {
	b, err := p.get(ctx, "heap", url.Values{"gc": {"1"}}, profileTimeout)
	if err != nil {
		return err
	}
	return p.save("heap", b, "-sample_index=inuse_space")
}

// saveCPU profiles the agent's CPU for d (while the caller measures something else) and writes
// it as cpu-<size>.pb.gz with the top of it as cpu-<size>.txt.
func (p *profiler) saveCPU(ctx context.Context, d time.Duration) error {
	b, err := p.get(ctx, "profile", url.Values{"seconds": {strconv.Itoa(int(d.Seconds()))}}, d+profileTimeout)
	if err != nil {
		return err
	}
	return p.save("cpu", b)
}

// save writes a profile and `go tool pprof -top` of it (flat and cumulative); nothing without
// a results directory.
func (p *profiler) save(kind string, b []byte, args ...string) error {
	if p.dir == "" {
		return nil
	}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return err
	}
	f := filepath.Join(p.dir, fmt.Sprintf("%s-%d.pb.gz", kind, p.size))
	if err := os.WriteFile(f, b, 0o644); err != nil {
		return err
	}
	var top []byte
	for _, order := range []string{"-top", "-cum"} {
		a := append([]string{"tool", "pprof", "-top", "-nodecount=40"}, args...)
		if order == "-cum" {
			a = append(a, "-cum")
		}
		out, err := exec.Command("go", append(a, f)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("go tool pprof %s: %v: %.500s", f, err, out)
		}
		top = append(top, out...)
	}
	return os.WriteFile(strings.TrimSuffix(f, ".pb.gz")+".txt", top, 0o644)
}
