package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver/apiservertest"
	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver/apiv1"
	"github.com/antrea-proxy/antrea-proxy/pkg/config"
)

func testConfig(t *testing.T, socket string) *config.AgentConfig {
	t.Helper()
	cfg := &config.AgentConfig{}
	cfg.DefaultsFrom(config.Env{Getenv: func(string) string { return "node-a" }})
	cfg.APISocket = socket
	return cfg
}

func start(t *testing.T, opts Options) *Server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := Start(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { cancel(); s.Close() })
	return s
}

func unixClient(socket string) *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		}}}
}

// get fetches path and returns the status, the body and the Content-Type.
func get(t *testing.T, c *http.Client, url string, header ...string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body), resp.Header.Get("Content-Type")
}

// requireJSONError checks an error answer: JSON with the code, a reason and a message.
func requireJSONError(t *testing.T, code int, body, ctype string, wantCode int, wantMsg string) {
	t.Helper()
	require.Equal(t, wantCode, code, "body: %s", body)
	require.Equal(t, "application/json", ctype)
	var e apiv1.Error
	require.NoError(t, json.Unmarshal([]byte(body), &e), "body: %s", body)
	require.Equal(t, wantCode, e.Code)
	require.Equal(t, "Error", e.Kind)
	require.NotEmpty(t, e.Reason)
	require.Contains(t, e.Message, wantMsg)
}

func TestSocketPermissionsAndLifecycle(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run", "antrea")
	sock := filepath.Join(dir, "antrea-agent.sock")
	s := start(t, Options{Config: testConfig(t, sock), Services: apiservertest.AllDecisions()})
	require.Equal(t, sock, s.SocketPath())

	info, err := os.Lstat(sock)
	require.NoError(t, err)
	require.Equal(t, os.ModeSocket, info.Mode().Type())
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "socket mode")
	require.Equal(t, uint32(os.Geteuid()), info.Sys().(*syscall.Stat_t).Uid, "socket owner")
	dinfo, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o750), dinfo.Mode().Perm(), "created socket directory")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "the private bind directory is removed: %v", entries)

	code, body, ctype := get(t, unixClient(sock), "http://agent/healthz")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ok", body)
	require.True(t, strings.HasPrefix(ctype, "text/plain"))

	// A second agent must not steal the socket of a live one.
	_, err = Start(context.Background(), Options{Config: testConfig(t, sock)})
	require.ErrorContains(t, err, "another process is serving on it")

	s.Close()
	_, err = os.Lstat(sock)
	require.True(t, errors.Is(err, os.ErrNotExist), "socket removed on Close: %v", err)
}

func TestStaleSocketReplacedAndNonSocketKept(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "a.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	require.NoError(t, err)
	l.SetUnlinkOnClose(false)
	require.NoError(t, l.Close())
	require.NoError(t, os.Chmod(sock, 0o777))
	start(t, Options{Config: testConfig(t, sock)})
	info, err := os.Lstat(sock)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "the stale 0777 socket was replaced")

	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, []byte("keep me"), 0o644))
	_, err = Start(context.Background(), Options{Config: testConfig(t, file)})
	require.ErrorContains(t, err, "is not a socket")
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, "keep me", string(data))
}

func TestErrorsAreJSON(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "a.sock")
	start(t, Options{Config: testConfig(t, sock), Services: apiservertest.AllDecisions()})
	c := unixClient(sock)
	for _, tc := range []struct {
		path string
		code int
		msg  string
	}{
		{"/v2/servicemap", http.StatusNotFound, `path "/v2/servicemap" not found`},
		{"/v1/servicemaps", http.StatusNotFound, "not found"},
		{"/", http.StatusNotFound, "the agent API serves /v1/servicemap"},
		{"/v1/servicemap?all=maybe", http.StatusBadRequest, `all="maybe" must be true or false`},
		{"/v1/servicemap?all=true&namespace=prod", http.StatusBadRequest, "exclusive"},
		{"/v1/servicemap?all=true&name=web", http.StatusBadRequest, "across all namespaces"},
		{"/v1/servicemap?namespace=Bad_NS", http.StatusBadRequest, `namespace "Bad_NS" is invalid`},
		{"/v1/servicemap?namespace=default&name=nope", http.StatusNotFound, "Service default/nope is not programmed"},
		{"/v1/ovsflows?service=web", http.StatusBadRequest, `must be "namespace/name"`},
		{"/v1/ovsflows?names=no", http.StatusBadRequest, `query parameter names="no" must be true or false`},
		{"/v1/ovsflows?service=default/nope", http.StatusNotFound, "Service default/nope is not programmed"},
	} {
		code, body, ctype := get(t, c, "http://agent"+tc.path)
		requireJSONError(t, code, body, ctype, tc.code, tc.msg)
	}
	resp, err := c.Post("http://agent/v1/servicemap", "application/json", strings.NewReader("{}"))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	requireJSONError(t, resp.StatusCode, string(body), resp.Header.Get("Content-Type"), http.StatusMethodNotAllowed, "only GET")
}

