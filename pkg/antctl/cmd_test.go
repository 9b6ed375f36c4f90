package antctl

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver"
	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver/apiservertest"
	"github.com/antrea-proxy/antrea-proxy/pkg/config"
)

// asAntctlEnv makes the test binary run antctl with the arguments in the variable (separated by
// spaces) instead of the tests; see TestMain.
const asAntctlEnv = "ANTCTL_TEST_ARGS"

func TestMain(m *testing.M) {
	if args := os.Getenv(asAntctlEnv); args != "" {
		os.Exit(Main(strings.Fields(args), os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func requireOneLineError(t *testing.T, stderr string, code int, want string) {
	t.Helper()
	require.Equal(t, 1, code, "exit code; stderr: %s", stderr)
	require.Equal(t, 1, strings.Count(stderr, "\n"), "one line on stderr: %q", stderr)
	require.True(t, strings.HasPrefix(stderr, "error: "), stderr)
	require.Contains(t, stderr, want)
}

func TestAgentUnreachable(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	for _, args := range [][]string{
		{"get", "servicemap"}, {"get", "ovsflows"}, {"get", "agentinfo"}, {"version"},
	} {
		out, errOut, code := run(append(args, "--socket", sock)...)
		requireOneLineError(t, errOut, code,
			"error: cannot reach antrea-agent: is antrea-agent running? socket "+sock+": no such file or directory\n")
		if args[0] == "version" {
			require.Equal(t, "antctl version: dev\n", out)
		} else {
			require.Empty(t, out)
		}
	}
	_, errOut, code := run("get", "servicemap", "--server", "127.0.0.1:1", "--token-file", writeFile(t, "tok"))
	requireOneLineError(t, errOut, code, "cannot reach antrea-agent: is antrea-agent running? server 127.0.0.1:1: connection refused")
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

func TestUsageErrors(t *testing.T) {
	sock := startAgent(t, apiservertest.AllDecisions())
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "servicemap", "-o", "xml"}, `unknown output format "xml": want one of table|wide|json|yaml`},
		{[]string{"get", "servicemap", "web", "-A"}, "cannot be selected by name"},
		{[]string{"get", "servicemap", "-A", "-n", "prod"}, "exclusive"},
		{[]string{"get", "servicemap", "a", "b"}, "accepts at most 1 arg(s)"},
		{[]string{"get", "servicemap", "nope"}, "agent API (NotFound): Service default/nope is not programmed by this agent"},
		{[]string{"get", "ovsflows", "-S", "web"}, `agent API (BadRequest): query parameter service="web" must be "namespace/name"`},
		{[]string{"get", "pods"}, `unknown command "pods" for "antctl get"`},
		{[]string{"get"}, "get needs a resource: one of servicemap, ovsflows, agentinfo"},
		{[]string{"get", "servicemap", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"get", "servicemap", "--server", "127.0.0.1:1"}, "--server needs --token-file"},
	} {
		_, errOut, code := run(append(tc.args, "--socket", sock)...)
		requireOneLineError(t, errOut, code, tc.want)
	}
}

func TestEmptyAndAgentInfo(t *testing.T) {
	sock := startAgent(t, apiservertest.NewFakeSource())
	out, errOut, code := run("get", "servicemap", "-n", "kube-system", "--socket", sock)
	require.Equal(t, 0, code)
	require.Empty(t, out)
	require.Equal(t, "No resources found in kube-system namespace.\n", errOut)
	out, _, code = run("get", "servicemap", "-A", "-o", "json", "--socket", sock)
	require.Equal(t, 0, code)
	require.Contains(t, out, `"items": []`)

	out, errOut, code = run("get", "agentinfo", "--socket", sock)
	require.Equal(t, 0, code, errOut)
	for _, want := range []string{"Node:", "node-a", "proxyLoadBalancerIPs:", "OVS connected:", "false", "Last sync:", "<none>"} {
		require.Contains(t, out, want)
	}
	out, errOut, code = run("version", "--socket", sock)
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `^antctl version: dev\nantrea-agent version: dev \(go[^)]+\)\n$`, out)
}

func TestTCPWithToken(t *testing.T) {
	cfg := &config.AgentConfig{}
	cfg.DefaultsFrom(config.Env{Getenv: func(string) string { return "node-a" }})
	cfg.APISocket = filepath.Join(t.TempDir(), "a.sock")
	cfg.APITCPAddress = "127.0.0.1:0"
	cfg.APITokenFile = writeFile(t, "tok-123\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := apiserver.Start(ctx, apiserver.Options{Config: cfg, Services: apiservertest.AllDecisions()})
	require.NoError(t, err)
	defer s.Close()
	out, errOut, code := run("get", "servicemap", "web", "--server", s.TCPAddr().String(), "--token-file", cfg.APITokenFile)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "172.18.0.101(Proxy):skipped: ipMode=Proxy")
	_, errOut, code = run("get", "servicemap", "--server", "http://"+s.TCPAddr().String(), "--token-file", writeFile(t, "wrong"))
	requireOneLineError(t, errOut, code, "agent API (Unauthorized)")
}

// TestPermissionDenied runs antctl as uid 65534 against the agent's root-only socket: one line
// on stderr naming the socket and "permission denied", exit code 1.
func TestPermissionDenied(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run antctl as another user")
	}
	shared, err := os.MkdirTemp("", "antctl")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(shared) })
	require.NoError(t, os.Chmod(shared, 0o755))
	exe, err := os.Executable()
	require.NoError(t, err)
	data, err := os.ReadFile(exe)
	require.NoError(t, err)
	bin := filepath.Join(shared, "antctl.test")
	require.NoError(t, os.WriteFile(bin, data, 0o755))
	cfg := &config.AgentConfig{}
	cfg.DefaultsFrom(config.Env{Getenv: func(string) string { return "node-a" }})
	cfg.APISocket = filepath.Join(shared, "agent.sock")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := apiserver.Start(ctx, apiserver.Options{Config: cfg, Services: apiservertest.AllDecisions()})
	require.NoError(t, err)
	defer s.Close()

	runCtx, stop := context.WithTimeout(context.Background(), 20*time.Second)
	defer stop()
	cmd := exec.CommandContext(runCtx, bin)
	cmd.Env = []string{asAntctlEnv + "=get servicemap --socket " + cfg.APISocket}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, 1, ee.ExitCode())
	require.Empty(t, stdout.String())
	require.Equal(t, "error: cannot reach antrea-agent: is antrea-agent running? socket "+cfg.APISocket+": permission denied\n", stderr.String())
}
