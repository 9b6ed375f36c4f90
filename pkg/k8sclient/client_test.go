package k8sclient

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
)

func TestBuildOverrideInCluster(t *testing.T) {
	dir := t.TempDir()
	token, ca := filepath.Join(dir, "token"), filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(token, []byte("t0ken"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ca, []byte("not read here"), 0o600); err != nil {
		t.Fatal(err)
	}
	// No KUBERNETES_SERVICE_HOST: the override alone tells where the apiserver is.
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	rc, err := Build(Options{APIServerOverride: "10.123.0.1:6443", TokenFile: token, CAFile: ca})
	if err != nil {
		t.Fatal(err)
	}
	if u, _, err := rest.DefaultServerUrlFor(rc); err != nil || u.String() != "https://10.123.0.1:6443" {
		t.Errorf("client-go reads host %q as %v, %v; want https://10.123.0.1:6443", rc.Host, u, err)
	}
	if rc.BearerTokenFile != token || rc.TLSClientConfig.CAFile != ca {
		t.Errorf("config = host %q token %q ca %q", rc.Host, rc.BearerTokenFile, rc.TLSClientConfig.CAFile)
	}
	if rc.QPS != QPS || rc.Burst != Burst {
		t.Errorf("rate limits %v/%v, want %v/%v", rc.QPS, rc.Burst, QPS, Burst)
	}
	if _, err := Build(Options{APIServerOverride: "10.123.0.1:6443", TokenFile: filepath.Join(dir, "none")}); err == nil {
		t.Error("no token file: want an error")
	}
}

func TestBuildOverrideKubeconfig(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	const cfg = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://10.96.0.1:443", insecure-skip-tls-verify: true}
users:
- name: u
  user: {token: abc}
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
`
	if err := os.WriteFile(kc, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	rc, err := Build(Options{Kubeconfig: kc, APIServerOverride: "https://192.0.2.10:6443"})
	if err != nil {
		t.Fatal(err)
	}
	if rc.Host != "https://192.0.2.10:6443" || rc.BearerToken != "abc" {
		t.Errorf("host %q token %q: want the override with the kubeconfig's credentials", rc.Host, rc.BearerToken)
	}
	rc, err = Build(Options{Kubeconfig: kc})
	if err != nil || rc.Host != "https://10.96.0.1:443" {
		t.Errorf("without override: host %q, %v", rc.Host, err)
	}
}
