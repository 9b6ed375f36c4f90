package framework

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func parseCert(t *testing.T, pemBytes []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(pemBytes)
	require.NotNil(t, block, "no PEM block in certificate")
	cert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	return cert
}

func TestCertAuthorityIssuesCertificatesThatVerify(t *testing.T) {
	ca, err := NewCertAuthority("test-ca")
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)

	serving, err := ca.IssueServing("kube-apiserver", []string{"kubernetes.default.svc"}, []net.IP{net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	sc := parseCert(t, serving.CertPEM)
	for _, host := range []string{"kubernetes.default.svc", "127.0.0.1"} {
		_, err := sc.Verify(x509.VerifyOptions{DNSName: host, Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		require.NoError(t, err, "serving certificate for %s", host)
	}
	_, err = sc.Verify(x509.VerifyOptions{DNSName: "example.invalid", Roots: pool})
	require.Error(t, err, "serving certificate must not be valid for a name it was not issued for")

	client, err := ca.IssueClient("alice", []string{"team-a", "system:masters"})
	require.NoError(t, err)
	cc := parseCert(t, client.CertPEM)
	require.Equal(t, "alice", cc.Subject.CommonName)
	require.Equal(t, []string{"team-a", "system:masters"}, cc.Subject.Organization)
	_, err = cc.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	require.NoError(t, err)

	other, err := NewCertAuthority("other-ca")
	require.NoError(t, err)
	otherPool := x509.NewCertPool()
	otherPool.AddCert(other.Cert)
	_, err = cc.Verify(x509.VerifyOptions{Roots: otherPool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	require.Error(t, err, "a certificate must not verify against another CA")
}

// TestKubeconfigAuthenticatesOverMutualTLS writes a kubeconfig, loads it like a component would and
// uses it against a server that requires a client certificate from the CA.
func TestKubeconfigAuthenticatesOverMutualTLS(t *testing.T) {
	ca, err := NewCertAuthority("test-ca")
	require.NoError(t, err)
	serving, err := ca.IssueServing("server", nil, []net.IP{net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	pair, err := tls.X509KeyPair(serving.CertPEM, serving.KeyPEM)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := r.TLS.PeerCertificates[0].Subject
		fmt.Fprintf(w, "%s %s", c.CommonName, strings.Join(c.Organization, ","))
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
	srv.StartTLS()
	defer srv.Close()

	client, err := ca.IssueClient("system:node:n1", []string{"system:nodes"})
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, WriteKubeconfig(path, srv.URL, ca.CertPEM, client))
	cfg, err := LoadRESTConfig(path)
	require.NoError(t, err)
	require.Equal(t, srv.URL, cfg.Host)

	tlsCfg := &tls.Config{RootCAs: x509.NewCertPool()}
	require.True(t, tlsCfg.RootCAs.AppendCertsFromPEM(cfg.CAData))
	cert, err := tls.X509KeyPair(cfg.CertData, cfg.KeyData)
	require.NoError(t, err)
	tlsCfg.Certificates = []tls.Certificate{cert}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}, Timeout: 5 * time.Second}
	resp, err := hc.Get(srv.URL)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, "system:node:n1 system:nodes", string(body))
}

func TestFirstIP(t *testing.T) {
	ip, err := firstIP("10.96.0.0/16")
	require.NoError(t, err)
	require.Equal(t, "10.96.0.1", ip.String())
	_, err = firstIP("not-a-cidr")
	require.Error(t, err)
}

func TestPollNamesWhatNeverHappened(t *testing.T) {
	calls := 0
	err := Poll(context.Background(), 300*time.Millisecond, "the widget to turn blue", func(context.Context) (bool, string, error) {
		calls++
		return false, "widget is red", nil
	})
	require.Error(t, err)
	require.Contains(t, err.Error(), "the widget to turn blue did not happen within 300ms")
	require.Contains(t, err.Error(), "widget is red")
	require.Greater(t, calls, 1, "Poll must retry")

	n := 0
	require.NoError(t, Poll(context.Background(), 5*time.Second, "third call", func(context.Context) (bool, string, error) {
		n++
		return n == 3, "", nil
	}))
	require.Equal(t, 3, n)

	boom := errors.New("boom")
	err = Poll(context.Background(), 5*time.Second, "anything", func(context.Context) (bool, string, error) { return false, "", boom })
	require.ErrorIs(t, err, boom)
}

// TestProcessStopKillsTheWholeGroup starts a shell that ignores SIGTERM and has a child: Stop must
// escalate to SIGKILL after the grace period and leave neither process behind.
func TestProcessStopKillsTheWholeGroup(t *testing.T) {
	dir := t.TempDir()
	childPidFile := filepath.Join(dir, "child.pid")
	p, err := startProcess("stubborn", filepath.Join(dir, "stubborn.log"), "/bin/sh", "-c",
		`trap "" TERM; sleep 300 & echo $! > `+childPidFile+`; wait`)
	require.NoError(t, err)
	p.Grace = 200 * time.Millisecond
	t.Cleanup(p.Stop)

	var child int
	WaitFor(t, 5*time.Second, "the stubborn shell to start its child", func(context.Context) (bool, string, error) {
		b, err := os.ReadFile(childPidFile)
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false, "", nil
		}
		child, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil, "", err
	})
	start := time.Now()
	p.Stop()
	require.Less(t, time.Since(start), 3*time.Second, "Stop must not wait much past the grace period")
	select {
	case <-p.Exited():
	default:
		t.Fatal("Stop returned before the process exited")
	}
	WaitFor(t, 5*time.Second, fmt.Sprintf("child process %d to be gone", child), func(context.Context) (bool, string, error) {
		err := syscall.Kill(child, 0)
		return errors.Is(err, syscall.ESRCH), fmt.Sprintf("kill -0 %d: %v", child, err), nil
	})
	p.Stop() // a second Stop is harmless
}

func TestProcessExitErrorRecognizesPortClash(t *testing.T) {
	dir := t.TempDir()
	p, err := startProcess("clash", filepath.Join(dir, "clash.log"), "/bin/sh", "-c",
		`echo "listen tcp 127.0.0.1:6443: bind: address already in use" >&2; exit 1`)
	require.NoError(t, err)
	<-p.Exited()
	require.ErrorIs(t, p.ExitError(), errPortInUse)
	p.Stop()

	p, err = startProcess("other", filepath.Join(dir, "other.log"), "/bin/sh", "-c", `echo "bad flag" >&2; exit 2`)
	require.NoError(t, err)
	<-p.Exited()
	require.NotErrorIs(t, p.ExitError(), errPortInUse)
	require.Contains(t, p.ExitError().Error(), "other exited")
	require.Contains(t, string(p.logTail(1024)), "bad flag")
	p.Stop()
}

func TestFreePortsAreDistinctAndBindable(t *testing.T) {
	ports, err := freePorts(3)
	require.NoError(t, err)
	seen := map[int]bool{}
	for _, port := range ports {
		require.False(t, seen[port], "port %d returned twice", port)
		seen[port] = true
		l, err := net.Listen("tcp", hostPort(port))
		require.NoError(t, err, "port %d should be free", port)
		require.NoError(t, l.Close())
	}
}

// TestMetricValue: a sample is found by its exact name, labelled or not, not by a longer name
// that starts with it nor in a comment.
func TestMetricValue(t *testing.T) {
	body := "# HELP go_cpu_classes_gc_total_cpu_seconds_total x\n" +
		"go_cpu_classes_gc_total_cpu_seconds_total_x 9\n" +
		"go_cpu_classes_gc_total_cpu_seconds_total 0.125\n" +
		"antrea_proxy_sync_proxy_rules_duration_seconds_bucket{le=\"0.001\"} 3\n"
	v, ok := MetricValue(body, "go_cpu_classes_gc_total_cpu_seconds_total")
	require.True(t, ok)
	require.Equal(t, 0.125, v)
	v, ok = MetricValue(body, "antrea_proxy_sync_proxy_rules_duration_seconds_bucket")
	require.True(t, ok)
	require.Equal(t, 3.0, v)
	_, ok = MetricValue(body, "go_goroutines")
	require.False(t, ok)
}
