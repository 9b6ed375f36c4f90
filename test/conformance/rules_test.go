package conformance

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// table wraps rule rows into a document with the markers.
func table(rows ...string) string {
	return "intro\n" + RulesBegin + "\n| ID | Rows | Rewrite | Reason |\n|---|---|---|---|\n" +
		strings.Join(rows, "\n") + "\n" + RulesEnd + "\n"
}

func mustRules(t *testing.T, rows ...string) []Rule {
	t.Helper()
	rules, err := ParseRules(table(rows...))
	if err != nil {
		t.Fatal(err)
	}
	return rules
}

// TestDocRulesParse: docs/conformance.md's table is well formed, so the e2e suite can use it.
func TestDocRulesParse(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "conformance.md"))
	if err != nil {
		t.Fatal(err)
	}
	rules, err := ParseRules(string(b))
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, r := range rules {
		ids[r.ID] = true
	}
	for _, want := range []string{"pod-keeps-source", "snat-svip", "host-udp-vetoed"} {
		if !ids[want] {
			t.Errorf("docs/conformance.md has no rule %s", want)
		}
	}
}

func TestParseRulesReportsEveryProblem(t *testing.T) {
	_, err := ParseRules(table(
		"| `a` | `addr` | `src:x->y` | no value |",
		"| `b` | `addr=x` | `bogus:x->y` | unknown kind |",
		"| `c` | `addr=x` | `outcome:*->nope` | not a class |",
		"| `d` | addr=x | `src:x->y` | not code |",
		"| `e` | `addr=[` | `src:x->y` | bad glob |",
		"| `f` | `addr=x` | `src:x->y` | fine |",
		"| `f` | `addr=x` | `src:x->y` | twice |",
	))
	if err == nil {
		t.Fatal("malformed rules were accepted")
	}
	for _, id := range []string{"rule a", "rule b", "rule c", "column 2", "rule e", "listed twice"} {
		if !strings.Contains(err.Error(), id) {
			t.Errorf("the error does not report %q: %v", id, err)
		}
	}
	if _, err := ParseRules("no table here"); err == nil {
		t.Error("a document without the markers was accepted")
	}
	if _, err := ParseRules(table()); err == nil {
		t.Error("an empty table was accepted")
	}
}

