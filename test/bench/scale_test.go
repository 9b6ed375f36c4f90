//go:build bench

package bench

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	agentconfig "github.com/antrea-proxy/antrea-proxy/pkg/config"
	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// result is what one run measured for one proxy.
type result struct {
	Programmed          time.Duration
	FullSync            histogram
	RSS                 float64
	IdleCPU, OVSIdleCPU float64 // seconds per minute
	// IdleSwitches is how many times the proxy's threads were switched out per minute of the
	// idle window (contextSwitches): how often it wakes at rest.
	IdleSwitches float64
	// IdleGC is the agent's CPU in its garbage collector per minute of the idle window (the
	// runtime's estimate), part of IdleCPU.
	IdleGC float64
	// HeapInUse (Go heap in use) and OVSRSS (ovs-vswitchd's RSS), in MB, of the antrea node
	// only, read with RSS.
	HeapInUse, OVSRSS float64
	// RSSRest is the RSS at the end of the idle window (after a periodic full resync).
	RSSRest float64
	// AllocRest (MB) and GCRest are what the agent allocated and how many collections it ran
	// per minute of the idle window: what makes its heap, and so its RSS, grow at rest and what
	// its collections cost.
	AllocRest, GCRest    float64
	Partial, Programming histogram
	// WriteToRules and TriggerToRules are, per change, the seconds from the update's
	// acknowledgement and from its trigger-time annotation to the rules.
	WriteToRules, TriggerToRules []float64
	Missed                       int
}

