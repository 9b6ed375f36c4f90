package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBadConfigFailsClearly: a bad antrea-agent.conf stops the agent before it touches anything,
// with an error that names every problem.
func TestBadConfigFailsClearly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "antrea-agent.conf")
	if err := os.WriteFile(path, []byte("ovsDatapathType: fast\nantreaProxy:\n  proxyLoadBalancerIP: false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("NODE_NAME", "node-a")
	err := run([]string{"--config", path})
	if err == nil {
		t.Fatal("want an error for a bad config")
	}
	for _, want := range []string{path, `unknown field "antreaProxy.proxyLoadBalancerIP"`, `ovsDatapathType: "fast"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestMissingConfigFile(t *testing.T) {
	err := run([]string{"--config", filepath.Join(t.TempDir(), "nope.conf")})
	if err == nil || !strings.Contains(err.Error(), "nope.conf") {
		t.Fatalf("want an error naming the missing file, got %v", err)
	}
}
