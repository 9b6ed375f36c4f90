package framework

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const (
	modulePath   = "github.com/antrea-proxy/antrea-proxy"
	buildScript  = "hack/build-control-plane.sh"
	buildTimeout = 45 * time.Minute
)

// RepoRoot finds the antrea-proxy checkout by walking up from the working directory (go test runs
// a test in its package directory) to the go.mod of the main module.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && declaresModule(b, modulePath) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of module %s above the working directory", modulePath)
		}
		dir = parent
	}
}

func declaresModule(gomod []byte, path string) bool {
	sc := bufio.NewScanner(strings.NewReader(string(gomod)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == "module" {
			return f[1] == path
		}
	}
	return false
}

// EnsureControlPlaneBinaries returns the directory holding etcd, kube-apiserver and
// kube-controller-manager built at the versions pinned in hack/tools. When they are missing or out
// of date it builds them under CI=true (this can take about 15 minutes on a fresh machine) and
// otherwise fails the test with the command to run; it never skips.
func EnsureControlPlaneBinaries(t testing.TB) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatalf("locating the repository to find the control-plane binaries: %v", err)
	}
	binDir := filepath.Join(root, "_output", "bin")
	script := filepath.Join(root, buildScript)
	check := exec.Command("bash", script, "--check")
	err = check.Run()
	if err == nil {
		return binDir
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("running %s --check: %v", buildScript, err)
	}
	state := describeBinaries(binDir)
	if os.Getenv("CI") != "true" {
		t.Fatalf("the control-plane binaries in %s are %s: run `make test-e2e` (it builds them first) or `%s` "+
			"(about 15 minutes the first time, seconds afterwards), then run the test again", binDir, state, buildScript)
	}
	t.Logf("CI=true and the control-plane binaries in %s are %s: running %s (about 15 minutes on a fresh machine)", binDir, state, buildScript)
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	build := exec.CommandContext(ctx, "bash", script)
	// Progress lines go to the test's stderr so a long build does not look hung.
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	start := time.Now()
	if err := build.Run(); err != nil {
		t.Fatalf("%s failed after %v: %v (its output is above)", buildScript, time.Since(start).Round(time.Second), err)
	}
	t.Logf("built the control plane in %v", time.Since(start).Round(time.Second))
	return binDir
}

func describeBinaries(binDir string) string {
	var missing []string
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager"} {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		return "missing (" + strings.Join(missing, ", ") + ")"
	}
	return "out of date (hack/tools/go.mod or go.sum changed since they were built)"
}
