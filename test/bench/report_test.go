//go:build bench

package bench

import (
	"fmt"
	"strings"
	"time"
)

// formatReport is the Markdown table of one run, with the ratio antrea-agent / kube-proxy.
func formatReport(cfg config, res []*result, floor floorResult, load string) string {
	a, k := res[0], res[1]
	var b strings.Builder
	fmt.Fprintf(&b, "\n### %d Services × %d endpoints (load average at the end: %s)\n\n", cfg.Services, cfg.Endpoints, load)
	b.WriteString("| figure | antrea-agent | kube-proxy nftables | antrea / kube-proxy |\n|---|---|---|---|\n")
	row := func(name string, av, kv float64, f func(float64) string) {
		ratio := "–"
		if kv != 0 {
			ratio = fmt.Sprintf("%.2f", av/kv)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", name, f(av), f(kv), ratio)
	}
	sec := func(v float64) string { return fmt.Sprintf("%.2f s", v) }
	mb := func(v float64) string { return fmt.Sprintf("%.0f MB", v) }
	cpu := func(v float64) string { return fmt.Sprintf("%.2f s/min", v) }
	row("start → all Services programmed", a.Programmed.Seconds(), k.Programmed.Seconds(), sec)
	row(fmt.Sprintf("full-sync metric, mean (%.0f / %.0f syncs)", a.FullSync.Count, k.FullSync.Count), a.FullSync.Mean(), k.FullSync.Mean(), sec)
	row("RSS after the sync", a.RSS, k.RSS, mb)
	row(fmt.Sprintf("idle CPU (ovs-vswitchd: %.2f s/min)", a.OVSIdleCPU), a.IdleCPU, k.IdleCPU, cpu)
	row(fmt.Sprintf("partial sync p50 (%.0f / %.0f syncs)", a.Partial.Count, k.Partial.Count), a.Partial.Quantile(0.5), k.Partial.Quantile(0.5), ms)
	row("partial sync p99", a.Partial.Quantile(0.99), k.Partial.Quantile(0.99), ms)
	row("partial sync mean", a.Partial.Mean(), k.Partial.Mean(), ms)
	row(fmt.Sprintf("network programming p50 (%.0f / %.0f samples)", a.Programming.Count, k.Programming.Count), a.Programming.Quantile(0.5), k.Programming.Quantile(0.5), ms)
	row("network programming p99", a.Programming.Quantile(0.99), k.Programming.Quantile(0.99), ms)
	row("network programming mean", a.Programming.Mean(), k.Programming.Mean(), ms)
	row(fmt.Sprintf("write acked → rules, p50 (%d / %d changes)", len(a.WriteToRules), len(k.WriteToRules)), quantile(a.WriteToRules, 0.5), quantile(k.WriteToRules, 0.5), ms)
	row("write acked → rules, p99", quantile(a.WriteToRules, 0.99), quantile(k.WriteToRules, 0.99), ms)
	row("write acked → rules, max", quantile(a.WriteToRules, 1), quantile(k.WriteToRules, 1), ms)
	fmt.Fprintf(&b, "\nRaw OVS floor: the agent's %d groups + %d flows (%.1f MB of text) in one `ovs-ofctl bundle` into a fresh bridge: %v (full-sync metric / floor: %.2f).\n",
		floor.Groups, floor.Flows, float64(floor.Bytes)/(1<<20), floor.Took.Round(time.Millisecond), a.FullSync.Mean()/floor.Took.Seconds())
	return b.String()
}
