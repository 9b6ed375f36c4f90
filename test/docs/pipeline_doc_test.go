// Package docs checks that the documentation agrees with the code: docs/design/ovs-pipeline.md
// (this file; its integration contract in contract_test.go, its register list in
// registers_test.go), pkg/proxy/README.md's list of the package's files (proxyreadme_test.go),
// and the apt-source detection build/images/README.md describes for hack/images.sh
// (aptsources_test.go).
//
// The pipeline doc:
//
// Every line of a fenced code block whose info string is "flows" is an example: a flow, a
// group, or one bucket of a group. Each must be written exactly as the canonical dumps print it,
// with the table and register names of pipeline.Names, and must appear in one of them, so that
// an example cannot drift from the pipeline:
//
//   - flows and groups: a line of the expected dump of a golden data file of pkg/proxy
//     (testdata/golden/**.yaml, the proxier's whole-bridge dumps) or of the gateway and pod
//     flows of the example node built below from pipeline.GatewayFlows and pipeline.PodFlows;
//   - a line starting with "bucket=": one bucket of a group in those dumps.
//
// There are no placeholders. A line that looks like a flow, group or bucket outside a "flows"
// block is an error too, so that unchecked examples cannot creep back.
//
// The table list of the doc's "Tables" section must name exactly pipeline.TableNames.
package docs

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

const docPath = "../../docs/design/ovs-pipeline.md"

// goldenGlobs are pkg/proxy's golden data files; their last document is "expected: |" and the
// dump, indented by two spaces.
var goldenGlobs = []string{"../../pkg/proxy/testdata/golden/*.yaml", "../../pkg/proxy/testdata/golden/ratelimits/*.yaml"}

// exampleNode is the node of the doc's gateway and pod examples: the goldens' round (1) and
// gateway port (2), the default NodePort virtual IP, podCIDR 10.10.1.0/24 (the goldens'
// local endpoint 10.10.1.5 is the example pod, on port 5).
func exampleNode(t *testing.T) []of.Flow {
	const round = 1
	gwMAC := mustMAC(t, "0e:00:00:00:00:01")
	flows := pipeline.GatewayFlows(round, pipeline.Gateway{OFPort: 2, MAC: gwMAC, IPv4: true,
		NodePortVirtualIPs: []netip.Addr{netip.MustParseAddr("169.254.0.252")},
		PodCIDRs:           []netip.Prefix{netip.MustParsePrefix("10.10.1.0/24")}})
	return append(flows, pipeline.PodFlows(round, gwMAC, pipeline.Pod{ID: 5, OFPort: 5,
		MAC: mustMAC(t, "0a:58:0a:0a:01:05"), IPs: []netip.Addr{netip.MustParseAddr("10.10.1.5")}})...)
}

