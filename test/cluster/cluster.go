//go:build cluster

package cluster

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// Cluster is a running real cluster.
type Cluster struct {
	CP    *framework.ControlPlane
	Nodes []*Node
	// Root is the repository; Dir holds the nodes' directories and the kubeconfig.
	Root, Dir string
	// Kubeconfig is the admin kubeconfig, with the underlay address of kube-apiserver.
	Kubeconfig string
	// APIServer is kube-apiserver's underlay URL, which the chart is told to use
	// (kubeAPIServerOverride): no kube-proxy runs, so the kubernetes Service's ClusterIP works only
	// once antrea-agent has programmed it.
	APIServer string
	// KubernetesIP is the ClusterIP of the kubernetes Service.
	KubernetesIP netip.Addr
	// Images maps an image's name (antrea-agent, pause, ...) to its reference.
	Images map[string]string

	scheduler *exec.Cmd
}

// Start brings up a cluster of n nodes: the underlay, the control plane (kube-apiserver
// advertising the underlay address, kube-controller-manager with the workload controllers,
// kube-scheduler), the cluster DNS objects (dns.go) and the nodes, and waits until every Node is
// registered. It needs the images of hack/images.sh. Everything is removed when the test ends,
// also when it fails.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	return StartWith(t, Options{Nodes: n})
}

// Options shape a cluster beyond Start's defaults.
type Options struct {
	// Nodes is the node count.
	Nodes int
	// DefaultControllers runs kube-controller-manager with its default controllers (the upstream
	// e2e suite expects them: endpoints, job, ttl, ...) instead of the workload set Start picks.
	DefaultControllers bool
}

// StartWith is Start with Options.
func StartWith(t testing.TB, o Options) *Cluster {
	t.Helper()
	n := o.Nodes
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Root: root, Dir: filepath.Join(root, "_output", "cluster"), Images: map[string]string{}}
	tarballs := c.loadImages(t)
	cleanupAll(t, root)
	t.Cleanup(func() { c.stop(t) })
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := createUnderlay(); err != nil {
		t.Fatal(err)
	}
	cp := framework.StartControlPlane(t, framework.ControlPlaneOptions{
		ExtraServingIPs: []net.IP{net.IP(hostIP.AsSlice())},
		ExtraAPIServerArgs: []string{
			"--bind-address=0.0.0.0",
			"--advertise-address=" + hostIP.String(),
			"--endpoint-reconciler-type=lease",
			// kubectl exec/logs: kube-apiserver dials the kubelets on their underlay address.
			"--kubelet-preferred-address-types=InternalIP",
		},
		ExtraControllerManagerArgs: []string{"--controllers=" + controllers(o.DefaultControllers)},
	})
	c.CP = cp
	port := cp.APIServerURL[strings.LastIndex(cp.APIServerURL, ":")+1:]
	underlayURL := "https://" + net.JoinHostPort(hostIP.String(), port)
	c.Kubeconfig = filepath.Join(c.Dir, "kubeconfig")
	if err := c.writeKubeconfig(c.Kubeconfig, underlayURL, "kubernetes-admin", "system:masters"); err != nil {
		t.Fatal(err)
	}
	c.startScheduler(t)
	c.APIServer, c.KubernetesIP = underlayURL, c.kubernetesClusterIP(t)
	c.installDNS(t)
	for i := 0; i < n; i++ {
		node := &Node{Name: fmt.Sprintf("%snode%d", namePrefix, i+1), IP: nodeIP(i)}
		node.Dir = filepath.Join(c.Dir, node.Name)
		if err := createNodeNetNS(node.Name, node.IP); err != nil {
			t.Fatal(err)
		}
		cfg := nodeConfig{apiServer: underlayURL, caFile: cp.CAFile, pauseImage: c.Images["pause"], dnsIP: dnsServiceIP(c.KubernetesIP)}
		if err := node.writeFiles(cfg, func(path string) error {
			return c.writeKubeconfig(path, underlayURL, "system:node:"+node.Name, "system:nodes")
		}); err != nil {
			t.Fatal(err)
		}
		if err := node.start(filepath.Join(root, "hack", "cluster-node.sh"), filepath.Join(cp.BinDir, "kubelet"), tarballs); err != nil {
			t.Fatal(err)
		}
		c.Nodes = append(c.Nodes, node)
	}
	framework.WaitFor(t, 3*time.Minute, fmt.Sprintf("%d Nodes to register", n), func(ctx context.Context) (bool, string, error) {
		nodes, err := cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		for _, nd := range c.Nodes {
			select {
			case <-nd.exited:
				return false, "", fmt.Errorf("node %s exited; see %s/node.log and kubelet/containerd logs there", nd.Name, nd.Dir)
			default:
			}
		}
		return len(nodes.Items) == n, fmt.Sprintf("%d registered", len(nodes.Items)), nil
	})
	return c
}

