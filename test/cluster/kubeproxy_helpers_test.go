//go:build cluster

package cluster

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// This file runs kube-proxy on the cluster's nodes for the migration test (migration_test.go):
// kube-proxy built from the pinned module (hack/build-control-plane.sh), in nftables mode, one
// process per node in the node's network namespace, like the kubelet (a kubeadm cluster runs it
// as a DaemonSet of hostNetwork Pods: the same namespace, the same rules).

// kubeProxyUser is kube-proxy's identity; the bootstrap ClusterRoleBinding system:node-proxier
// grants it what kube-proxy needs.
const kubeProxyUser = "system:kube-proxy"

// kubeProxyChains are the iptables chains kube-proxy creates in any mode (nftables mode keeps a
// few for the iptables-based components of older nodes); none may remain after the clean-up.
var kubeProxyChains = []string{"KUBE-SERVICES", "KUBE-NODEPORTS", "KUBE-POSTROUTING", "KUBE-MARK-MASQ",
	"KUBE-FORWARD", "KUBE-PROXY-CANARY", "KUBE-PROXY-FIREWALL", "KUBE-EXTERNAL-SERVICES", "KUBE-SVC-", "KUBE-SEP-", "KUBE-EXT-"}

// kubeProxy is kube-proxy running on one node.
type kubeProxy struct {
	node   *Node
	cmd    *exec.Cmd
	exited chan struct{}
}

// kubeProxyConfig is the node's KubeProxyConfiguration: nftables mode and kube-proxy's defaults
// (healthz 0.0.0.0:10256, metrics 127.0.0.1:10249, as a cluster has them), except the conntrack
// limits, left to the kernel: nf_conntrack_max and its hash size are global to the machine.
func (c *Cluster) kubeProxyConfig(n *Node, kubeconfig string) ([]byte, error) {
	zero := "0s"
	return json.MarshalIndent(map[string]any{
		"apiVersion":       "kubeproxy.config.k8s.io/v1alpha1",
		"kind":             "KubeProxyConfiguration",
		"mode":             "nftables",
		"hostnameOverride": n.Name,
		"clusterCIDR":      strings.Join(c.CP.ClusterCIDRs(), ","),
		"clientConnection": map[string]any{"kubeconfig": kubeconfig},
		"oomScoreAdj":      0,
		"conntrack": map[string]any{
			"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": zero, "tcpCloseWaitTimeout": zero,
		},
	}, "", "  ")
}

// startKubeProxy runs kube-proxy in the node's network namespace; its log is kube-proxy.log in
// the node's directory.
func (c *Cluster) startKubeProxy(n *Node) (*kubeProxy, error) {
	kc := filepath.Join(n.Dir, "kube-proxy.kubeconfig")
	if err := c.writeKubeconfig(kc, c.APIServer, kubeProxyUser); err != nil {
		return nil, err
	}
	b, err := c.kubeProxyConfig(n, kc)
	if err != nil {
		return nil, err
	}
	conf := filepath.Join(n.Dir, "kube-proxy.conf")
	if err := os.WriteFile(conf, b, 0o644); err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(filepath.Join(n.Dir, "kube-proxy.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	kp := &kubeProxy{node: n, exited: make(chan struct{})}
	kp.cmd = exec.Command("ip", "netns", "exec", n.Name, filepath.Join(c.CP.BinDir, "kube-proxy"), "--config", conf, "--v=2")
	kp.cmd.Stdout, kp.cmd.Stderr = logFile, logFile
	kp.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := kp.cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("kube-proxy on %s: %w", n.Name, err)
	}
	go func() {
		_ = kp.cmd.Wait()
		_ = logFile.Close()
		close(kp.exited)
	}()
	return kp, nil
}

// stop sends SIGTERM, as the kubelet does when its DaemonSet Pod is deleted, and waits (SIGKILL
// after 30 s, the default grace period).
func (kp *kubeProxy) stop() {
	_ = syscall.Kill(-kp.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-kp.exited:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-kp.cmd.Process.Pid, syscall.SIGKILL)
		<-kp.exited
	}
}

// kubeProxyCleanup runs `kube-proxy --cleanup` in the node's namespace: it removes the rules of
// every mode (nftables tables, iptables chains, IPVS) and exits.
func (c *Cluster) kubeProxyCleanup(n *Node) (string, error) {
	return runOut("ip", "netns", "exec", n.Name, filepath.Join(c.CP.BinDir, "kube-proxy"), "--cleanup", "--v=2")
}

// kubeProxyLeftovers lists what of kube-proxy is in the node's namespace: its nftables tables
// and its iptables chains (iptables-save of every table, IPv4 and IPv6).
func kubeProxyLeftovers(n *Node) ([]string, error) {
	var left []string
	out, err := runOut("ip", "netns", "exec", n.Name, "nft", "list", "tables")
	if err != nil {
		return nil, err
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "kube-proxy") {
			left = append(left, "nft: "+strings.TrimSpace(l))
		}
	}
	for _, save := range []string{"iptables-save", "ip6tables-save"} {
		out, err := runOut("ip", "netns", "exec", n.Name, save)
		if err != nil {
			return nil, err
		}
		for _, l := range strings.Split(out, "\n") {
			for _, ch := range kubeProxyChains {
				if strings.HasPrefix(l, ":"+ch) || strings.HasPrefix(l, "-A "+ch) {
					left = append(left, save+": "+l)
					break
				}
			}
		}
	}
	return left, nil
}
