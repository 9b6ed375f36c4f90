package conformance

import (
	"fmt"
	"path"
	"strings"
)

// This file parses the known differences of docs/conformance.md and matches rows against them.
//
// The table between the markers RulesBegin and RulesEnd has one rule per row:
//
//	| `id` | `key=glob,glob key=glob` | `rewrite; rewrite` | reason |
//
// The second column selects rows: every key must have a value matching one of its globs
// (path.Match syntax) among the row's attributes (Row.Attrs). The third column says how
// kube-proxy's outcome turns into antrea-proxy's:
//
//	src:A,B->C        every answer whose source class is A or B has source class C instead
//	outcome:*->X,Y    whatever kube-proxy saw, antrea-proxy saw only X and/or Y (failure classes)
//	outcome:*->*      whatever kube-proxy saw, antrea-proxy may see anything (a known bug's rows)
//	answers:*->subset antrea-proxy's answers are some of kube-proxy's (fewer backends eligible)
//	fail:A->X,Y       kube-proxy's failure class A is X or Y for antrea-proxy
//	extra:*->dropped  antrea-proxy saw what kube-proxy saw and, besides answers, some drops
//
// A row differs acceptably when some of the matching rules, applied in table order, turn
// kube-proxy's outcome into antrea-proxy's.

// Markers around the rules table in docs/conformance.md.
const (
	RulesBegin = "<!-- conformance-rules:begin -->"
	RulesEnd   = "<!-- conformance-rules:end -->"
)

// Rule is one known difference.
type Rule struct {
	ID       string
	match    map[string][]string
	rewrites []rewrite
	// any: the rule accepts whatever antrea-proxy saw (outcome:*->*).
	any bool
}

// rewrite maps kube-proxy's outcome to the outcomes antrea-proxy may have instead.
type rewrite func(kp Outcome) []Outcome

// ParseRules reads the rules table from a document (docs/conformance.md); it reports every
// malformed row.
func ParseRules(doc string) ([]Rule, error) {
	begin, end := strings.Index(doc, RulesBegin), strings.Index(doc, RulesEnd)
	if begin < 0 || end < begin {
		return nil, fmt.Errorf("no rules table between %q and %q", RulesBegin, RulesEnd)
	}
	var rules []Rule
	var problems []string
	seen := map[string]bool{}
	for i, line := range strings.Split(doc[begin:end], "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		r, err := parseRule(line)
		if err == nil && seen[r.ID] {
			err = fmt.Errorf("rule %s is listed twice", r.ID)
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("rules table line %d: %v", i, err))
			continue
		}
		seen[r.ID] = true
		rules = append(rules, r)
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	if len(rules) == 0 {
		return nil, fmt.Errorf("the rules table is empty")
	}
	return rules, nil
}

// codeCells returns the contents of the first n backtick-quoted cells of a table row.
func codeCells(line string, n int) ([]string, error) {
	cells := strings.Split(strings.Trim(line, "|"), "|")
	if len(cells) < n+1 {
		return nil, fmt.Errorf("want at least %d columns: %q", n+1, line)
	}
	out := make([]string, n)
	for i := 0; i < n; i++ {
		c := strings.TrimSpace(cells[i])
		if len(c) < 2 || c[0] != '`' || c[len(c)-1] != '`' {
			return nil, fmt.Errorf("column %d must be code (`...`): %q", i+1, c)
		}
		out[i] = c[1 : len(c)-1]
	}
	return out, nil
}

func parseRule(line string) (Rule, error) {
	cells, err := codeCells(line, 3)
	if err != nil {
		return Rule{}, err
	}
	r := Rule{ID: cells[0], match: map[string][]string{}}
	for _, term := range strings.Fields(cells[1]) {
		k, v, ok := strings.Cut(term, "=")
		if !ok || k == "" || v == "" {
			return Rule{}, fmt.Errorf("rule %s: match term %q is not key=glob[,glob]", r.ID, term)
		}
		for _, g := range strings.Split(v, ",") {
			if _, err := path.Match(g, ""); err != nil {
				return Rule{}, fmt.Errorf("rule %s: glob %q: %v", r.ID, g, err)
			}
			r.match[k] = append(r.match[k], g)
		}
	}
	for _, clause := range strings.Split(cells[2], ";") {
		rw, err := parseRewrite(strings.TrimSpace(clause))
		if err != nil {
			return Rule{}, fmt.Errorf("rule %s: %v", r.ID, err)
		}
		if rw == nil {
			r.any = true
			continue
		}
		r.rewrites = append(r.rewrites, rw)
	}
	return r, nil
}

func parseRewrite(clause string) (rewrite, error) {
	kind, body, ok := strings.Cut(clause, ":")
	from, to, ok2 := strings.Cut(body, "->")
	if !ok || !ok2 || from == "" || to == "" {
		return nil, fmt.Errorf("rewrite %q is not kind:from->to", clause)
	}
	switch kind {
	case "src":
		return srcRewrite(strings.Split(from, ","), to), nil
	case "fail":
		classes, err := failureClasses(clause, to)
		if err != nil {
			return nil, err
		}
		return failTokenRewrite(from, classes), nil
	case "extra":
		if from != "*" || to != Dropped {
			return nil, fmt.Errorf("rewrite %q: want extra:*->dropped", clause)
		}
		return extraDropRewrite, nil
	case "answers":
		if from != "*" || to != "subset" {
			return nil, fmt.Errorf("rewrite %q: want answers:*->subset", clause)
		}
		return subsetRewrite, nil
	case "outcome":
		if to == "*" && from == "*" {
			return nil, nil
		}
		if from != "*" {
			return nil, fmt.Errorf("rewrite %q: outcome rewrites start from *", clause)
		}
		classes, err := failureClasses(clause, to)
		if err != nil {
			return nil, err
		}
		return failRewrite(classes), nil
	}
	return nil, fmt.Errorf("rewrite %q: unknown kind %q (want src or outcome)", clause, kind)
}

