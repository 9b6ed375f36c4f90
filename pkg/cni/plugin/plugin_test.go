package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/cni/protocol"
)

// fakeAgent answers on a real unix socket and records what it got.
type fakeAgent struct {
	mu   sync.Mutex
	reqs []protocol.Request
	resp protocol.Response
}

func (a *fakeAgent) Handle(_ context.Context, r protocol.Request) protocol.Response {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reqs = append(a.reqs, r)
	return a.resp
}

func (a *fakeAgent) requests() []protocol.Request {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]protocol.Request(nil), a.reqs...)
}

// shortDir returns a temporary directory with a path short enough for a unix socket.
func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "cni")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func startAgent(t *testing.T, sock string, a *fakeAgent) {
	t.Helper()
	l, err := protocol.Listen(sock)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- protocol.Serve(ctx, l, a) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
}

const result100 = `{"cniVersion":"1.0.0","interfaces":[{"name":"apx0","mac":"0a:58:01:00:00:01"},{"name":"eth0","mac":"0a:58:02:00:00:01","sandbox":"/var/run/netns/p1"}],` +
	`"ips":[{"interface":1,"address":"10.10.0.2/24","gateway":"10.10.0.1"}],"routes":[{"dst":"0.0.0.0/0","gw":"10.10.0.1"}]}`

type outcome struct {
	env    map[string]string
	stdin  string
	code   int
	stdout string
}

func invoke(t *testing.T, env map[string]string, stdin string) outcome {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Run(context.Background(), Env{Getenv: func(k string) string { return env[k] }, Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errOut})
	return outcome{env: env, stdin: stdin, code: code, stdout: out.String()}
}

func (r outcome) cniError(t *testing.T) protocol.Error {
	t.Helper()
	require.Equal(t, 1, r.code, "stdout: %s", r.stdout)
	var e protocol.Error
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &e), r.stdout)
	return e
}

func baseEnv(cmd string) map[string]string {
	return map[string]string{"CNI_COMMAND": cmd, "CNI_CONTAINERID": "abc123", "CNI_NETNS": "/var/run/netns/p1",
		"CNI_IFNAME": "eth0", "CNI_PATH": "/opt/cni/bin", "CNI_ARGS": "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=web"}
}

func config(version, sock, spool string) string {
	return fmt.Sprintf(`{"cniVersion":%q,"name":"antrea","type":"antrea-cni","socketPath":%q,"delSpoolDir":%q}`, version, sock, spool)
}

func TestVersion(t *testing.T) {
	r := invoke(t, map[string]string{"CNI_COMMAND": "VERSION"}, "")
	require.Equal(t, 0, r.code)
	require.JSONEq(t, `{"cniVersion":"1.1.0","supportedVersions":["0.3.0","0.3.1","0.4.0","1.0.0","1.1.0"]}`, r.stdout)
}

func TestAddForwardsAndConvertsResult(t *testing.T) {
	dir := shortDir(t)
	sock := filepath.Join(dir, "cni.sock")
	agent := &fakeAgent{resp: protocol.Response{Result: json.RawMessage(result100)}}
	startAgent(t, sock, agent)

	conf := config("1.0.0", sock, filepath.Join(dir, "spool"))
	r := invoke(t, baseEnv("ADD"), conf)
	require.Equal(t, 0, r.code, r.stdout)
	require.JSONEq(t, result100, r.stdout)
	got := agent.requests()
	require.Len(t, got, 1)
	require.Equal(t, protocol.Request{Command: "ADD", ContainerID: "abc123", Netns: "/var/run/netns/p1", IfName: "eth0",
		Args: "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=web", Path: "/opt/cni/bin", Config: json.RawMessage(conf)}, got[0])

	r = invoke(t, baseEnv("ADD"), config("0.4.0", sock, filepath.Join(dir, "spool")))
	require.Equal(t, 0, r.code, r.stdout)
	require.JSONEq(t, `{"cniVersion":"0.4.0","interfaces":[{"name":"apx0","mac":"0a:58:01:00:00:01"},{"name":"eth0","mac":"0a:58:02:00:00:01","sandbox":"/var/run/netns/p1"}],`+
		`"ips":[{"version":"4","interface":1,"address":"10.10.0.2/24","gateway":"10.10.0.1"}],"routes":[{"dst":"0.0.0.0/0","gw":"10.10.0.1"}],"dns":{}}`, r.stdout)
}

func TestAgentErrorIsPrinted(t *testing.T) {
	dir := shortDir(t)
	sock := filepath.Join(dir, "cni.sock")
	startAgent(t, sock, &fakeAgent{resp: protocol.Response{Error: protocol.NewError(100, "no free address", "10.10.0.0/30")}})
	r := invoke(t, baseEnv("ADD"), config("1.0.0", sock, ""))
	require.Equal(t, protocol.Error{Code: 100, Msg: "no free address", Details: "10.10.0.0/30"}, r.cniError(t))
}

