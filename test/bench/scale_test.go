//go:build bench

package bench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// result is what one run measured for one proxy.
type result struct {
	Programmed           time.Duration
	FullSync             histogram
	RSS                  float64
	IdleCPU, OVSIdleCPU  float64 // seconds per minute
	Partial, Programming histogram
	WriteToRules         []float64 // seconds
	Missed               int
}

// TestBenchScale runs antrea-agent and kube-proxy side by side on one apiserver holding
// BENCH_SERVICES Services × BENCH_ENDPOINTS endpoints and prints the comparison (see
// docs/performance.md). It asserts only that both programmed everything and that every
// figure was measured.
func TestBenchScale(t *testing.T) {
	cfg, err := configFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	progress := func(format string, args ...any) {
		fmt.Printf("bench-scale [%6.1fs] %s\n", time.Since(began).Seconds(), fmt.Sprintf(format, args...))
	}
	progress("config %+v, load %s", cfg, loadAvg())
	sb := framework.StartSandbox(t, framework.SandboxOptions{
		NodeProxies:  []framework.NodeProxy{framework.ProxyAntrea, framework.ProxyKubeProxy},
		DeferProxies: true,
		// kube-proxy's default minSyncPeriod, so that both pace their syncs alike.
		Agent: framework.AgentOptions{MinSyncInterval: time.Second},
	})
	ctx := context.Background()
	cs, err := fastClient(sb.CP.Config, 500)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	svcs, err := load(ctx, cs, cfg.Services, cfg.Endpoints, 32, progress)
	if err != nil {
		t.Fatal(err)
	}
	progress("loaded %d Services × %d endpoints in %v", cfg.Services, cfg.Endpoints, time.Since(t0).Round(time.Millisecond))

	sides := []*side{antreaSide(sb.Nodes[0], cfg.Endpoints), kubeProxySide(sb.Nodes[1])}
	res := []*result{{}, {}}
	measureStart(t, sb, sides, res, svcs, progress)
	for i, s := range sides {
		if res[i].FullSync, err = s.hist(ctx, "sync_full_proxy_rules_duration_seconds"); err != nil {
			t.Fatalf("%s metrics: %v", s.Name, err)
		}
		if res[i].RSS, err = rssMB(s.Node.ProxyPID()); err != nil {
			t.Fatalf("%s RSS: %v", s.Name, err)
		}
	}
	measureIdle(t, sides, res, cfg.Idle, progress)
	measureChanges(t, ctx, cs, sides, res, svcs, cfg, progress)
	floor := measureFloor(t, sb.Nodes[0], progress)
	rep := formatReport(cfg, res, floor, loadAvg())
	fmt.Print(rep)
	if out := os.Getenv("BENCH_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(rep), 0o644); err != nil {
			t.Error(err)
		}
	}
	checkMeasured(t, sides, res, floor)
}

// measureStart starts both proxies at once and polls each until it programmed every Service.
func measureStart(t *testing.T, sb *framework.Sandbox, sides []*side, res []*result, svcs []benchService, progress func(string, ...any)) {
	deadline := 3*time.Minute + time.Duration(len(svcs))*20*time.Millisecond
	progress("starting both proxies")
	start := time.Now()
	startErr := make(chan error, 1)
	go func() { startErr <- sb.StartProxies() }()
	var wg sync.WaitGroup
	errs := make([]error, len(sides))
	for i, s := range sides {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = pollUntil(deadline, 100*time.Millisecond, func() (bool, string) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				return s.programmed(ctx, svcs)
			})
			res[i].Programmed = time.Since(start)
			if errs[i] == nil {
				progress("%s programmed all %d Services after %v", s.Name, len(svcs), res[i].Programmed.Round(time.Millisecond))
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

// measureIdle takes the CPU time of both proxies and of the agent node's ovs-vswitchd over
// window while nothing changes.
func measureIdle(t *testing.T, sides []*side, res []*result, window time.Duration, progress func(string, ...any)) {
	pids := []int{sides[0].Node.ProxyPID(), sides[1].Node.ProxyPID(), sides[0].Node.OVS.VSwitchdPID()}
	before := make([]float64, len(pids))
	for i, p := range pids {
		v, err := cpuSeconds(p)
		if err != nil {
			t.Fatalf("idle CPU: %v", err)
		}
		before[i] = v
	}
	progress("idle CPU: measuring over %v with nothing changing", window)
	start := time.Now()
	<-time.After(window)
	elapsed := time.Since(start).Minutes()
	per := make([]float64, len(pids))
	for i, p := range pids {
		v, err := cpuSeconds(p)
		if err != nil {
			t.Fatalf("idle CPU: %v", err)
		}
		per[i] = (v - before[i]) / elapsed
	}
	res[0].IdleCPU, res[1].IdleCPU, res[0].OVSIdleCPU = per[0], per[1], per[2]
}

// loadAvg is /proc/loadavg's first three fields.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}
