package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const (
	proxyDir    = "../../pkg/proxy"
	proxyReadme = "../../pkg/proxy/README.md"
)

// TestProxyReadmeNamesEveryFile: pkg/proxy/README.md names (in backquotes) every Go file of
// pkg/proxy; a sub-package's test file may instead go by the rule that each file's test has the
// file's name (foo_test.go of a named foo.go). Every Go file name it quotes exists.
func TestProxyReadmeNamesEveryFile(t *testing.T) {
	b, err := os.ReadFile(proxyReadme)
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, m := range regexp.MustCompile("`([A-Za-z][A-Za-z0-9_]*\\.go)`").FindAllStringSubmatch(string(b), -1) {
		named[m[1]] = true
	}
	exists := map[string]bool{}
	err = filepath.WalkDir(proxyDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		rel, _ := filepath.Rel(proxyDir, path)
		base := d.Name()
		exists[base] = true
		if named[base] {
			return nil
		}
		if sub := filepath.Dir(rel) != "."; sub && named[strings.TrimSuffix(base, "_test.go")+".go"] {
			return nil
		}
		t.Errorf("pkg/proxy/README.md does not name %s (add it to the Files section)", rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for n := range named {
		if !exists[n] {
			t.Errorf("pkg/proxy/README.md names %s, which is no file of pkg/proxy", n)
		}
	}
}
