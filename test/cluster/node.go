//go:build cluster

package cluster

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Node is one kubelet + containerd pair in its own network namespace (NetNS) and mount namespace,
// run by hack/cluster-node.sh.
type Node struct {
	// Name is the Kubernetes Node name, also the network namespace's and the cgroup's.
	Name string
	// IP is its InternalIP on the underlay.
	IP netip.Addr
	// Dir holds its configuration, logs and the per-node host paths (Dir/fs/<path>).
	Dir string

	cmd    *exec.Cmd
	exited chan struct{}
}

// nodeConfig is what writeNodeFiles needs to know.
type nodeConfig struct {
	apiServer  string // https://10.123.0.1:<port>
	caFile     string
	pauseImage string
	dnsIP      netip.Addr // the kube-dns ClusterIP, the Pods' nameserver
}

// containerdConfig is containerd 1.6's configuration for a node. restrict_oom_score_adj: the
// kubelet's -998 oom_score_adj is denied on this kind of machine and runc then fails.
const containerdConfig = `version = 2
root = "%[1]s/containerd/root"
state = "%[1]s/containerd/state"
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = "%[1]s/containerd.sock"
[ttrpc]
  address = "%[1]s/containerd.ttrpc.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "%[2]s"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/opt/cni/bin"
    conf_dir = "/etc/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
`

// kubeletConfig: failCgroupV1 because the machine has a cgroup v1 hierarchy; cgroupRoot keeps
// each node's Pods in its own cgroup subtree; the apiserver's kubelet client is anonymous here,
// so authorization is AlwaysAllow (the port is reachable only on the underlay); clusterDNS is
// the kube-dns ClusterIP (dns.go).
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /%[1]s
containerRuntimeEndpoint: unix://%[2]s/containerd.sock
address: %[3]s
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
oomScoreAdj: 0
failSwapOn: false
clusterDomain: cluster.local
clusterDNS:
- %[5]s
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
  x509:
    clientCAFile: %[4]s
authorization:
  mode: AlwaysAllow
evictionHard:
  memory.available: "50Mi"
  nodefs.available: "1%%"
  imagefs.available: "1%%"
  nodefs.inodesFree: "1%%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
`

func (n *Node) writeFiles(cfg nodeConfig, kubeconfig func(path string) error) error {
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		return err
	}
	files := map[string]string{
		"containerd.toml": fmt.Sprintf(containerdConfig, n.Dir, cfg.pauseImage),
		"kubelet.yaml":    fmt.Sprintf(kubeletConfig, n.Name, n.Dir, n.IP, cfg.caFile, cfg.dnsIP),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(n.Dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return kubeconfig(filepath.Join(n.Dir, "kubelet.kubeconfig"))
}

// start runs hack/cluster-node.sh in the node's namespaces; images are imported into containerd
// before the kubelet starts.
func (n *Node) start(script, kubelet string, images []string) error {
	logFile, err := os.OpenFile(filepath.Join(n.Dir, "node.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	args := append([]string{"--net=/run/netns/" + n.Name, "unshare", "--mount", "--propagation", "slave", "--",
		"bash", script, "run", n.Dir, n.Name}, images...)
	n.cmd = exec.Command("nsenter", args...)
	n.cmd.Env = append(os.Environ(), "NODE_NAME="+n.Name, "NODE_IP="+n.IP.String(), "KUBELET="+kubelet)
	n.cmd.Stdout, n.cmd.Stderr = logFile, logFile
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := n.cmd.Start(); err != nil {
		_ = logFile.Close()
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	n.exited = make(chan struct{})
	go func() {
		_ = n.cmd.Wait()
		_ = logFile.Close()
		close(n.exited)
	}()
	return nil
}

// stop ends the node script (which stops the kubelet and containerd); cleanup then kills what
// is left in the node's cgroups.
func (n *Node) stop() {
	if n.cmd == nil || n.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-n.exited:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
		<-n.exited
	}
}