func mustMAC(t *testing.T, s string) net.HardwareAddr {
	t.Helper()
	m, err := net.ParseMAC(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// example is one line of a "flows" block.
type example struct {
	line int
	text string
}

// docBlock is a fenced code block of the doc.
type docBlock struct {
	info  string
	lines []example
}

// readDoc returns the doc's lines and its fenced code blocks.
func readDoc(t *testing.T) ([]string, []docBlock) {
	t.Helper()
	b, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	var blocks []docBlock
	var cur *docBlock
	for i, l := range lines {
		trimmed := strings.TrimSpace(l)
		if strings.HasPrefix(trimmed, "```") {
			if cur == nil {
				cur = &docBlock{info: strings.TrimSpace(strings.TrimPrefix(trimmed, "```"))}
			} else {
				blocks = append(blocks, *cur)
				cur = nil
			}
			continue
		}
		if cur != nil {
			cur.lines = append(cur.lines, example{line: i + 1, text: l})
		}
	}
	if cur != nil {
		t.Fatalf("%s: unterminated code block", docPath)
	}
	return lines, blocks
}

// reference is every canonical flow, group and bucket line an example may copy.
type reference struct {
	lines   map[string]bool
	buckets map[string]bool
}

func canonicalFlow(s string) (string, error) {
	f, err := of.ParseFlowNamed(s, pipeline.Names())
	if err != nil {
		return "", err
	}
	f = of.CanonicalFlow(f)
	return of.FormatFlowNamed(&f, pipeline.Names()), nil
}

func parseGroup(s string) (of.Group, error) {
	g, err := of.ParseGroupNamed(s, pipeline.Names())
	if err != nil {
		return of.Group{}, err
	}
	return of.CanonicalGroup(g), nil
}

// canonicalBucket renders a lone bucket line as a bucket of a select group.
func canonicalBucket(s string) (string, error) {
	g, err := parseGroup("group_id=1,type=select," + s)
	if err != nil {
		return "", err
	}
	if len(g.Buckets) != 1 {
		return "", fmt.Errorf("%d buckets, want 1", len(g.Buckets))
	}
	return of.FormatBucketNamed(&g.Buckets[0], pipeline.Names()), nil
}

func loadReference(t *testing.T) reference {
	t.Helper()
	ref := reference{lines: map[string]bool{}, buckets: map[string]bool{}}
	text := goldenLines(t)
	for _, f := range exampleNode(t) {
		text = append(text, of.FormatFlowNamed(&f, pipeline.Names()))
	}
	for _, l := range text {
		if strings.HasPrefix(l, "group_id=") {
			g, err := parseGroup(l)
			if err != nil {
				t.Fatalf("golden group %q: %v", l, err)
			}
			ref.lines[of.FormatGroupNamed(&g, pipeline.Names())] = true
			for i := range g.Buckets {
				ref.buckets[of.FormatBucketNamed(&g.Buckets[i], pipeline.Names())] = true
			}
			continue
		}
		c, err := canonicalFlow(l)
		if err != nil {
			t.Fatalf("golden flow %q: %v", l, err)
		}
		ref.lines[c] = true
	}
	return ref
}

// goldenLines are the lines of the expected dumps of pkg/proxy's golden data files.
func goldenLines(t *testing.T) []string {
	t.Helper()
	var text []string
	for _, glob := range goldenGlobs {
		paths, err := filepath.Glob(glob)
		if err != nil || len(paths) == 0 {
			t.Fatalf("no golden data files at %s (%v)", glob, err)
		}
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			_, dump, ok := strings.Cut(string(b), "\n---\nexpected: |\n")
			if !ok {
				t.Fatalf("%s has no expected document", p)
			}
			for _, l := range strings.Split(strings.TrimRight(dump, "\n"), "\n") {
				text = append(text, strings.TrimPrefix(l, "  "))
			}
		}
	}
	return text
}

// looksLikeFlow says whether a line of a code block is a flow, group or bucket.
var looksLikeFlow = regexp.MustCompile(`^\s*(cookie=0x|table=[0-9A-Z]|group_id=\d|bucket=bucket_id)`)

// checkExample returns what is wrong with one example line, or "".
func checkExample(ref reference, text string) string {
	var canon string
	var err error
	known := ref.lines
	if strings.HasPrefix(text, "bucket=") {
		canon, err = canonicalBucket(text)
		known = ref.buckets
	} else if strings.HasPrefix(text, "group_id=") {
		var g of.Group
		if g, err = parseGroup(text); err == nil {
			canon = of.FormatGroupNamed(&g, pipeline.Names())
		}
	} else {
		canon, err = canonicalFlow(text)
	}
	switch {
	case err != nil:
		return fmt.Sprintf("does not parse: %v", err)
	case !known[canon]:
		return "is in no golden (pkg/proxy/testdata/golden) nor in the example node's gateway and pod flows: " +
			"copy the line the pipeline produces now"
	case canon != text:
		return fmt.Sprintf("is not written in canonical form; write it as\n\t%s", canon)
	}
	return ""
}

// TestFlowExamplesMatchGoldens checks every example line of the doc against the goldens.
func TestFlowExamplesMatchGoldens(t *testing.T) {
	ref := loadReference(t)
	_, blocks := readDoc(t)
	n := 0
	for _, b := range blocks {
		if b.info != "flows" {
			for _, l := range b.lines {
				if looksLikeFlow.MatchString(l.text) {
					t.Errorf("%s:%d: a flow example outside a ```flows block is not checked; move it into one:\n\t%s",
						docPath, l.line, l.text)
				}
			}
			continue
		}
		for _, l := range b.lines {
			if strings.TrimSpace(l.text) == "" {
				continue
			}
			n++
			if msg := checkExample(ref, l.text); msg != "" {
				t.Errorf("%s:%d: example\n\t%s\n%s", docPath, l.line, l.text, msg)
			}
		}
	}
	if n == 0 {
		t.Errorf("%s has no ```flows block: the examples are gone or the convention changed", docPath)
	}
}

// tableRow is a row of the "Tables" section: | number | name | ... |.
var tableRow = regexp.MustCompile(`^\|\s*(\d+)\s*\|\s*(\w+)\s*\|`)

// TestTableListMatchesPipeline checks the doc's table list against pipeline.TableNames.
func TestTableListMatchesPipeline(t *testing.T) {
	lines, _ := readDoc(t)
	got := map[uint8]string{}
	for _, r := range sectionRows(lines, "## Tables", tableRow) {
		m := r.match
		num, err := strconv.ParseUint(m[1], 10, 8)
		if err != nil {
			t.Errorf("%s:%d: table number %q: %v", docPath, r.line, m[1], err)
			continue
		}
		if old, dup := got[uint8(num)]; dup {
			t.Errorf("%s:%d: table %d listed twice (%s, %s)", docPath, r.line, num, old, m[2])
		}
		got[uint8(num)] = m[2]
	}
	if len(got) == 0 {
		t.Fatalf("%s: no table list found in the \"## Tables\" section", docPath)
	}
	var nums []uint8
	for k := range got {
		nums = append(nums, k)
	}
	for k := range pipeline.TableNames {
		if _, ok := got[k]; !ok {
			nums = append(nums, k)
		}
	}
	slices.Sort(nums)
	for _, k := range nums {
		want, inCode := pipeline.TableNames[k]
		have, inDoc := got[k]
		switch {
		case !inDoc:
			t.Errorf("table %d %s (pkg/pipeline) is missing from the doc's table list", k, want)
		case !inCode:
			t.Errorf("the doc lists table %d %s, which pkg/pipeline does not have", k, have)
		case want != have:
			t.Errorf("table %d: the doc calls it %s, pkg/pipeline %s", k, have, want)
		}
	}
}
