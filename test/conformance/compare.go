package conformance

import (
	"fmt"
	"sort"
	"strings"
)

// This file compares the two implementations' outcomes row by row.

// Verdict is the comparison of one row.
type Verdict struct {
	Row Row
	// Antrea and KubeProxy are the reduced outcomes (see Reduce).
	Antrea, KubeProxy Outcome
	// Same is true when they are equal; otherwise Rules are the known differences that
	// explain the row (none: an unexplained difference, the suite fails).
	Same  bool
	Rules []string
}

// Explained reports whether the row is equal or its difference is a known one.
func (v Verdict) Explained() bool { return v.Same || len(v.Rules) > 0 }

// Reduce turns a row's raw outcome into the class compared: a ClientIP-affinity row of a
// Service port is reduced to its stickiness (Outcome.Sticky), since which eligible backend it
// sticks to is random; a row of OtherPort is not Service traffic and stays as it is.
func Reduce(r Row, o Outcome) Outcome {
	if r.Shape.Affinity && r.Port.Name != otherPortName {
		return o.Sticky(r.Shape.EndpointState)
	}
	return o
}

// Judge compares a row's raw outcomes.
func Judge(rules []Rule, r Row, antrea, kubeProxy Outcome) Verdict {
	v := Verdict{Row: r, Antrea: Reduce(r, antrea), KubeProxy: Reduce(r, kubeProxy)}
	v.Same = v.Antrea.Equal(v.KubeProxy)
	if !v.Same {
		v.Rules = Explain(rules, r.Attrs(), v.Antrea, v.KubeProxy)
	}
	return v
}

// MaybeSampling reports whether a difference could come from the random choice of backend:
// both sides were answered and, seen without the backend names, could agree.
func (v Verdict) MaybeSampling() bool {
	return !v.Same && !v.Row.Shape.Affinity && v.Antrea.Answered() && v.KubeProxy.Answered()
}

// Summary counts verdicts: how many rows were equal, explained by each rule, or unexplained.
type Summary struct {
	Rows, Same  int
	ByRule      map[string]int
	Unexplained []Verdict
	// ByClass counts the differing rows by (target kind, client kind).
	ByClass map[string]int
}

// Summarize counts the verdicts.
func Summarize(vs []Verdict) Summary {
	s := Summary{ByRule: map[string]int{}, ByClass: map[string]int{}}
	for _, v := range vs {
		s.Rows++
		if v.Same {
			s.Same++
			continue
		}
		s.ByClass[classOf(v.Row)]++
		if len(v.Rules) == 0 {
			s.Unexplained = append(s.Unexplained, v)
			continue
		}
		s.ByRule[strings.Join(v.Rules, "+")]++
	}
	return s
}

// classOf is "<target kind> <- <client kind>", e.g. "nodePort <- pod".
func classOf(r Row) string {
	t, _, _ := strings.Cut(r.Target, "@")
	c, _, _ := strings.Cut(r.Client, "@")
	return t + " <- " + c
}

// String is the report: the counts, then every unexplained row.
func (s Summary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d rows: %d equal, %d differ as listed in docs/conformance.md, %d unexplained\n",
		s.Rows, s.Same, s.Rows-s.Same-len(s.Unexplained), len(s.Unexplained))
	for _, k := range sortedKeys(s.ByRule) {
		fmt.Fprintf(&b, "  rule %-40s %d rows\n", k, s.ByRule[k])
	}
	for _, k := range sortedKeys(s.ByClass) {
		fmt.Fprintf(&b, "  differing class %-28s %d rows\n", k, s.ByClass[k])
	}
	for _, v := range s.Unexplained {
		fmt.Fprintf(&b, "UNEXPLAINED %s\n    antrea-proxy: %s\n    kube-proxy:   %s\n    attrs: %s\n",
			v.Row.Key(), v.Antrea, v.KubeProxy, formatAttrs(v.Row.Attrs()))
	}
	return b.String()
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func formatAttrs(a map[string]string) string {
	keys := make([]string, 0, len(a))
	for k := range a {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + a[k]
	}
	return strings.Join(parts, " ")
}

// Report lists every row with both outcomes and its verdict, one row a line.
func Report(vs []Verdict) string {
	var b strings.Builder
	for _, v := range vs {
		verdict := "same"
		switch {
		case v.Same:
		case len(v.Rules) > 0:
			verdict = "rule " + strings.Join(v.Rules, "+")
		default:
			verdict = "UNEXPLAINED"
		}
		fmt.Fprintf(&b, "%s\t%s\tantrea-proxy: %s\tkube-proxy: %s\n", v.Row.Key(), verdict, v.Antrea, v.KubeProxy)
	}
	return b.String()
}

// UnusedRules lists the IDs of the rules that explain none of the verdicts.
func UnusedRules(rules []Rule, vs []Verdict) []string {
	used := map[string]bool{}
	for _, v := range vs {
		for _, id := range v.Rules {
			used[id] = true
		}
	}
	var out []string
	for _, r := range rules {
		if !used[r.ID] {
			out = append(out, r.ID)
		}
	}
	return out
}
