package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/config"
	"github.com/antrea-proxy/antrea-proxy/pkg/loadbalancer"
)

func TestExampleConfigIsValid(t *testing.T) {
	cfg, err := config.LoadController("antrea-controller.conf")
	require.NoError(t, err)
	pools, err := loadbalancer.NewPools(cfg.IPPools)
	require.NoError(t, err)
	require.Len(t, pools, 2)
	require.Equal(t, "Proxy", string(pools[1].Mode))
}

func TestRunRejectsBadConfig(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.conf")
	require.NoError(t, os.WriteFile(bad, []byte("ipPools:\n- name: p\n  cidrs: [\"10.0.0.0/33\"]\n"), 0o600))
	err := run([]string{"--config", bad})
	require.EqualError(t, err, "loading antrea-controller config "+bad+`: ipPools[0].cidrs[0]: "10.0.0.0/33" is not a valid CIDR`)

	err = run([]string{"--config", filepath.Join(dir, "missing.conf")})
	require.ErrorContains(t, err, "reading antrea-controller config")

	require.Error(t, run([]string{"--no-such-flag"}))
	good := filepath.Join(dir, "good.conf")
	require.NoError(t, os.WriteFile(good, []byte("ipPools:\n- name: p\n  cidrs: [\"10.0.0.0/24\"]\n"), 0o600))
	require.EqualError(t, run([]string{"--config", good, "--bind-address", "localhost:1"}), `--bind-address "localhost:1" is not an IP:port`)
	require.EqualError(t, run([]string{"--config", bad, "extra"}), `unexpected arguments ["extra"]`)
}

func TestRunNeedsAKubeconfigOutsideACluster(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	good := filepath.Join(t.TempDir(), "good.conf")
	require.NoError(t, os.WriteFile(good, []byte("ipPools:\n- name: p\n  cidrs: [\"10.0.0.0/24\"]\n"), 0o600))
	require.ErrorContains(t, run([]string{"--config", good}), "no kubeconfig given and not running in a cluster")
	require.ErrorContains(t, run([]string{"--config", good, "--kubeconfig", "/nonexistent/kubeconfig"}), "loading kubeconfig /nonexistent/kubeconfig")
}

func TestCleanupFinalizersFlags(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	require.EqualError(t, run([]string{"cleanup-finalizers", "extra"}), `cleanup-finalizers: unexpected arguments ["extra"]`)
	require.EqualError(t, run([]string{"cleanup-finalizers", "--timeout", "0s"}), "cleanup-finalizers: --timeout must be > 0, got 0s")
	require.ErrorContains(t, run([]string{"cleanup-finalizers", "--kube-apiserver-override", "10.0.0.1:port"}), "kubeAPIServerOverride")
	require.ErrorContains(t, run([]string{"cleanup-finalizers"}), "no kubeconfig given and not running in a cluster")
}