// failureClasses parses a comma-separated list of failure classes.
func failureClasses(clause, list string) ([]string, error) {
	var classes []string
	for _, c := range strings.Split(list, ",") {
		switch c {
		case Refused, Vetoed, Dropped, Unreachable, Closed, Failed:
			classes = append(classes, c)
		default:
			return nil, fmt.Errorf("rewrite %q: %q is not a failure class", clause, c)
		}
	}
	return classes, nil
}

// failTokenRewrite replaces the failure token from with each of to.
func failTokenRewrite(from string, to []string) rewrite {
	return func(kp Outcome) []Outcome {
		has := false
		for _, t := range kp {
			has = has || t == from
		}
		if !has {
			return []Outcome{kp}
		}
		var out []Outcome
		for _, c := range to {
			toks := []string{c}
			for _, t := range kp {
				if t != from {
					toks = append(toks, t)
				}
			}
			out = append(out, NewOutcome(toks...))
		}
		return out
	}
}

// extraDropRewrite adds a drop to an answered outcome.
func extraDropRewrite(kp Outcome) []Outcome {
	if !kp.Answered() {
		return []Outcome{kp}
	}
	return []Outcome{kp.Union(NewOutcome(Dropped))}
}

func srcRewrite(from []string, to string) rewrite {
	return func(kp Outcome) []Outcome {
		out := make([]string, 0, len(kp))
		for _, t := range kp {
			if b, src, ok := splitAnswer(t); ok {
				for _, f := range from {
					if src == f {
						t = Answer(b, to)
					}
				}
			}
			out = append(out, t)
		}
		return []Outcome{NewOutcome(out...)}
	}
}

// subsetRewrite: every non-empty subset of kube-proxy's answers, with its failures.
func subsetRewrite(kp Outcome) []Outcome {
	var answers, rest []string
	for _, t := range kp {
		if _, _, ok := splitAnswer(t); ok {
			answers = append(answers, t)
		} else {
			rest = append(rest, t)
		}
	}
	if len(answers) > 8 {
		return []Outcome{kp}
	}
	var out []Outcome
	for mask := 1; mask < 1<<len(answers); mask++ {
		o := append([]string(nil), rest...)
		for i, a := range answers {
			if mask&(1<<i) != 0 {
				o = append(o, a)
			}
		}
		out = append(out, NewOutcome(o...))
	}
	return out
}

// failRewrite: any non-empty combination of the classes.
func failRewrite(classes []string) rewrite {
	return func(Outcome) []Outcome {
		var out []Outcome
		for mask := 1; mask < 1<<len(classes); mask++ {
			var o []string
			for i, c := range classes {
				if mask&(1<<i) != 0 {
					o = append(o, c)
				}
			}
			out = append(out, NewOutcome(o...))
		}
		return out
	}
}

// Matches reports whether the rule selects a row with these attributes.
func (r Rule) Matches(attrs map[string]string) bool {
	for k, globs := range r.match {
		v, ok := attrs[k]
		if !ok {
			return false
		}
		hit := false
		for _, g := range globs {
			if m, _ := path.Match(g, v); m {
				hit = true
			}
		}
		if !hit {
			return false
		}
	}
	return true
}

// apply returns every outcome the rule turns kp into.
func (r Rule) apply(kp []Outcome) []Outcome {
	cur := kp
	for _, rw := range r.rewrites {
		var next []Outcome
		for _, o := range cur {
			next = append(next, rw(o)...)
		}
		cur = next
	}
	return cur
}

// maxMatching bounds the rules Explain combines (every subset of them is tried).
const maxMatching = 8

// Explain returns the IDs of the rules that explain why a row's antrea-proxy outcome differs
// from kube-proxy's, or nil when none does: the smallest set of matching rules (tried in
// table order) whose rewrites, applied one after the other, turn kube-proxy's outcome into
// antrea-proxy's.
func Explain(rules []Rule, attrs map[string]string, antrea, kubeProxy Outcome) []string {
	var matching []Rule
	for _, r := range rules {
		if r.Matches(attrs) {
			matching = append(matching, r)
		}
	}
	if len(matching) > maxMatching {
		matching = matching[:maxMatching]
	}
	var best []string
	for mask := 1; mask < 1<<len(matching); mask++ {
		cur := []Outcome{kubeProxy}
		var ids []string
		any := false
		for i, r := range matching {
			if mask&(1<<i) == 0 {
				continue
			}
			ids = append(ids, r.ID)
			any = any || r.any
			cur = r.apply(cur)
		}
		if (any || containsOutcome(cur, antrea)) && (best == nil || len(ids) < len(best)) {
			best = ids
		}
	}
	return best
}

func containsOutcome(cands []Outcome, o Outcome) bool {
	for _, c := range cands {
		if c.Equal(o) {
			return true
		}
	}
	return false
}