// controllers is kube-controller-manager's --controllers: its defaults ("*"), or the workload
// controllers the project's own suites need.
func controllers(defaults bool) string {
	if defaults {
		return "*"
	}
	return strings.Join([]string{
		"endpointslice-controller", "serviceaccount-controller", "serviceaccount-token-controller",
		"namespace-controller", "garbage-collector-controller", "node-ipam-controller",
		"root-ca-certificate-publisher-controller", "clusterrole-aggregation-controller",
		"deployment-controller", "replicaset-controller", "daemonset-controller",
		"node-lifecycle-controller",
	}, ",")
}

// loadImages reads the image references and tarballs from hack/images.sh --list.
func (c *Cluster) loadImages(t testing.TB) []string {
	out, err := exec.Command("bash", filepath.Join(c.Root, "hack", "images.sh"), "--list").Output()
	if err != nil {
		t.Fatalf("hack/images.sh --list: %v", err)
	}
	var tarballs []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		name := f[0][strings.LastIndex(f[0], "/")+1 : strings.LastIndex(f[0], ":")]
		c.Images[name] = f[0]
		tar := filepath.Join(c.Root, f[1])
		if _, err := os.Stat(tar); err != nil {
			t.Fatalf("image %s: %v: run `make images` first", f[0], err)
		}
		tarballs = append(tarballs, tar)
	}
	return tarballs
}

func (c *Cluster) writeKubeconfig(path, server, user string, groups ...string) error {
	kp, err := c.CP.CA.IssueClient(user, groups)
	if err != nil {
		return err
	}
	return framework.WriteKubeconfig(path, server, c.CP.CA.CertPEM, kp)
}

func (c *Cluster) kubernetesClusterIP(t testing.TB) netip.Addr {
	var ip netip.Addr
	framework.WaitFor(t, time.Minute, "the kubernetes Service", func(ctx context.Context) (bool, string, error) {
		svc, err := c.CP.Client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		ip, err = netip.ParseAddr(svc.Spec.ClusterIP)
		return err == nil, "", nil
	})
	return ip
}

// startScheduler runs kube-scheduler on the host, as system:kube-scheduler.
func (c *Cluster) startScheduler(t testing.TB) {
	kc := filepath.Join(c.Dir, "scheduler.kubeconfig")
	if err := c.writeKubeconfig(kc, c.CP.APIServerURL, "system:kube-scheduler"); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	logFile, err := os.Create(filepath.Join(c.CP.LogDir, "kube-scheduler.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(c.CP.BinDir, "kube-scheduler"), "--kubeconfig="+kc,
		"--authentication-kubeconfig="+kc, "--authorization-kubeconfig="+kc,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(port), "--leader-elect=false", "--v=2")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c.scheduler = cmd
}

// stop ends the nodes and the scheduler, then removes everything the cluster made (the control
// plane stops through its own cleanup).
func (c *Cluster) stop(t testing.TB) {
	if t.Failed() {
		for _, n := range c.Nodes {
			for _, f := range []string{"node.log", "containerd.log"} {
				b, _ := os.ReadFile(filepath.Join(n.Dir, f))
				t.Logf("---- %s %s (tail) ----\n%s", n.Name, f, tail(b, 30))
			}
		}
		c.saveLogs(t)
	}
	for _, n := range c.Nodes {
		n.stop()
	}
	if c.scheduler != nil {
		_ = c.scheduler.Process.Kill()
		_ = c.scheduler.Wait()
	}
	cleanupAll(t, c.Root)
}

// saveLogs copies the node logs into the control plane's log directory, which outlives the test.
func (c *Cluster) saveLogs(t testing.TB) {
	for _, n := range c.Nodes {
		for _, f := range []string{"node.log", "containerd.log"} {
			if b, err := os.ReadFile(filepath.Join(n.Dir, f)); err == nil {
				_ = os.WriteFile(filepath.Join(c.CP.LogDir, n.Name+"-"+f), b, 0o644)
			}
		}
		pods, _ := filepath.Glob(filepath.Join(n.Dir, "fs", "var", "log", "pods", "*", "*", "*.log"))
		for _, p := range pods {
			if b, err := os.ReadFile(p); err == nil {
				rel := strings.ReplaceAll(strings.TrimPrefix(p, filepath.Join(n.Dir, "fs", "var", "log", "pods")+"/"), "/", "_")
				_ = os.WriteFile(filepath.Join(c.CP.LogDir, n.Name+"-pod-"+rel), b, 0o644)
			}
		}
	}
	t.Logf("node and Pod logs saved in %s", c.CP.LogDir)
}

func tail(b []byte, n int) string {
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// cleanupAll removes every node, namespace and link of a cluster, including one left by a
// killed run (hack/cluster.sh cleanup).
func cleanupAll(t testing.TB, root string) {
	out, err := exec.Command("bash", filepath.Join(root, "hack", "cluster.sh"), "cleanup").CombinedOutput()
	if err != nil {
		t.Errorf("hack/cluster.sh cleanup: %v: %s", err, out)
	}
}

// NodeOf returns the Node of a Pod.
func (c *Cluster) NodeOf(pod *corev1.Pod) *Node {
	for _, n := range c.Nodes {
		if n.Name == pod.Spec.NodeName {
			return n
		}
	}
	return nil
}