// TestBenchScale runs antrea-agent and kube-proxy (unless BENCH_KUBE_PROXY=false) side by side on one apiserver holding
// BENCH_SIZES (or BENCH_SERVICES) Services × BENCH_ENDPOINTS endpoints, one fresh sandbox per
// size, and prints the comparison of each size and, over several sizes (of this run and of
// BENCH_RESULTS), the growth of every figure (see docs/performance.md). It asserts only that
// both programmed everything and that every figure was measured.
func TestBenchScale(t *testing.T) {
	cfg, err := configFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	progress := func(format string, args ...any) {
		fmt.Printf("bench-scale [%7.1fs] %s\n", time.Since(began).Seconds(), fmt.Sprintf(format, args...))
	}
	progress("config %+v, load %s", cfg, loadAvg())
	var done []sizeResult
	var reports strings.Builder
	for _, n := range cfg.Sizes {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			sr := runSize(t, cfg, n, progress)
			rep := formatReport(sr)
			fmt.Print(rep)
			reports.WriteString(rep)
			done = append(done, sr)
			if cfg.Results != "" {
				if err := writeResult(cfg.Results, sr); err != nil {
					t.Error(err)
				}
			}
		})
	}
	all := done
	if cfg.Results != "" {
		earlier, err := readResults(cfg.Results)
		if err != nil {
			t.Error(err)
		}
		all = mergeResults(earlier, done)
	}
	growth := formatGrowth(mergeResults(nil, all))
	fmt.Print(growth)
	if out := os.Getenv("BENCH_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(reports.String()+growth), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// runSize measures one size on a fresh sandbox.
func runSize(t *testing.T, cfg config, n int, progress func(string, ...any)) sizeResult {
	proxies, names := []framework.NodeProxy{framework.ProxyAntrea}, "antrea-agent"
	if cfg.KubeProxy {
		proxies, names = append(proxies, framework.ProxyKubeProxy), "antrea-agent and kube-proxy"
	}
	progress("size %d: starting a sandbox (%s)", n, names)
	sb := framework.StartSandbox(t, framework.SandboxOptions{
		Nodes:        len(proxies),
		NodeProxies:  proxies,
		DeferProxies: true,
		ControlPlane: framework.ControlPlaneOptions{ServiceCIDR: serviceCIDRFor(n)},
		// Both sync at most once a second (kube-proxy's default minSyncPeriod) and resync
		// every 30 s (the agent's sandbox default, kube-proxy's default syncPeriod).
		Agent:     framework.AgentOptions{MinSyncInterval: time.Second, EnablePprof: true, MaxFlows: flowBudgetFor(n, cfg.Endpoints)},
		KubeProxy: framework.KubeProxyOptions{MinSyncPeriod: time.Second, SyncPeriod: 30 * time.Second, StartTimeout: startTimeout(n)},
	})
	ctx := context.Background()
	cs, err := fastClient(sb.CP.Config, cfg.LoadQPS)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := watchControlPlane(sb.CP.Dir)
	if err != nil {
		t.Fatal(err)
	}
	lo := loadOptions{N: n, K: cfg.Endpoints, Workers: cfg.LoadWorkers}
	loader := cfg.loaderFor(n)
	if loader == "etcd" {
		lo.Etcd, lo.ServiceCIDR = newEtcdWriter(sb.CP.EtcdURL), netip.MustParsePrefix(serviceCIDRFor(n))
	}
	progress("loader: %s", loader)
	svcs, ls, err := load(ctx, cs, lo, cp, progress)
	if err != nil {
		t.Fatal(err)
	}
	ls.Loader = loader
	progress("loaded %d Services × %d endpoints in %v (control plane CPU: %s)", n, cfg.Endpoints, ls.Took.Round(time.Millisecond), formatCPU(ls.CPU))

	sides := []*side{antreaSide(sb.Nodes[0], cfg.Endpoints)}
	if cfg.KubeProxy {
		sides = append(sides, kubeProxySide(sb.Nodes[1]))
	}
	res := []*result{{}, {}} // the kube-proxy one stays empty without it
	measureStart(t, sb, sides, res, svcs, progress)
	prof := newProfiler(sb.Nodes[0].API, cfg.Results, n)
	measureMemory(t, ctx, sides, res, prof, progress)
	waitAtRest(t, ctx, sides, progress)
	restStart, err := prof.allocStats(ctx, "rest-start")
	if err != nil {
		t.Fatalf("the agent's memory statistics: %v", err)
	}
	measureIdle(t, ctx, sides, res, cfg.Idle, progress)
	restEnd, err := prof.allocStats(ctx, "rest-end")
	if err != nil {
		t.Fatalf("the agent's memory statistics: %v", err)
	}
	res[0].AllocRest, res[0].GCRest = perMinute(restStart, restEnd, cfg.Idle)
	progress("agent at rest: allocated %.1f MB and ran %.1f collections a minute", res[0].AllocRest, res[0].GCRest)
	for i, s := range sides {
		if res[i].RSSRest, err = rssMB(s.Node.ProxyPID()); err != nil {
			t.Fatalf("%s RSS: %v", s.Name, err)
		}
	}
	progress("RSS after the idle window %s", perSide(sides, res, func(r *result) string { return fmt.Sprintf("%.0f MB", r.RSSRest) }))
	// The CPU profile of the agent at rest has a window of its own, after the idle one: the
	// profiler reads its buffer ten times a second, which would count as the agent's idle
	// CPU and wake-ups.
	progress("the agent's CPU profile at rest over %v", min(cfg.Idle, time.Minute))
	if err := prof.saveCPU(ctx, min(cfg.Idle, time.Minute)); err != nil {
		t.Errorf("the agent's CPU profile: %v", err)
	}
	// A change waits at worst behind one full sync of the slower proxy.
	changeTimeout := 30*time.Second + 2*max(res[0].Programmed, res[1].Programmed)
	measureChanges(t, ctx, cs, sides, res, svcs, cfg, changeTimeout, progress)
	replay := measureReplay(t, sb.Nodes[0], progress)
	floor := measureFloor(t, sb.Nodes[0], progress)
	checkMeasured(t, sides, res, floor)
	return sizeResult{Services: n, Endpoints: cfg.Endpoints, When: time.Now().UTC(), LoadAvg: loadAvg(),
		AgentOnly: !cfg.KubeProxy, Load: ls, Floor: floor, Replay: replay, Figures: figures(n, res, floor, replay)}
}

// flowBudgetFor is the agent's antreaProxy.maxFlows for n Services of k endpoints: its default
// (1,000,000 flows and group buckets) unless the Services need more (each costs its k buckets
// and 2 flows: above about 80,000 Services of 10 endpoints), then what they need and a quarter.
// An operator running that many Services raises it the same way.
func flowBudgetFor(n, k int) int {
	need := n * (k + 2)
	if need <= agentconfig.DefaultMaxFlows {
		return 0
	}
	return need + need/4
}

// perSide formats one figure of each side: "antrea-agent X, kube-proxy Y".
func perSide(sides []*side, res []*result, f func(*result) string) string {
	var parts []string
	for i, s := range sides {
		parts = append(parts, s.Name+" "+f(res[i]))
	}
	return strings.Join(parts, ", ")
}

// measureStart starts both proxies at once and polls each until it programmed every Service.
// Start → programmed is timed by the proxy's own clock, not by the poll: the end of its first
// sync with nothing queued after it (its last-sync gauge not before its last-queued one, read
// every 100 ms from /metrics), once the Services' rules are verified to be there — a check
// that at 30,000 Services takes seconds to minutes (the agent's servicemap is 25 MB, `nft list
// table` runs for over 2 minutes), so it runs only when a new sync has ended (again after a
// check that could not look), and the time it takes is not counted.
func measureStart(t *testing.T, sb *framework.Sandbox, sides []*side, res []*result, svcs []benchService, progress func(string, ...any)) {
	deadline := startTimeout(len(svcs))
	progress("starting both proxies (each must program every Service within %v)", deadline)
	start := time.Now()
	startErr := make(chan error, 1)
	go func() { startErr <- sb.StartProxies() }()
	var wg sync.WaitGroup
	errs := make([]error, len(sides))
	for i, s := range sides {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var at time.Time
			syncs := func(ctx context.Context) (float64, float64, error) { return s.Node.ProxySyncs(ctx, s.Prefix) }
			at, errs[i] = waitProgrammed(syncs, s.programmed, svcs, start, deadline, 100*time.Millisecond)
			res[i].Programmed = at.Sub(start)
			if errs[i] == nil {
				// The full syncs up to this one, before any periodic resync (30 s later) adds a
				// cheap one to the mean: read now, not once the slower proxy is done.
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				res[i].FullSync, errs[i] = s.hist(ctx, "sync_full_proxy_rules_duration_seconds")
				cancel()
			}
			if errs[i] == nil {
				progress("%s programmed all %d Services after %v (seen %v later)", s.Name, len(svcs),
					res[i].Programmed.Round(time.Millisecond), time.Since(at).Round(time.Millisecond))
			}
		}()
	}
	wg.Wait()
	if err := <-startErr; err != nil {
		t.Fatalf("starting the proxies: %v", err)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("%s did not program every Service: %v", sides[i].Name, err)
		}
	}
}

