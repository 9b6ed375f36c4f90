//go:build bench

package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// writeResult writes one size's figures to dir as scale-<N>.json (read back by readResults)
// and its report as scale-<N>.md.
func writeResult(dir string, sr sizeResult) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(sr, "", "  ")
	if err != nil {
		return err
	}
	base := filepath.Join(dir, fmt.Sprintf("scale-%d", sr.Services))
	if err := os.WriteFile(base+".json", b, 0o644); err != nil {
		return err
	}
	return os.WriteFile(base+".md", []byte(formatReport(sr)), 0o644)
}

// readResults reads every scale-*.json of dir.
func readResults(dir string) ([]sizeResult, error) {
	files, err := filepath.Glob(filepath.Join(dir, "scale-*.json"))
	if err != nil {
		return nil, err
	}
	var out []sizeResult
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var sr sizeResult
		if err := json.Unmarshal(b, &sr); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out = append(out, sr)
	}
	return out, nil
}

// mergeResults is earlier results with this run's (which replace an earlier one of the same
// size), sorted by size.
func mergeResults(earlier, now []sizeResult) []sizeResult {
	by := map[int]sizeResult{}
	for _, sr := range earlier {
		by[sr.Services] = sr
	}
	for _, sr := range now {
		by[sr.Services] = sr
	}
	out := make([]sizeResult, 0, len(by))
	for _, sr := range by {
		out = append(out, sr)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Services < out[j].Services })
	return out
}

// growthExponent is e in v2/v1 = (n2/n1)^e: 1 is linear, 0 flat, 2 quadratic; ok is false
// unless both values are positive.
func growthExponent(n1, n2 int, v1, v2 float64) (float64, bool) {
	if math.IsNaN(v1) || math.IsNaN(v2) || v1 <= 0 || v2 <= 0 || n1 <= 0 || n2 <= n1 {
		return 0, false
	}
	return math.Log(v2/v1) / math.Log(float64(n2)/float64(n1)), true
}

// growthVerdict names the growth of exponent e for a figure of kind k.
func growthVerdict(k figureKind, e float64) string {
	switch {
	case k == perChange && e < 0.2:
		return "flat"
	case e < 0.8:
		return "sublinear"
	case e <= 1.2:
		return "linear"
	}
	return fmt.Sprintf("superlinear (≈ N^%.1f)", e)
}

// formatGrowth is the growth table over two or more sizes: each figure at every size, per
// 1,000 Services (totals), the growth exponent between consecutive sizes and, from the
// smallest to the largest size, the verdict (linear or not).
func formatGrowth(srs []sizeResult) string {
	if len(srs) < 2 {
		return ""
	}
	var b strings.Builder
	sizes := make([]string, len(srs))
	for i, sr := range srs {
		sizes[i] = fmt.Sprint(sr.Services)
	}
	fmt.Fprintf(&b, "\n### Growth over %s Services\n\n", strings.Join(sizes, ", "))
	for _, sr := range srs {
		fmt.Fprintf(&b, "- %d Services: measured %s, load average at the end %s\n", sr.Services, sr.When.Format(time.RFC3339), sr.LoadAvg)
	}
	b.WriteString("\nThe growth exponent e is v₂/v₁ = (N₂/N₁)^e between consecutive sizes: 1 is linear, 0 flat, 2 quadratic; the verdict is from the smallest to the largest size.\n\n")
	fmt.Fprintf(&b, "| figure | proxy | %s | per 1k Services | exponent | growth |\n|---|---|%s---|---|---|\n", strings.Join(sizes, " | "), strings.Repeat("---|", len(srs)))
	for fi, f0 := range srs[0].Figures {
		for side := 0; side < 2; side++ {
			if side == 1 && f0.AOnly {
				continue
			}
			vals := make([]float64, len(srs))
			for i, sr := range srs {
				vals[i] = math.NaN()
				if fi < len(sr.Figures) && sr.Figures[fi].Name == f0.Name {
					vals[i] = []float64{sr.Figures[fi].A, sr.Figures[fi].K}[side]
				}
			}
			b.WriteString(growthRow(f0, []string{"antrea-agent", "kube-proxy"}[side], srs, vals))
		}
	}
	loads := make([]float64, len(srs))
	for i, sr := range srs {
		loads[i] = sr.Load.Took.Seconds()
	}
	b.WriteString(growthRow(figure{Name: "loader (Services + EndpointSlices)", Unit: "s", Kind: total}, "kube-apiserver", srs, loads))
	return b.String()
}

// growthRow is one row of formatGrowth.
func growthRow(f figure, who string, srs []sizeResult, vals []float64) string {
	cells, per, exps := make([]string, len(vals)), make([]string, len(vals)), make([]string, 0, len(vals)-1)
	for i, v := range vals {
		cells[i], per[i] = "–", "–"
		if !math.IsNaN(v) {
			cells[i] = formatValue(v, f.Unit)
			per[i] = fmt.Sprintf("%.3g", v/(float64(srs[i].Services)/1000))
		}
		if i > 0 {
			e, ok := growthExponent(srs[i-1].Services, srs[i].Services, vals[i-1], v)
			exps = append(exps, map[bool]string{true: fmt.Sprintf("%.2f", e), false: "–"}[ok])
		}
	}
	perCell := "–"
	if f.Kind == total {
		perCell = strings.Join(per, " → ") + " " + f.Unit
	}
	verdict := "–"
	last := len(vals) - 1
	if e, ok := growthExponent(srs[0].Services, srs[last].Services, vals[0], vals[last]); ok {
		verdict = growthVerdict(f.Kind, e)
	}
	return fmt.Sprintf("| %s | %s | %s | %s | %s | %s |\n", f.Name, who, strings.Join(cells, " | "), perCell, strings.Join(exps, ", "), verdict)
}
