//go:build e2e

package conformance

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// Probes per row: the first pass, and the extra ones of a row whose answers differ (which
// backends answered may differ by chance after a few probes; after this many more, a backend
// one side never reached is a real difference: with up to 4 equally likely backends the chance
// to miss one is below (3/4)^40, about 1e-5 per row).
const (
	firstProbes  = 6
	extraProbes  = 40
	probeWorkers = 32
)

// envInt reads a positive integer from the environment, or def.
func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// TestConformance runs CONFORMANCE_SHAPES random Service shapes (default 40) from
// CONFORMANCE_SEED (default 1) in a sandbox of antrea-proxy nodes and in one of kube-proxy
// nodes, probes every address of every shape from every client in both, and fails on every row
// whose outcome classes differ in a way docs/conformance.md does not list.
func TestConformance(t *testing.T) {
	seed := uint64(envInt(t, "CONFORMANCE_SEED", 1))
	n := envInt(t, "CONFORMANCE_SHAPES", 40)
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "conformance.md"))
	if err != nil {
		t.Fatal(err)
	}
	rules, err := ParseRules(string(doc))
	if err != nil {
		t.Fatalf("docs/conformance.md: %v", err)
	}
	// The summary is logged again after everything else: cleanups run newest first, and the
	// sandboxes' cleanups print component logs when the test failed, which would otherwise bury
	// the unexplained rows far above the end of the output.
	var summary string
	t.Cleanup(func() {
		if t.Failed() && summary != "" {
			t.Logf("---- the run's summary again ----\n%s", summary)
		}
	})
	shapes := Generate(seed, n)
	rows := Rows(shapes)
	t.Logf("seed %d: %d shapes, %d probe rows", seed, len(shapes), len(rows))

	start := time.Now()
	worlds := [2]*world{startWorld(t, framework.ProxyAntrea), startWorld(t, framework.ProxyKubeProxy)}
	timeout := time.Duration(envInt(t, "CONFORMANCE_PROBE_TIMEOUT_MS", 2000)) * time.Millisecond
	workers := envInt(t, "CONFORMANCE_WORKERS", probeWorkers)
	for _, w := range worlds {
		w.probeTimeout = timeout
		w.create(t, shapes)
	}
	t.Logf("both sandboxes ready in %v", time.Since(start).Round(time.Second))

	start = time.Now()
	all := make([]int, len(rows))
	for i := range all {
		all[i] = i
	}
	out := probeAll(worlds, rows, all, firstProbes, workers)
	var clashes string
	if os.Getenv("CONFORMANCE_REPORT") != "" {
		clashes = replyTupleClashes(worlds[0])
	}
	verdicts := make([]Verdict, len(rows))
	var again []int
	for i, r := range rows {
		verdicts[i] = Judge(rules, r, out[0][i], out[1][i])
		if !verdicts[i].Explained() && verdicts[i].MaybeSampling() {
			again = append(again, i)
		}
	}
	more := probeAll(worlds, rows, again, extraProbes, workers)
	for _, i := range again {
		verdicts[i] = Judge(rules, rows[i], out[0][i].Union(more[0][i]), out[1][i].Union(more[1][i]))
	}
	t.Logf("probed %d rows in %v (%d probed again)", len(rows), time.Since(start).Round(time.Second), len(again))

	sum := Summarize(verdicts)
	summary = fmt.Sprintf("seed %d, %d shapes:\n%s", seed, len(shapes), sum)
	t.Log(summary)
	if unused := UnusedRules(rules, verdicts); len(unused) > 0 {
		// Not a failure (a run covers a random part of the shapes), but a bug rule that no run
		// needs any more is one to delete.
		t.Logf("rules of docs/conformance.md no row of this run needed: %s", strings.Join(unused, ", "))
	}
	if report := os.Getenv("CONFORMANCE_REPORT"); report != "" {
		var b strings.Builder
		for _, s := range shapes {
			j, _ := json.Marshal(s)
			fmt.Fprintf(&b, "shape %s\n", j)
		}
		b.WriteString(Report(verdicts))
		for _, v := range verdicts {
			if !v.Antrea.Answered() {
				continue
			}
			for _, at := range worlds[0].drops[v.Row.Key()] {
				fmt.Fprintf(&b, "lost %s %s at %s\n", worlds[0].kind, v.Row.Key(), at.Format("15:04:05.000"))
			}
		}
		b.WriteString(clashes)
		for _, w := range worlds {
			for k, e := range w.errs {
				fmt.Fprintf(&b, "error %s %s: %s\n", w.kind, k, e)
			}
		}
		if err := os.WriteFile(report, []byte(b.String()), 0o644); err != nil {
			t.Errorf("writing %s: %v", report, err)
		}
	}
	if len(sum.Unexplained) > 0 {
		t.Errorf("%d rows differ from kube-proxy in a way docs/conformance.md does not list (above)", len(sum.Unexplained))
	}
}