func TestServiceMapFilters(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "a.sock")
	start(t, Options{Config: testConfig(t, sock), Services: apiservertest.AllDecisions()})
	c := unixClient(sock)
	names := func(q string) []string {
		code, body, _ := get(t, c, "http://agent/v1/servicemap"+q)
		require.Equal(t, http.StatusOK, code, body)
		var m apiv1.ServiceMap
		require.NoError(t, json.Unmarshal([]byte(body), &m))
		require.Equal(t, "ServiceMap", m.Kind)
		var out []string
		for _, it := range m.Items {
			out = append(out, it.Namespace+"/"+it.Name+":"+it.PortName+"/"+it.IPFamily)
		}
		return out
	}
	require.Equal(t, []string{"default/dual:/IPv4", "default/dual:/IPv6", "default/web:http/IPv4"}, names(""))
	require.Equal(t, []string{"prod/api:grpc/IPv4", "prod/api:metrics/IPv4"}, names("?namespace=prod"))
	require.Equal(t, []string{"default/web:http/IPv4"}, names("?name=web"))
	require.Len(t, names("?all=true"), 5)
	require.Empty(t, names("?namespace=empty"))
}

func TestProxyDisabled(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "a.sock")
	start(t, Options{Config: testConfig(t, sock)})
	c := unixClient(sock)
	for _, p := range []string{"/v1/servicemap", "/v1/ovsflows"} {
		code, body, ctype := get(t, c, "http://agent"+p)
		requireJSONError(t, code, body, ctype, http.StatusServiceUnavailable, "AntreaProxy is disabled")
	}
	code, body, _ := get(t, c, "http://agent/v1/agentinfo")
	require.Equal(t, http.StatusOK, code, body)
}

type fakeOVS struct {
	version   string
	connected bool
}

func (f fakeOVS) OVSVersion(context.Context) (string, error) { return f.version, nil }
func (f fakeOVS) Connected() bool                            { return f.connected }

func TestAgentInfoAndVersion(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "a.sock")
	cfg := testConfig(t, sock)
	off := false
	cfg.AntreaProxy.ProxyLoadBalancerIPs = &off
	cfg.AntreaProxy.NodePortAddresses = []string{"192.168.0.0/16"}
	src := apiservertest.AllDecisions()
	src.SyncErr = errors.New("bundle rejected")
	start(t, Options{Config: cfg, Services: src, OVS: fakeOVS{version: "3.1.0", connected: true}})
	c := unixClient(sock)
	code, body, _ := get(t, c, "http://agent/v1/agentinfo")
	require.Equal(t, http.StatusOK, code, body)
	var info apiv1.AgentInfo
	require.NoError(t, json.Unmarshal([]byte(body), &info))
	require.Equal(t, "node-a", info.NodeName)
	require.False(t, info.AntreaProxy.ProxyLoadBalancerIPs)
	require.True(t, info.AntreaProxy.Enabled)
	require.Equal(t, []string{"192.168.0.0/16"}, info.AntreaProxy.NodePortAddresses)
	require.Equal(t, apiv1.OVSStatus{Version: "3.1.0", Connected: true}, info.OVS)
	require.Equal(t, apiv1.SyncStatus{LastSync: "2026-11-29T12:00:00Z", LastError: "bundle rejected", Syncs: 7, Round: 1}, info.Sync)
	require.Equal(t, 3, info.Services)
	require.Equal(t, 5, info.ServicePorts)

	code, body, _ = get(t, c, "http://agent/v1/version")
	require.Equal(t, http.StatusOK, code, body)
	var v apiv1.Version
	require.NoError(t, json.Unmarshal([]byte(body), &v))
	require.Equal(t, "Version", v.Kind)
	require.NotEmpty(t, v.Version)
	require.True(t, strings.HasPrefix(v.GoVersion, "go"))
}