// waitProgrammed polls a proxy every interval until a sync of its that ended after start left
// nothing queued and its rules hold every Service of svcs; it returns when that sync ended, by
// the proxy's own clock. syncs reads its last-sync and last-queued gauges (Unix seconds);
// programmed checks its rules (err: it could not look, and looks again at the next poll). A sync
// whose rules were checked and found incomplete is not checked again: the next sync is awaited.
func waitProgrammed(syncs func(context.Context) (last, queued float64, err error),
	programmed func(context.Context, []benchService) (ok bool, missing string, err error),
	svcs []benchService, start time.Time, timeout, interval time.Duration) (time.Time, error) {
	var at time.Time
	verified := 0.0 // the last sync whose rules were checked
	err := pollUntil(timeout, interval, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		last, queued, err := syncs(ctx)
		if err != nil {
			return false, err.Error()
		}
		if unixTime(last).Before(start) || last < queued {
			return false, fmt.Sprintf("last sync %.3f, last queued %.3f, started %.3f", last, queued, float64(start.UnixNano())/1e9)
		}
		if last == verified {
			return false, fmt.Sprintf("sync %.3f verified: not every Service", last)
		}
		ok, missing, err := programmed(ctx, svcs)
		if err != nil {
			return false, err.Error() // could not look: look again
		}
		if !ok {
			verified = last // looked: this sync left something out; wait for the next one
			return false, missing
		}
		at = unixTime(last)
		return true, ""
	})
	return at, err
}

// unixTime is a gauge of Unix seconds as a time.
func unixTime(sec float64) time.Time { return time.Unix(0, int64(sec*1e9)) }

// pollUntil calls cond every interval until it holds or timeout passes.
func pollUntil(timeout, interval time.Duration, cond func() (bool, string)) error {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	last := ""
	for {
		ok, status := cond()
		if ok {
			return nil
		}
		last = status
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v: %s", timeout, last)
		}
		<-tick.C
	}
}

// measureMemory reads both proxies' RSS, the agent's Go heap in use and its node's
// ovs-vswitchd RSS, then saves the agent's heap profile (after a collection, so after the
// figures).
func measureMemory(t *testing.T, ctx context.Context, sides []*side, res []*result, prof *profiler, progress func(string, ...any)) {
	var err error
	for i, s := range sides {
		if res[i].RSS, err = rssMB(s.Node.ProxyPID()); err != nil {
			t.Fatalf("%s RSS: %v", s.Name, err)
		}
	}
	if res[0].HeapInUse, err = prof.heapInUseMB(ctx); err != nil {
		t.Fatalf("the agent's heap: %v", err)
	}
	if res[0].OVSRSS, err = rssMB(sides[0].Node.OVS.VSwitchdPID()); err != nil {
		t.Fatalf("ovs-vswitchd RSS: %v", err)
	}
	if err := prof.saveHeap(ctx); err != nil {
		t.Errorf("the agent's heap profile: %v", err)
	}
	progress("RSS %s; agent heap in use %.0f MB, ovs-vswitchd RSS %.0f MB; profiles in %s",
		perSide(sides, res, func(r *result) string { return fmt.Sprintf("%.0f MB", r.RSS) }), res[0].HeapInUse, res[0].OVSRSS, prof.dir)
}

