package apiserver

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver/apiservertest"
)

func writeToken(t *testing.T, mode os.FileMode, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(p, []byte(content), mode))
	require.NoError(t, os.Chmod(p, mode))
	return p
}

func TestTCPListenerNeedsBearerToken(t *testing.T) {
	cfg := testConfig(t, filepath.Join(t.TempDir(), "a.sock"))
	cfg.APITCPAddress = "127.0.0.1:0"
	cfg.APITokenFile = writeToken(t, 0o600, "s3cret-token\n")
	s := start(t, Options{Config: cfg, Services: apiservertest.AllDecisions()})
	require.NotNil(t, s.TCPAddr())
	base := "http://" + s.TCPAddr().String()
	c := &http.Client{Timeout: 5 * time.Second}

	for _, auth := range []string{"", "Bearer wrong", "Basic czNjcmV0LXRva2Vu", "Bearer", "Bearer s3cret-token-longer"} {
		code, body, ctype := get(t, c, base+"/v1/servicemap", "Authorization", auth)
		requireJSONError(t, code, body, ctype, http.StatusUnauthorized, "Bearer <token>")
	}
	code, body, _ := get(t, c, base+"/v1/servicemap?all=true", "Authorization", "Bearer s3cret-token")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `"name": "web"`)
	// Health checks need no token; unknown paths are still JSON 404s behind the token.
	code, body, _ = get(t, c, base+"/healthz")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ok", body)
	code, body, _ = get(t, c, base+"/livez")
	require.Equal(t, http.StatusOK, code, "no Livez handler: /livez is a static ok")
	require.Equal(t, "ok", body)
	code, body, ctype := get(t, c, base+"/nope", "Authorization", "Bearer s3cret-token")
	requireJSONError(t, code, body, ctype, http.StatusNotFound, "not found")
}

