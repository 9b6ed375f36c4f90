package docs

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

// registerRow is a row of the "Registers" section: | name | regN | first..last or bit | ... |.
var registerRow = regexp.MustCompile(`^\|\s*(\w+)\s*\|\s*reg(\d+)\s*\|\s*(\d+)(?:\.\.(\d+))?\s*\|`)

// TestRegisterListMatchesPipeline checks the doc's register list against pipeline.RegFields:
// the same names, each on the same register and bits.
func TestRegisterListMatchesPipeline(t *testing.T) {
	lines, _ := readDoc(t)
	type place struct{ reg, start, end int }
	got := map[string]place{}
	for _, r := range sectionRows(lines, "## Registers", registerRow) {
		m := r.match
		reg, _ := strconv.Atoi(m[2])
		start, _ := strconv.Atoi(m[3])
		end := start
		if m[4] != "" {
			end, _ = strconv.Atoi(m[4])
		}
		if _, dup := got[m[1]]; dup {
			t.Errorf("%s:%d: register field %s listed twice", docPath, r.line, m[1])
		}
		got[m[1]] = place{reg, start, end}
	}
	if len(got) == 0 {
		t.Fatalf("%s: no register list found in the \"## Registers\" section", docPath)
	}
	for _, f := range pipeline.RegFields() {
		want := place{int(f.Reg), int(f.Start), int(f.End)}
		have, ok := got[f.Name]
		switch {
		case !ok:
			t.Errorf("register field %s (reg%d[%d..%d], pkg/pipeline) is missing from the doc's register list", f.Name, f.Reg, f.Start, f.End)
		case have != want:
			t.Errorf("register field %s: the doc puts it at reg%d[%d..%d], pkg/pipeline at reg%d[%d..%d]",
				f.Name, have.reg, have.start, have.end, f.Reg, f.Start, f.End)
		}
		delete(got, f.Name)
	}
	for name := range got {
		t.Errorf("the doc lists register field %s, which pipeline.RegFields does not have", name)
	}
}

// sectionRow is a line of a doc section that matched a row pattern.
type sectionRow struct {
	line  int // 1-based
	match []string
}

// sectionRows returns the lines of the section with heading (a "## " line) that match row.
func sectionRows(lines []string, heading string, row *regexp.Regexp) []sectionRow {
	var out []sectionRow
	in := false
	for i, l := range lines {
		if strings.HasPrefix(l, "## ") {
			in = l == heading
			continue
		}
		if m := row.FindStringSubmatch(l); in && m != nil {
			out = append(out, sectionRow{line: i + 1, match: m})
		}
	}
	return out
}
