//go:build bench

package bench

import (
	"fmt"
	"strings"
	"time"
)

// figureKind says how a figure should grow with the Services: a total (start, full sync, RSS,
// floors) at best linearly, a per-change figure (partial sync, latencies) at best not at all.
type figureKind string

const (
	total     figureKind = "total"
	perChange figureKind = "per change"
)

// figure is one row of the report; AOnly marks a figure of the antrea node only (K unset).
type figure struct {
	Name  string     `json:"name"`
	Note  string     `json:"note,omitempty"`
	Unit  string     `json:"unit"`
	Kind  figureKind `json:"kind"`
	A     float64    `json:"antrea"`
	K     float64    `json:"kubeProxy"`
	AOnly bool       `json:"antreaOnly,omitempty"`
}

// sizeResult is everything one size measured, as written to BENCH_RESULTS.
type sizeResult struct {
	Services  int       `json:"services"`
	Endpoints int       `json:"endpoints"`
	When      time.Time `json:"when"`
	LoadAvg   string    `json:"loadAvg"`
	// AgentOnly: kube-proxy did not run (BENCH_KUBE_PROXY=false).
	AgentOnly bool         `json:"agentOnly,omitempty"`
	Load      loadStats    `json:"load"`
	Floor     floorResult  `json:"floor"`
	Replay    replayResult `json:"replay"`
	Figures   []figure     `json:"figures"`
}

// figures derives the report's rows from one size's measurements.
func figures(n int, res []*result, floor floorResult, replay replayResult) []figure {
	a, k := res[0], res[1]
	f := []figure{
		{Name: "start → all Services programmed", Unit: "s", Kind: total, A: a.Programmed.Seconds(), K: k.Programmed.Seconds()},
		{Name: "first full syncs (metric), mean", Note: fmt.Sprintf("%.0f / %.0f syncs", a.FullSync.Count, k.FullSync.Count), Unit: "s", Kind: total, A: a.FullSync.Mean(), K: k.FullSync.Mean()},
		{Name: "RSS after the sync", Unit: "MB", Kind: total, A: a.RSS, K: k.RSS},
		{Name: "idle CPU", Unit: "s/min", Kind: total, A: a.IdleCPU, K: k.IdleCPU},
		{Name: "idle CPU of ovs-vswitchd", Unit: "s/min", Kind: total, A: a.OVSIdleCPU, AOnly: true},
		{Name: "partial sync p50", Note: fmt.Sprintf("%.0f / %.0f syncs", a.Partial.Count, k.Partial.Count), Unit: "ms", Kind: perChange, A: a.Partial.Quantile(0.5), K: k.Partial.Quantile(0.5)},
		{Name: "partial sync p99", Unit: "ms", Kind: perChange, A: a.Partial.Quantile(0.99), K: k.Partial.Quantile(0.99)},
		{Name: "partial sync mean", Unit: "ms", Kind: perChange, A: a.Partial.Mean(), K: k.Partial.Mean()},
		{Name: "network programming p50", Note: fmt.Sprintf("%.0f / %.0f samples", a.Programming.Count, k.Programming.Count), Unit: "ms", Kind: perChange, A: a.Programming.Quantile(0.5), K: k.Programming.Quantile(0.5)},
		{Name: "network programming p99", Unit: "ms", Kind: perChange, A: a.Programming.Quantile(0.99), K: k.Programming.Quantile(0.99)},
		{Name: "network programming mean", Unit: "ms", Kind: perChange, A: a.Programming.Mean(), K: k.Programming.Mean()},
		{Name: "trigger annotation → rules, mean (probe)", Unit: "ms", Kind: perChange, A: mean(a.TriggerToRules), K: mean(k.TriggerToRules)},
		{Name: "write acked → rules, p50", Note: fmt.Sprintf("%d / %d changes", len(a.WriteToRules), len(k.WriteToRules)), Unit: "ms", Kind: perChange, A: quantile(a.WriteToRules, 0.5), K: quantile(k.WriteToRules, 0.5)},
		{Name: "write acked → rules, p99", Unit: "ms", Kind: perChange, A: quantile(a.WriteToRules, 0.99), K: quantile(k.WriteToRules, 0.99)},
		{Name: "write acked → rules, max", Unit: "ms", Kind: perChange, A: quantile(a.WriteToRules, 1), K: quantile(k.WriteToRules, 1)},
		{Name: "OVS floor, one ovs-ofctl bundle", Unit: "s", Kind: total, A: floor.Ofctl.Seconds(), AOnly: true},
		{Name: "OVS floor, one native bundle", Unit: "s", Kind: total, A: floor.Native.Seconds(), AOnly: true},
		// Appended after the figures of earlier results, which the growth table matches by
		// position.
		{Name: "Go heap in use after the sync", Unit: "MB", Kind: total, A: a.HeapInUse, AOnly: true},
		{Name: "RSS per Service", Unit: "KB", Kind: total, A: a.RSS * 1024 / float64(n), K: k.RSS * 1024 / float64(n)},
		{Name: "RSS of ovs-vswitchd", Unit: "MB", Kind: total, A: a.OVSRSS, AOnly: true},
		{Name: "RSS after the idle window", Unit: "MB", Kind: total, A: a.RSSRest, K: k.RSSRest},
		{Name: "replay after an ovs-vswitchd restart", Note: "OpenFlow up → every flow back", Unit: "s", Kind: total, A: replay.Took.Seconds(), AOnly: true},
		{Name: "allocated at rest", Note: "idle window", Unit: "MB/min", Kind: total, A: a.AllocRest, AOnly: true},
		{Name: "collections at rest", Note: "idle window", Unit: "/min", Kind: total, A: a.GCRest, AOnly: true},
		{Name: "context switches at rest", Note: "idle window, every thread", Unit: "/min", Kind: total, A: a.IdleSwitches, K: k.IdleSwitches},
		{Name: "idle CPU of the agent's garbage collector", Note: "Go runtime's estimate", Unit: "s/min", Kind: total, A: a.IdleGC, AOnly: true},
	}
	for i := range f {
		if f[i].Unit == "ms" {
			f[i].A *= 1000
			f[i].K *= 1000
		}
	}
	return f
}

