package arch

import (
	"fmt"
	"path"
	"strings"
	"testing"
)

// isTestHelper reports whether the project package p exists for tests: its name ends in
// "test" (openflowtest, servicetracetest, apiservertest), or it lies under test/.
func isTestHelper(p string) bool {
	return strings.HasSuffix(path.Base(p), "test") || p == "test" || strings.HasPrefix(p, "test/")
}

// testHelperViolations returns one message per import of a test helper package by the
// non-test files of a package that is not one itself (production code, hack/ tools).
func testHelperViolations(imports []Import) []string {
	var out []string
	for _, im := range imports {
		if im.Project && isTestHelper(im.Path) && !isTestHelper(im.Pkg) {
			out = append(out, fmt.Sprintf("%s: %s imports %s, a package for tests only", im.File, im.Pkg, im.Path))
		}
	}
	return out
}

// TestNoProductionPackageImportsATestHelper: the fake bridge (openflowtest) and the other
// packages for tests are imported only by test files, by other test helpers and by test/...;
// the "never" rules of the binaries check the same transitively for openflowtest.
func TestNoProductionPackageImportsATestHelper(t *testing.T) {
	imports, _ := treeImports(t)
	for _, msg := range testHelperViolations(imports) {
		t.Error(msg)
	}
}

func TestTestHelperViolationsNamesTheImport(t *testing.T) {
	got := testHelperViolations([]Import{
		{Pkg: "pkg/proxy", File: "pkg/proxy/a.go", Path: "pkg/ovs/openflow/openflowtest", Project: true},                 // forbidden
		{Pkg: "pkg/agent/x/xtest", File: "pkg/agent/x/xtest/b.go", Path: "pkg/ovs/openflow/openflowtest", Project: true}, // helper
		{Pkg: "test/e2e", File: "test/e2e/c.go", Path: "pkg/ovs/openflow/openflowtest", Project: true},                   // tests
		{Pkg: "pkg/proxy", File: "pkg/proxy/d.go", Path: "pkg/ovs/openflow", Project: true},                              // fine
	})
	want := []string{"pkg/proxy/a.go: pkg/proxy imports pkg/ovs/openflow/openflowtest, a package for tests only"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
