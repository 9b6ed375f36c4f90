package proxy

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

// TestGoldenNamesParseBack: every line of every expected dump, with its table and register
// names, parses back (ParseFlowNamed, ParseGroupNamed) to exactly the flows and groups the
// case installs.
func TestGoldenNamesParseBack(t *testing.T) {
	names := pipeline.Names()
	for _, dir := range []string{goldenDir, goldenRateLimitsDir} {
		for _, gf := range loadGoldenFiles(t, dir) {
			tc := gf.goldenCase()
			t.Run(tc.name, func(t *testing.T) {
				want := canonicalDump(t, installGoldenCase(t, tc).bridge)
				var lines []string
				for _, line := range strings.Split(strings.TrimSuffix(gf.expected, "\n"), "\n") {
					if strings.HasPrefix(line, "group_id=") {
						g, err := of.ParseGroupNamed(line, names)
						if err != nil {
							t.Fatal(err)
						}
						g = of.CanonicalGroup(g)
						lines = append(lines, of.FormatGroup(&g))
						continue
					}
					f, err := of.ParseFlowNamed(line, names)
					if err != nil {
						t.Fatal(err)
					}
					f = of.CanonicalFlow(f)
					lines = append(lines, of.FormatFlow(&f))
				}
				sort.Strings(lines)
				if diff := cmp.Diff(want, strings.Join(lines, "\n")); diff != "" {
					t.Errorf("the expected dump parses back to other flows than installed (-installed +parsed):\n%s", diff)
				}
			})
		}
	}
}

// TestGoldenDataStrict: a golden data file with a field its document does not have, an object
// kind the harness does not feed, or no expected document is an error, not a silently
// different case.
func TestGoldenDataStrict(t *testing.T) {
	path := filepath.Join(goldenDir, "clusterip.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if _, err := parseGoldenFile(path, text); err != nil {
		t.Fatalf("the unchanged file: %v", err)
	}
	for _, tc := range []struct{ name, old, new, want string }{
		{"header", "description:", "descripton: x\ndescription:", `unknown field "descripton"`},
		{"options", "description:", "options:\n  rejectMeter: 4\ndescription:", `unknown field "rejectMeter"`},
		{"service", "  clusterIP: 10.96.0.10", "  clusterIPz: 10.96.0.10", `unknown field "clusterIPz"`},
		{"endpoint", "nodeName: node-a}", "nodeName: node-a, zonee: zone-a}", `unknown field "zonee"`},
		{"node", "  name: node-a", "  name: node-a\n  label: {}", `unknown field "label"`},
		{"kind", "kind: Node", "kind: Pod", `unsupported object "v1" "Pod"`},
		{"expected", "expected: |", "expected: |\n  x\nexpectd: |", `unknown field "expectd"`},
		{"no expected", "---\nexpected: |", "---\nwant: |", "no last document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(text, tc.old) {
				t.Fatalf("%s has no %q", path, tc.old)
			}
			_, err := parseGoldenFile(path, strings.Replace(text, tc.old, tc.new, 1))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got error %v, want one with %q", err, tc.want)
			}
		})
	}
}