// mean is the mean of xs, 0 when empty.
func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// formatValue prints v in unit.
func formatValue(v float64, unit string) string {
	switch {
	case unit == "ms" || unit == "MB":
		return fmt.Sprintf("%.0f %s", v, unit)
	case unit == "KB":
		return fmt.Sprintf("%.1f %s", v, unit)
	case unit == "/min" && v >= 100:
		return fmt.Sprintf("%.0f %s", v, unit)
	}
	return fmt.Sprintf("%.2f %s", v, unit)
}

// formatReport is the Markdown table of one size, with the ratio antrea-agent / kube-proxy,
// the floors and the loader's cost.
func formatReport(sr sizeResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n### %d Services × %d endpoints (load average at the end: %s)\n\n", sr.Services, sr.Endpoints, sr.LoadAvg)
	b.WriteString("| figure | antrea-agent | kube-proxy nftables | antrea / kube-proxy |\n|---|---|---|---|\n")
	var full float64
	for _, f := range sr.Figures {
		ratio, kv := "–", "–"
		if sr.AgentOnly && !f.AOnly {
			kv = "not run"
		}
		if !f.AOnly && !sr.AgentOnly {
			kv = formatValue(f.K, f.Unit)
			if f.K != 0 {
				ratio = fmt.Sprintf("%.2f", f.A/f.K)
			}
		}
		name := f.Name
		if f.Note != "" {
			name += " (" + f.Note + ")"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", name, formatValue(f.A, f.Unit), kv, ratio)
		if f.Name == "first full syncs (metric), mean" {
			full = f.A
		}
	}
	fl := sr.Floor
	fmt.Fprintf(&b, "\nOVS floors: the agent's %d groups + %d flows (%.1f MB of text) replayed into a fresh bridge: one `ovs-ofctl bundle` %v (full-sync metric / floor: %s); one bundle of the native OpenFlow 1.5 backend %v (full-sync metric / floor: %s).\n",
		fl.Groups, fl.Flows, float64(fl.Bytes)/(1<<20), fl.Ofctl.Round(time.Millisecond), ratioOf(full, fl.Ofctl), fl.Native.Round(time.Millisecond), ratioOf(full, fl.Native))
	if fl.NativeErr != "" {
		fmt.Fprintf(&b, "The native floor failed: %s\n", fl.NativeErr)
	}
	if r := sr.Replay; r.Flows > 0 {
		fmt.Fprintf(&b, "\nReplay: ovs-vswitchd killed (SIGKILL) and started again with flow-restore-wait; from its OpenFlow connection up to all %d flows back %v, flow-restore-wait cleared after %v.\n",
			r.Flows, r.Took.Round(time.Millisecond), r.RestoreWaitCleared.Round(time.Millisecond))
	}
	via := "through kube-apiserver"
	if sr.Load.Loader == "etcd" {
		via = "Services and their IPAddress objects written into etcd, EndpointSlices through kube-apiserver"
	}
	fmt.Fprintf(&b, "\nLoader (%s): %v for %d Services + %d EndpointSlices; control-plane CPU %s.\n", via, sr.Load.Took.Round(time.Second), sr.Services, sr.Services, formatCPU(sr.Load.CPU))
	if len(sr.Load.Tenths) > 0 {
		b.WriteString("Per Service (with its EndpointSlice), by tenth of the load: Services so far → wall ms, kube-apiserver CPU ms:")
		for _, t := range sr.Load.Tenths {
			fmt.Fprintf(&b, " %d → %.1f, %.1f;", t.Services, t.WallMS, t.CPUMS["kube-apiserver"])
		}
		b.WriteString("\n")
		if a, k, ok := fitPerService(sr.Load.Tenths, func(t loadTenth) float64 { return t.CPUMS["kube-apiserver"] }); ok {
			fmt.Fprintf(&b, "kube-apiserver CPU per Service ≈ %.1f ms + %.2f ms per 1,000 Services already stored (least squares over the tenths but the first).\n", a, k)
		}
	}
	return b.String()
}

// fitPerService fits y(tenth) = a + k × (Services stored, in thousands) over the tenths but
// the first (start-up), by least squares; ok is false with fewer than 3 points.
func fitPerService(ts []loadTenth, y func(loadTenth) float64) (a, k float64, ok bool) {
	if len(ts) < 4 {
		return 0, 0, false
	}
	var n, sx, sy, sxx, sxy float64
	prev := ts[0].Services
	for _, t := range ts[1:] {
		x := float64(prev+t.Services) / 2 / 1000
		v := y(t)
		n, sx, sy, sxx, sxy = n+1, sx+x, sy+v, sxx+x*x, sxy+x*v
		prev = t.Services
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0, 0, false
	}
	k = (n*sxy - sx*sy) / d
	return (sy - k*sx) / n, k, true
}

// ratioOf is a/d formatted, "–" when d is 0.
func ratioOf(a float64, d time.Duration) string {
	if d == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", a/d.Seconds())
}
