package arch

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/antrea-proxy/antrea-proxy"

// root is the module root, two levels above this package.
const root = "../.."

// treeImports parses the imports of every non-test .go file of the tree (testdata, hidden
// and underscore directories skipped) and returns them with the tree's packages.
func treeImports(t *testing.T) ([]Import, []string) {
	t.Helper()
	var imports []Import
	pkgs := map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		pkg := filepath.ToSlash(filepath.Dir(rel))
		pkgs[pkg] = true
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, spec := range f.Imports {
			p, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				return err
			}
			im := Import{Pkg: pkg, File: rel, Path: p}
			if rest, ok := strings.CutPrefix(p, module+"/"); ok {
				im.Path, im.Project = rest, true
			}
			imports = append(imports, im)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	list := make([]string, 0, len(pkgs))
	for p := range pkgs {
		list = append(list, p)
	}
	sort.Strings(list)
	return imports, list
}

func loadRules(t *testing.T) Rules {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(root, "docs", "design", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := ParseRules(string(doc))
	if err != nil {
		t.Fatalf("docs/design/architecture.md: %v", err)
	}
	return r
}

// TestImportsFollowTheLayers: every import of the tree's non-test files is allowed by
// docs/design/architecture.md, and no "never" package links what it must not (among them:
// antrea-agent links no pkg/loadbalancer and no leader election; nodenet never reaches the
// proxier).
func TestImportsFollowTheLayers(t *testing.T) {
	r := loadRules(t)
	imports, pkgs := treeImports(t)
	if len(pkgs) < 30 || len(imports) < 100 {
		t.Fatalf("only %d packages and %d imports found: is the walk rooted at the module?", len(pkgs), len(imports))
	}
	for _, msg := range r.Check(imports, pkgs) {
		t.Error(msg)
	}
}

// TestEveryRuleNamesAPackage: an allow or never rule for a package that does not exist is a
// stale rule (a package was moved without updating the document).
func TestEveryRuleNamesAPackage(t *testing.T) {
	r := loadRules(t)
	_, pkgs := treeImports(t)
	for _, m := range []map[string][]string{r.Allow, r.Never} {
		for pat := range m {
			found := false
			for _, p := range pkgs {
				found = found || Match(pat, p)
			}
			if !found {
				t.Errorf("rule for %s matches no package of the tree", pat)
			}
		}
	}
}

// TestCheckReportsViolations: the checker names the file and the import of a forbidden
// import, an uncovered package, and a forbidden package reached transitively.
func TestCheckReportsViolations(t *testing.T) {
	r, err := ParseRules("x\n```layers\nallow pkg/low:\nallow pkg/mid: pkg/low\nallow pkg/top/...: pkg/mid pkg/low\n" +
		"never pkg/top/bin: pkg/bad/... k8s.io/client-go/tools/leaderelection\n```\n")
	if err != nil {
		t.Fatal(err)
	}
	imports := []Import{
		{Pkg: "pkg/low", File: "pkg/low/a.go", Path: "pkg/mid", Project: true},                // upward
		{Pkg: "pkg/mid", File: "pkg/mid/b.go", Path: "pkg/low", Project: true},                // fine
		{Pkg: "pkg/top/bin", File: "pkg/top/bin/main.go", Path: "pkg/mid", Project: true},     // fine
		{Pkg: "pkg/mid", File: "pkg/mid/c.go", Path: "k8s.io/client-go/tools/leaderelection"}, // linked by bin
		{Pkg: "pkg/stray", File: "pkg/stray/d.go", Path: "fmt"},                               // no rule
	}
	got := r.Check(imports, []string{"pkg/low", "pkg/mid", "pkg/stray", "pkg/top/bin"})
	want := []string{
		"package pkg/stray has no allow rule in docs/design/architecture.md",
		"pkg/low/a.go: pkg/low imports pkg/mid, which its rule does not allow",
		"pkg/mid/c.go: pkg/mid imports k8s.io/client-go/tools/leaderelection, so pkg/top/bin links it (pkg/top/bin → pkg/mid)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, bad := range []string{"```layers\nallow pkg/a\n```", "```layers\nallow pkg/a:\nallow pkg/a:\n```", "```layers\nallow pkg/a:\n", "no block"} {
		if _, err := ParseRules(bad); err == nil {
			t.Errorf("ParseRules(%q) accepted", bad)
		}
	}
}