// atRestTimeout bounds the wait for a proxy's next full sync: both resync every 30 s.
const atRestTimeout = 2 * time.Minute

// waitAtRest waits until every proxy with a periodic resync has run two more since the memory
// was read (the agent's, 30 s apart): start-up is then over (the agent returns its start-up
// memory, off its sync goroutine, at its first full sync that recomputes nothing, which may be
// the first of the two), and the idle window measures a proxy at rest, not the tail of its
// start. kube-proxy has no periodic sync to wait for.
func waitAtRest(t *testing.T, ctx context.Context, sides []*side, progress func(string, ...any)) {
	progress("idle CPU: waiting for the agent's next periodic resync (start-up over)")
	for _, s := range sides {
		name := s.PeriodicSync
		if name == "" {
			continue
		}
		h, err := s.hist(ctx, name)
		if err != nil {
			t.Fatalf("%s metrics: %v", s.Name, err)
		}
		before := h.Count
		err = pollUntil(atRestTimeout, 500*time.Millisecond, func() (bool, string) {
			h, err := s.hist(ctx, name)
			if err != nil {
				return false, err.Error()
			}
			return h.Count >= before+2, fmt.Sprintf("%s: %.0f syncs in %s, %.0f when the memory was read", s.Name, h.Count, name, before)
		})
		if err != nil {
			t.Fatalf("waiting for a periodic resync: %v", err)
		}
	}
}

// perMinute is what the agent allocated (MB) and how many collections it ran per minute of
// window, from the statistics at its start and end.
func perMinute(start, end allocStats, window time.Duration) (allocMB, gcs float64) {
	m := window.Minutes()
	return (end.TotalAllocMB - start.TotalAllocMB) / m, (end.NumGC - start.NumGC) / m
}

// measureIdle takes the CPU time of the proxies and of the agent node's ovs-vswitchd, the
// proxies' context switches and the agent's CPU in its garbage collector (the Go runtime's
// estimate, go_cpu_classes_gc_total_cpu_seconds_total), over window while nothing changes.
func measureIdle(t *testing.T, ctx context.Context, sides []*side, res []*result, window time.Duration, progress func(string, ...any)) {
	pids := []int{sides[0].Node.OVS.VSwitchdPID()}
	for _, s := range sides {
		pids = append(pids, s.Node.ProxyPID())
	}
	read := func() (cpu, switches []float64) {
		cpu, switches = make([]float64, len(pids)), make([]float64, len(pids))
		for i, p := range pids {
			var err error
			if cpu[i], err = cpuSeconds(p); err != nil {
				t.Fatalf("idle CPU: %v", err)
			}
			if switches[i], err = contextSwitches(p); err != nil {
				t.Fatalf("idle context switches: %v", err)
			}
		}
		return cpu, switches
	}
	gcCPU := func() float64 {
		b, err := sides[0].metrics(ctx)
		if err != nil {
			t.Fatalf("the agent's metrics: %v", err)
		}
		gc, ok := framework.MetricValue(string(b), gcCPUMetric)
		if !ok {
			t.Fatalf("the agent's metrics have no %s", gcCPUMetric)
		}
		return gc
	}
	// The scrapes of the collector's CPU stay outside the window of the process figures.
	gc0 := gcCPU()
	cpu0, sw0 := read()
	progress("idle CPU: measuring over %v with nothing changing", window)
	start := time.Now()
	<-time.After(window)
	elapsed := time.Since(start).Minutes()
	cpu1, sw1 := read()
	gc1 := gcCPU()
	res[0].OVSIdleCPU = (cpu1[0] - cpu0[0]) / elapsed
	res[0].IdleGC = (gc1 - gc0) / elapsed
	for i := range sides {
		res[i].IdleCPU = (cpu1[i+1] - cpu0[i+1]) / elapsed
		res[i].IdleSwitches = (sw1[i+1] - sw0[i+1]) / elapsed
	}
	progress("idle: %s; the agent's collector %.3f s/min", perSide(sides, res, func(r *result) string {
		return fmt.Sprintf("%.3f s/min CPU, %.0f context switches/min", r.IdleCPU, r.IdleSwitches)
	}), res[0].IdleGC)
}

// gcCPUMetric is the Go runtime's estimate of the CPU its garbage collector used (seconds).
const gcCPUMetric = "go_cpu_classes_gc_total_cpu_seconds_total"

// loadAvg is /proc/loadavg's first three fields.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}
