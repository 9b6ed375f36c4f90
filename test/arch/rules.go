// Package arch enforces the import rules of docs/design/architecture.md: its test reads the
// ```layers block of that document and checks the imports of every non-test Go file of the
// tree against it.
package arch

import (
	"bufio"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Rules is the parsed ```layers block.
type Rules struct {
	// Allow maps a package pattern ("pkg/x" or "pkg/x/...") to the project package patterns
	// its non-test files may import; ["*"] allows anything.
	Allow map[string][]string
	// Never maps a package to the patterns it must not link, directly or transitively.
	Never map[string][]string
}

// ParseRules reads the first ```layers fenced block of a Markdown document.
func ParseRules(doc string) (Rules, error) {
	r := Rules{Allow: map[string][]string{}, Never: map[string][]string{}}
	in, seen := false, false
	sc := bufio.NewScanner(strings.NewReader(doc))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case !in && line == "```layers":
			in, seen = true, true
			continue
		case !in:
			continue
		case line == "```":
			return r, nil
		case line == "" || strings.HasPrefix(line, "#"):
			continue
		}
		kind, rest, _ := strings.Cut(line, " ")
		pkg, targets, ok := strings.Cut(rest, ":")
		pkg = strings.TrimSpace(pkg)
		if !ok || pkg == "" || (kind != "allow" && kind != "never") {
			return r, fmt.Errorf("line %d: %q is not \"allow|never <package>: <packages>\"", n, line)
		}
		m := r.Allow
		if kind == "never" {
			m = r.Never
		}
		if _, dup := m[pkg]; dup {
			return r, fmt.Errorf("line %d: a second %s rule for %s", n, kind, pkg)
		}
		m[pkg] = strings.Fields(targets)
	}
	if !seen {
		return r, fmt.Errorf("no ```layers block")
	}
	return r, fmt.Errorf("```layers block not closed")
}

// Match reports whether the package path p matches pattern: equal, "*", or "dir/..." for dir
// and everything below it.
func Match(pattern, p string) bool {
	if pattern == "*" || pattern == p {
		return true
	}
	dir, ok := strings.CutSuffix(pattern, "/...")
	return ok && (p == dir || strings.HasPrefix(p, dir+"/"))
}

// allowedFor returns the allow list of the most specific pattern matching p (an exact
// pattern beats a subtree, a longer subtree beats a shorter one).
func (r Rules) allowedFor(p string) ([]string, bool) {
	best, bestLen, found := []string(nil), -1, false
	for pat, allowed := range r.Allow {
		if !Match(pat, p) {
			continue
		}
		l := len(pat)
		if pat == p {
			l = 1 << 30
		}
		if l > bestLen {
			best, bestLen, found = allowed, l, true
		}
	}
	return best, found
}

// Import is one import of one file: the importing package, its file and the imported path,
// all relative to the module (project paths) or as written (external paths).
type Import struct {
	Pkg, File, Path string
	// Project is true when Path is a package of this module.
	Project bool
}

// Check returns one message per import of a non-test file that the rules forbid, and per
// package the rules do not cover, naming the file and the import.
func (r Rules) Check(imports []Import, pkgs []string) []string {
	var out []string
	for _, p := range pkgs {
		if _, ok := r.allowedFor(p); !ok {
			out = append(out, fmt.Sprintf("package %s has no allow rule in docs/design/architecture.md", p))
		}
	}
	for _, im := range imports {
		if !im.Project || im.Path == im.Pkg {
			continue
		}
		allowed, ok := r.allowedFor(im.Pkg)
		if !ok || slices.ContainsFunc(allowed, func(pat string) bool { return Match(pat, im.Path) }) {
			continue
		}
		out = append(out, fmt.Sprintf("%s: %s imports %s, which its rule does not allow", im.File, im.Pkg, im.Path))
	}
	return append(out, r.checkNever(imports)...)
}

// checkNever follows project imports from each "never" package and reports every import (of
// a project or an external package) by a package it reaches that matches a forbidden pattern.
func (r Rules) checkNever(imports []Import) []string {
	byPkg := map[string][]Import{}
	for _, im := range imports {
		byPkg[im.Pkg] = append(byPkg[im.Pkg], im)
	}
	var out []string
	roots := make([]string, 0, len(r.Never))
	for root := range r.Never {
		roots = append(roots, root)
	}
	sort.Strings(roots)
	for _, root := range roots {
		forbidden := r.Never[root]
		via := map[string]string{root: ""}
		queue := []string{root}
		for len(queue) > 0 {
			p := queue[0]
			queue = queue[1:]
			if slices.ContainsFunc(forbidden, func(pat string) bool { return Match(pat, p) }) {
				continue // reported where it was imported
			}
			for _, im := range byPkg[p] {
				if slices.ContainsFunc(forbidden, func(pat string) bool { return Match(pat, im.Path) }) {
					out = append(out, fmt.Sprintf("%s: %s imports %s, so %s links it (%s)", im.File, im.Pkg, im.Path, root, chain(via, p)))
				}
				if _, seen := via[im.Path]; im.Project && !seen {
					via[im.Path] = p
					queue = append(queue, im.Path)
				}
			}
		}
	}
	return out
}

// chain renders the import path from the root to p.
func chain(via map[string]string, p string) string {
	var c []string
	for ; p != ""; p = via[p] {
		c = append(c, p)
	}
	slices.Reverse(c)
	return strings.Join(c, " → ")
}