func TestExplain(t *testing.T) {
	rules := mustRules(t,
		"| `pod-src` | `addr=nodePort@* client=pod@*` | `src:gw-local,node-other->client` | r |",
		"| `svip` | `addr=nodePort@*,lb-*` | `src:gw-local->svip` | r |",
		"| `host-bug` | `addr=clusterIP client=host@*` | `outcome:*->dropped,unreachable` | r |",
		"| `veto` | `client=host@* proto=UDP` | `fail:vetoed->refused,dropped` | r |",
		"| `fewer` | `hints=all` | `answers:*->subset` | r |",
		"| `lossy` | `addr=*` | `extra:*->dropped` | r |",
		"| `any` | `addr=lb-VIP client=host@* etp=Local` | `outcome:*->*` | r |",
	)
	attrs := func(kv ...string) map[string]string {
		m := map[string]string{"proto": "TCP", "hints": "-", "etp": "Cluster"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	cases := []struct {
		name       string
		attrs      map[string]string
		antrea, kp Outcome
		want       string // joined rule IDs, "" for unexplained
	}{
		{"source rewrite", attrs("addr", "nodePort@node1", "client", "pod@node1"),
			NewOutcome("b1a<-client", "b2a<-client"), NewOutcome("b1a<-gw-local", "b2a<-node-other"), "pod-src"},
		{"another rewrite of the same row", attrs("addr", "nodePort@node1", "client", "pod@node2"),
			NewOutcome("b1a<-svip", "b2a<-node-other"), NewOutcome("b1a<-gw-local", "b2a<-node-other"), "svip"},
		{"a backend only one side reaches", attrs("addr", "nodePort@node1", "client", "pod@node1"),
			NewOutcome("b1a<-client"), NewOutcome("b1a<-gw-local", "b2a<-node-other"), ""},
		{"a rule for other rows", attrs("addr", "clusterIP", "client", "pod@node1"),
			NewOutcome("dropped"), NewOutcome("b1a<-client"), ""},
		{"failure rewrite", attrs("addr", "clusterIP", "client", "host@node1"),
			NewOutcome("dropped", "unreachable"), NewOutcome("b1a<-client"), "host-bug"},
		{"failure rewrite, class not allowed", attrs("addr", "clusterIP", "client", "host@node1"),
			NewOutcome("refused"), NewOutcome("b1a<-client"), ""},
		{"failure token rewrite", attrs("addr", "lb-Proxy", "client", "host@node1", "proto", "UDP"),
			NewOutcome("refused"), NewOutcome("vetoed"), "veto"},
		{"subset of the answers", attrs("addr", "clusterIP", "client", "pod@node1", "hints", "all"),
			NewOutcome("b1a<-client"), NewOutcome("b1a<-client", "b2a<-client"), "fewer"},
		{"not a subset", attrs("addr", "clusterIP", "client", "pod@node1", "hints", "all"),
			NewOutcome("b2b<-client"), NewOutcome("b1a<-client", "b2a<-client"), ""},
		{"two rules together", attrs("addr", "nodePort@node2", "client", "external"),
			NewOutcome("b2a<-svip", "b1a<-node-other", "dropped"), NewOutcome("b2a<-gw-local", "b1a<-node-other"), "svip+lossy"},
		{"loss on a sticky row", attrs("addr", "clusterIP", "client", "pod@node1"),
			NewOutcome("dropped", "sticky:ready"), NewOutcome("sticky:ready"), "lossy"},
		{"drops alone are not loss", attrs("addr", "nodePort@node2", "client", "external"),
			NewOutcome("dropped"), NewOutcome("refused"), ""},
		{"anything goes", attrs("addr", "lb-VIP", "client", "host@node2", "etp", "Local"),
			NewOutcome("b2b<-client"), NewOutcome("b1a<-gw-local"), "any"},
	}
	for _, c := range cases {
		got := strings.Join(Explain(rules, c.attrs, c.antrea, c.kp), "+")
		if got != c.want {
			t.Errorf("%s: explained by %q, want %q", c.name, got, c.want)
		}
	}
}

func TestJudgeReducesAffinityRows(t *testing.T) {
	s := &Shape{Name: "s", Affinity: true, Endpoints: []Endpoint{{Backend: "b1a", State: Ready}, {Backend: "b2a", State: Ready}}}
	r := Row{Shape: s, Target: "clusterIP", TargetNode: -1, Client: "pod@node1"}
	// Each side sticks to a different one of the two eligible backends: the same class.
	v := Judge(nil, r, NewOutcome("b1a<-client"), NewOutcome("b2a<-client"))
	if !v.Same {
		t.Errorf("sticky to different backends judged different: %s vs %s", v.Antrea, v.KubeProxy)
	}
	v = Judge(nil, r, NewOutcome("b1a<-client", "b2a<-client"), NewOutcome("b2a<-client"))
	if v.Same || v.Explained() {
		t.Errorf("a row that is not sticky on one side judged the same: %s vs %s", v.Antrea, v.KubeProxy)
	}
	rules := mustRules(t, "| `x` | `addr=*` | `src:a->b` | r |")
	if got := UnusedRules(rules, []Verdict{v, {Rules: []string{"y"}}}); len(got) != 1 || got[0] != "x" {
		t.Errorf("unused rules %v", got)
	}
	// A row of OtherPort is not Service traffic: the outside answer is compared as it is.
	other := Row{Shape: s, Port: Port{Name: otherPortName, Protocol: "TCP", Port: OtherPort}, Target: "externalIP-other", TargetNode: -1, Client: "pod@node1"}
	if v := Judge(nil, other, NewOutcome("dropped"), NewOutcome("outside<-node-other")); v.KubeProxy.String() != "outside<-node-other" || v.Same {
		t.Errorf("an OtherPort row of an affinity Service reduced: %s vs %s", v.Antrea, v.KubeProxy)
	}
	sum := Summarize([]Verdict{v, Judge(nil, r, NewOutcome("dropped"), NewOutcome("dropped"))})
	if sum.Rows != 2 || sum.Same != 1 || len(sum.Unexplained) != 1 {
		t.Errorf("summary %+v", sum)
	}
}