func TestMalformedInputNeverReachesAgent(t *testing.T) {
	dir := shortDir(t)
	sock := filepath.Join(dir, "cni.sock")
	agent := &fakeAgent{resp: protocol.Response{Result: json.RawMessage(result100)}}
	startAgent(t, sock, agent)
	good := config("1.0.0", sock, filepath.Join(dir, "spool"))
	without := func(cmd, key string) map[string]string {
		e := baseEnv(cmd)
		delete(e, key)
		return e
	}
	with := func(cmd, key, val string) map[string]string {
		e := baseEnv(cmd)
		e[key] = val
		return e
	}
	for _, tc := range []struct {
		name  string
		env   map[string]string
		stdin string
		code  uint
	}{
		{"no CNI_COMMAND", without("ADD", "CNI_COMMAND"), good, protocol.ErrInvalidEnvironmentVariables},
		{"unknown CNI_COMMAND", baseEnv("FROB"), good, protocol.ErrInvalidEnvironmentVariables},
		{"ADD without CNI_NETNS", without("ADD", "CNI_NETNS"), good, protocol.ErrInvalidEnvironmentVariables},
		{"CHECK without CNI_NETNS", without("CHECK", "CNI_NETNS"), good, protocol.ErrInvalidEnvironmentVariables},
		{"DEL without CNI_CONTAINERID", without("DEL", "CNI_CONTAINERID"), good, protocol.ErrInvalidEnvironmentVariables},
		{"ADD without CNI_PATH", without("ADD", "CNI_PATH"), good, protocol.ErrInvalidEnvironmentVariables},
		{"invalid container ID", with("ADD", "CNI_CONTAINERID", "a b"), good, protocol.ErrInvalidEnvironmentVariables},
		{"invalid interface name", with("ADD", "CNI_IFNAME", "eth0/1"), good, protocol.ErrInvalidEnvironmentVariables},
		{"malformed CNI_ARGS", with("ADD", "CNI_ARGS", "K8S_POD_NAME"), good, protocol.ErrInvalidEnvironmentVariables},
		{"bad JSON", baseEnv("ADD"), `{"cniVersion":"1.0.0",`, protocol.ErrDecodingFailure},
		{"empty stdin", baseEnv("ADD"), ``, protocol.ErrDecodingFailure},
		{"no network name", baseEnv("ADD"), `{"cniVersion":"1.0.0","type":"antrea-cni"}`, protocol.ErrInvalidNetworkConfig},
		{"no cniVersion", baseEnv("ADD"), `{"name":"antrea","type":"antrea-cni"}`, protocol.ErrInvalidNetworkConfig},
		{"unknown version", baseEnv("ADD"), config("9.9.9", sock, ""), protocol.ErrIncompatibleCNIVersion},
		{"unparsable version", baseEnv("ADD"), config("one", sock, ""), protocol.ErrDecodingFailure},
		{"STATUS before 1.1.0", baseEnv("STATUS"), config("1.0.0", sock, ""), protocol.ErrIncompatibleCNIVersion},
		{"CHECK before 0.4.0", baseEnv("CHECK"), config("0.3.1", sock, ""), protocol.ErrIncompatibleCNIVersion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := invoke(t, tc.env, tc.stdin)
			e := r.cniError(t)
			require.Equal(t, tc.code, e.Code, "%s: %s", e.Msg, e.Details)
			require.NotEmpty(t, e.Msg)
		})
	}
	require.Empty(t, agent.requests())
	_, err := os.Stat(filepath.Join(dir, "spool"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestAgentUnreachable(t *testing.T) {
	dir := shortDir(t)
	sock := filepath.Join(dir, "missing.sock")
	spool := filepath.Join(dir, "spool")
	conf := config("1.1.0", sock, spool)

	require.Equal(t, protocol.ErrTryAgainLater, invoke(t, baseEnv("ADD"), conf).cniError(t).Code)
	require.Equal(t, protocol.ErrTryAgainLater, invoke(t, baseEnv("CHECK"), conf).cniError(t).Code)
	require.Equal(t, protocol.ErrPluginNotAvailable, invoke(t, baseEnv("STATUS"), conf).cniError(t).Code)
	_, err := os.Stat(spool)
	require.ErrorIs(t, err, os.ErrNotExist, "only DEL is spooled")

	r := invoke(t, baseEnv("DEL"), conf)
	require.Equal(t, 0, r.code, r.stdout)
	require.Empty(t, r.stdout)
	reqs, bad, err := protocol.ReadSpool(spool)
	require.NoError(t, err)
	require.Empty(t, bad)
	require.Len(t, reqs, 1)
	require.Equal(t, "abc123", reqs[0].Request.ContainerID)
	require.Equal(t, "eth0", reqs[0].Request.IfName)
	require.JSONEq(t, conf, string(reqs[0].Request.Config))

	// A repeated DEL overwrites the same spool entry.
	require.Equal(t, 0, invoke(t, baseEnv("DEL"), conf).code)
	reqs, _, err = protocol.ReadSpool(spool)
	require.NoError(t, err)
	require.Len(t, reqs, 1)

	// An unwritable spool makes the DEL fail rather than be lost.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "file"), nil, 0o600))
	r = invoke(t, baseEnv("DEL"), config("1.0.0", sock, filepath.Join(dir, "file", "spool")))
	require.Equal(t, protocol.ErrIOFailure, r.cniError(t).Code)
}

func TestStatusAndDelReachAgent(t *testing.T) {
	dir := shortDir(t)
	sock := filepath.Join(dir, "cni.sock")
	agent := &fakeAgent{}
	startAgent(t, sock, agent)
	conf := config("1.1.0", sock, filepath.Join(dir, "spool"))
	for _, cmd := range []string{"STATUS", "DEL", "CHECK", "GC"} {
		r := invoke(t, baseEnv(cmd), conf)
		require.Equal(t, 0, r.code, "%s: %s", cmd, r.stdout)
		require.Empty(t, r.stdout, cmd)
	}
	var cmds []string
	for _, r := range agent.requests() {
		cmds = append(cmds, r.Command)
	}
	require.Equal(t, []string{"STATUS", "DEL", "CHECK", "GC"}, cmds)
}
