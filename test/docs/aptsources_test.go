package docs

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// aptLib is the script hack/images.sh sources to find debootstrap's mirror and proxy.
const aptLib = "../../hack/lib/apt-sources.sh"

// runAptLib runs a shell snippet with hack/lib/apt-sources.sh sourced, APT_ROOT set to root and
// stdin from input; it returns stdout and whether the snippet exited 0.
func runAptLib(t *testing.T, root, snippet, input string) (string, bool) {
	t.Helper()
	lib, err := filepath.Abs(aptLib)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-c", ". \"$1\"; "+snippet, "bash", lib)
	cmd.Env = append(os.Environ(), "APT_ROOT="+root)
	cmd.Stdin = strings.NewReader(input)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatalf("bash: %v", err)
	}
	if stderr.Len() > 0 {
		t.Errorf("stderr of %q: %s", snippet, stderr.String())
	}
	return strings.TrimSpace(string(out)), err == nil
}

// aptRoot writes files (path relative to etc/apt → content) under a new directory.
func aptRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, "etc", "apt", name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

const deb822Bookworm = `Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://mirror.corp.example/debian/
Suites: bookworm bookworm-updates
Components: main contrib
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.corp.example/debian-security
Suites: bookworm-security
Components: main
`

// TestAptDebianMirror: debootstrap's mirror is the machine's own apt source, in either format,
// the entry of the suite itself first, and nothing (exit 1) when the machine has none.
func TestAptDebianMirror(t *testing.T) {
	cases := []struct {
		name  string
		files map[string]string
		want  string // "" = none found
	}{
		{"deb822 sources, trailing slash dropped", map[string]string{"sources.list.d/debian.sources": deb822Bookworm}, "http://mirror.corp.example/debian"},
		{"one-line list with options and comments", map[string]string{"sources.list": `# deb http://wrong.example/debian bookworm main
deb-src http://src.example/debian bookworm main
deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://cache.local:3142/debian bookworm main non-free-firmware
deb http://cache.local:3142/debian-security bookworm-security main
`}, "http://cache.local:3142/debian"},
		{"sources.list before sources.list.d", map[string]string{
			"sources.list":                  "deb https://first.example/debian bookworm main\n",
			"sources.list.d/debian.sources": deb822Bookworm,
		}, "https://first.example/debian"},
		{"exact suite beats another release", map[string]string{
			"sources.list.d/a.list": "deb http://trixie.example/debian trixie main\n",
			"sources.list.d/b.list": "deb http://bookworm.example/debian bookworm main\n",
		}, "http://bookworm.example/debian"},
		{"another Debian release's mirror", map[string]string{"sources.list.d/debian.sources": `Types: deb
URIs: http://mirror.corp.example/debian
Suites: trixie trixie-updates
Components: main
`}, "http://mirror.corp.example/debian"},
		{"disabled stanza, deb-src, no main, other files ignored", map[string]string{
			"sources.list.d/off.sources":           "Types: deb\nURIs: http://off.example/debian\nSuites: bookworm\nComponents: main\nEnabled: no\n",
			"sources.list.d/src.sources":           "Types: deb-src\nURIs: http://src.example/debian\nSuites: bookworm\nComponents: main\n",
			"sources.list.d/contrib.list":          "deb http://contrib.example/debian bookworm contrib\n",
			"sources.list.d/old.list.disabled":     "deb http://disabled.example/debian bookworm main\n",
			"sources.list.d/cdrom.list":            "deb cdrom:[Debian 12]/ bookworm main\n",
			"sources.list.d/nodesource.sources":    "Types: deb\nURIs: https://deb.nodesource.com/node_20.x\nSuites: nodistro\nComponents: main\n",
			"sources.list.d/zz-after-none.sources": "Types: deb\nURIs: http://last.example/debian\nSuites: bookworm\nComponents: main\n",
		}, "http://last.example/debian"},
		{"no Debian source at all", map[string]string{
			"sources.list.d/ubuntu.list":     "deb http://archive.ubuntu.com/ubuntu noble main\n",
			"sources.list.d/security.list":   "deb http://security.example/debian-security bookworm-security main\n",
			"sources.list.d/updates.sources": "Types: deb\nURIs: http://x.example/debian\nSuites: trixie-updates\nComponents: main\n",
		}, ""},
		{"no sources files", nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := runAptLib(t, aptRoot(t, c.files), "apt_debian_mirror bookworm", "")
			if got != c.want || ok != (c.want != "") {
				t.Errorf("apt_debian_mirror = %q (exit 0: %v), want %q", got, ok, c.want)
			}
		})
	}
}

// TestAptProxyFromDump: the proxy is apt's Acquire::http::Proxy; DIRECT, false and per-host
// settings are no proxy for debootstrap.
func TestAptProxyFromDump(t *testing.T) {
	cases := map[string]string{
		"Acquire \"\";\nAcquire::http \"\";\nAcquire::http::Proxy \"http://proxy.corp.example:3128\";\n": "http://proxy.corp.example:3128",
		"Acquire::http::Proxy \"DIRECT\";\n":              "",
		"Acquire::http::Proxy \"false\";\n":               "",
		"Acquire::http::Proxy::deb.example \"DIRECT\";\n": "",
		"": "",
	}
	for dump, want := range cases {
		if got, ok := runAptLib(t, t.TempDir(), "apt_proxy_from_dump", dump); got != want || !ok {
			t.Errorf("apt_proxy_from_dump on %q = %q (exit 0: %v), want %q", dump, got, ok, want)
		}
	}
}