// TestLivezServesTheGivenHandlerWithoutToken: the kubelet's liveness probe reaches the
// proxier's /livez (Options.Livez) on the TCP listener without a token.
func TestLivezServesTheGivenHandlerWithoutToken(t *testing.T) {
	cfg := testConfig(t, filepath.Join(t.TempDir(), "a.sock"))
	cfg.APITCPAddress = "127.0.0.1:0"
	cfg.APITokenFile = writeToken(t, 0o600, "s3cret-token\n")
	livez := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"ovsDisconnectedFor":"90s"}`))
	})
	s := start(t, Options{Config: cfg, Livez: livez})
	c := &http.Client{Timeout: 5 * time.Second}
	code, body, _ := get(t, c, "http://"+s.TCPAddr().String()+"/livez")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, body, "ovsDisconnectedFor")
	code, _, _ = get(t, c, "http://"+s.TCPAddr().String()+"/healthz")
	require.Equal(t, http.StatusOK, code, "/healthz stays the static readiness answer")
}

func TestTCPListenerRefusedWhenUnsafe(t *testing.T) {
	for _, tc := range []struct {
		name, addr, tokenMode, token, want string
	}{
		{"world-readable token", "127.0.0.1:0", "0644", "tok", "must not be accessible to group or others"},
		{"group-readable token", "127.0.0.1:0", "0640", "tok", "must not be accessible to group or others"},
		{"empty token", "127.0.0.1:0", "0600", " \n", "is empty"},
		{"missing token file", "127.0.0.1:0", "", "", "no such file"},
		{"not loopback", "0.0.0.0:0", "0600", "tok", "must be a loopback IP address"},
		{"host name", "localhost:0", "0600", "tok", "must be a loopback IP address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sock := filepath.Join(t.TempDir(), "a.sock")
			cfg := testConfig(t, sock)
			cfg.APITCPAddress = tc.addr
			cfg.APITokenFile = filepath.Join(t.TempDir(), "missing")
			if tc.tokenMode != "" {
				var mode os.FileMode
				_, err := fmt.Sscanf(tc.tokenMode, "%o", &mode)
				require.NoError(t, err)
				cfg.APITokenFile = writeToken(t, mode, tc.token)
			}
			_, err := Start(context.Background(), Options{Config: cfg})
			require.ErrorContains(t, err, tc.want)
			_, statErr := os.Lstat(sock)
			require.True(t, os.IsNotExist(statErr), "no socket is left behind when start-up fails")
		})
	}
}

func TestTCPRefusesNonLoopbackPeer(t *testing.T) {
	h := requireLoopbackBearer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }), []byte("tok"))
	for _, remote := range []string{"192.168.1.5:4242", "[fd00::1]:4242", "garbage"} {
		rec := &recorder{header: http.Header{}}
		req, _ := http.NewRequest(http.MethodGet, "/v1/version", nil)
		req.RemoteAddr = remote
		req.Header.Set("Authorization", "Bearer tok")
		h.ServeHTTP(rec, req)
		require.Equal(t, http.StatusForbidden, rec.code, "remote %s", remote)
		require.Contains(t, rec.body.String(), "only serves loopback clients")
	}
}

type recorder struct {
	header http.Header
	code   int
	body   strings.Builder
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
func (r *recorder) WriteHeader(code int)        { r.code = code }

// helperEnv makes the test binary act as an unprivileged client (see TestMain).
const helperEnv = "APISERVER_TEST_CLIENT_SOCKET"

func TestMain(m *testing.M) {
	if sock := os.Getenv(helperEnv); sock != "" {
		os.Exit(runUnprivilegedClient(sock))
	}
	os.Exit(m.Run())
}

// runUnprivilegedClient requests /v1/version on sock and prints "uid=<uid> status=<code>
// body=<body>" or "uid=<uid> error=<dial error>".
func runUnprivilegedClient(sock string) int {
	c := unixClient(sock)
	resp, err := c.Get("http://agent/v1/version")
	if err != nil {
		fmt.Printf("uid=%d error=%v\n", os.Getuid(), err)
		return 0
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Printf("uid=%d status=%d body=%s\n", os.Getuid(), resp.StatusCode, strings.TrimSpace(string(body)))
	return 0
}

// TestNonRootRefused runs a client as uid 65534 (nobody): the 0600 socket refuses its connect,
// and when the socket's permissions are loosened the server still refuses it by SO_PEERCRED.
func TestNonRootRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a client as another user")
	}
	// The test binary and the socket must be reachable by nobody: use world-searchable dirs.
	shared, err := os.MkdirTemp("", "apisrv")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(shared) })
	require.NoError(t, os.Chmod(shared, 0o755))
	exe, err := os.Executable()
	require.NoError(t, err)
	bin := filepath.Join(shared, "client.test")
	data, err := os.ReadFile(exe)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bin, data, 0o755))
	sock := filepath.Join(shared, "agent.sock")
	start(t, Options{Config: testConfig(t, sock), Services: apiservertest.AllDecisions()})

	asNobody := func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin)
		cmd.Env = []string{helperEnv + "=" + sock}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "client output: %s", out)
		return strings.TrimSpace(string(out))
	}
	out := asNobody()
	require.True(t, strings.HasPrefix(out, "uid=65534 error="), out)
	require.Contains(t, out, "permission denied")

	// Loosened permissions: the connection is accepted, the request is not.
	require.NoError(t, os.Chmod(sock, 0o666))
	out = asNobody()
	require.True(t, strings.HasPrefix(out, "uid=65534 status=403 "), out)
	require.Contains(t, out, `"reason": "Forbidden"`)
	require.Contains(t, out, "restricted to root; the client runs as uid 65534")

	// Root is still served.
	code, body, _ := get(t, unixClient(sock), "http://agent/v1/version")
	require.Equal(t, http.StatusOK, code, body)
}

// TestPeerCredNotUnix: a connection that is not a unix socket carries no credentials and is
// refused.
func TestPeerCredNotUnix(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	ctx := withPeerCred(context.Background(), a)
	h := requireRootPeer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	rec := &recorder{header: http.Header{}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "/v1/version", nil)
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusForbidden, rec.code)
	require.Contains(t, rec.body.String(), "cannot read the client's credentials")
}
