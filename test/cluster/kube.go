//go:build cluster

package cluster

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// Namespace is where the chart is installed.
const Namespace = "kube-system"

// Kubectl runs _output/bin/kubectl with the admin kubeconfig and returns its combined output.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.Root, "_output", "bin", "kubectl"), append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// Exec runs a command in a container with `kubectl exec`, bounded to 30 s.
func (c *Cluster) Exec(namespace, pod, container string, cmd ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := []string{"-n", namespace, "exec", pod}
	if container != "" {
		args = append(args, "-c", container)
	}
	return c.Kubectl(ctx, append(append(args, "--"), cmd...)...)
}

// Helm runs _output/bin/helm on the cluster.
func (c *Cluster) Helm(t testing.TB, args ...string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(c.Root, "_output", "bin", "helm"), append(args, "--kubeconfig", c.Kubeconfig)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("helm %s:\n%s", strings.Join(args, " "), tail(out, 8))
}

// LBPool is the cluster's LoadBalancer address pool (VIP mode), which InstallArgs gives
// antrea-controller: the chart's values do not have to ship one.
var LBPool = netip.MustParsePrefix("192.168.240.0/28")

// InstallArgs are the only values the cluster overrides: the local image references, the
// userspace datapath, the LoadBalancer pool LBPool, and what replacing kube-proxy takes (no
// kube-proxy runs on the nodes): proxyAll, and the apiserver's own address for the agents and the
// controller.
func (c *Cluster) InstallArgs() []string { return c.InstallArgsWithPool(LBPool, "VIP") }

// InstallArgsWithPool is InstallArgs with pool, of ipMode "VIP" or "Proxy", as the only
// LoadBalancer pool.
func (c *Cluster) InstallArgsWithPool(pool netip.Prefix, ipMode string) []string {
	repo := func(name string) string { return c.Images[name][:strings.LastIndex(c.Images[name], ":")] }
	return []string{
		"--set", "image.agent.repository=" + repo("antrea-agent"),
		"--set", "image.controller.repository=" + repo("antrea-controller"),
		"--set", "ovs.datapathType=netdev",
		"--set", "antreaProxy.proxyAll=true",
		"--set", "kubeAPIServerOverride=" + c.APIServer,
		"--set-json", poolValue(pool, ipMode),
	}
}

// poolValue is the chart's lbPools with one pool, named cluster. A Proxy pool states that its
// proxy (ProxyLB) enforces loadBalancerSourceRanges, as it does.
func poolValue(pool netip.Prefix, ipMode string) string {
	enforces := ""
	if ipMode == "Proxy" {
		enforces = `,"proxyEnforcesSourceRanges":true`
	}
	return fmt.Sprintf(`lbPools=[{"name":"cluster","cidrs":[%q],"ipMode":%q%s}]`, pool, ipMode, enforces)
}

// ChartPath is the chart in the repository.
func (c *Cluster) ChartPath() string { return filepath.Join(c.Root, "build", "charts", "antrea-proxy") }

// WaitAgentsRolled waits until every agent Pod runs the DaemonSet's current template and is ready.
func (c *Cluster) WaitAgentsRolled(t testing.TB, timeout time.Duration) {
	t.Helper()
	framework.WaitFor(t, timeout, "the antrea-agent DaemonSet to be rolled out and ready", func(ctx context.Context) (bool, string, error) {
		ds, err := c.CP.Client.AppsV1().DaemonSets(Namespace).Get(ctx, "antrea-agent", metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		st := ds.Status
		n := int32(len(c.Nodes))
		done := st.ObservedGeneration == ds.Generation && st.UpdatedNumberScheduled == n && st.NumberReady == n && st.NumberAvailable == n && st.DesiredNumberScheduled == n
		return done, fmt.Sprintf("%+v; pods: %s", st, c.podSummary(ctx, "app.kubernetes.io/component=antrea-agent")), nil
	})
}

// WaitDeploymentAvailable waits for every replica of a Deployment to be updated and available.
func (c *Cluster) WaitDeploymentAvailable(t testing.TB, namespace, name string, timeout time.Duration) *appsv1.Deployment {
	t.Helper()
	var d *appsv1.Deployment
	framework.WaitFor(t, timeout, "Deployment "+namespace+"/"+name+" to be available", func(ctx context.Context) (bool, string, error) {
		var err error
		d, err = c.CP.Client.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		st := d.Status
		want := *d.Spec.Replicas
		done := st.ObservedGeneration == d.Generation && st.UpdatedReplicas == want && st.AvailableReplicas == want && st.Replicas == want
		return done, fmt.Sprintf("%+v; pods: %s", st, c.podSummary(ctx, labelsOf(d.Spec.Selector))), nil
	})
	return d
}

func labelsOf(sel *metav1.LabelSelector) string {
	var parts []string
	for k, v := range sel.MatchLabels {
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, ",")
}

// podSummary describes the Pods matching a selector in every namespace, for wait messages.
func (c *Cluster) podSummary(ctx context.Context, selector string) string {
	pods, err := c.CP.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "[%s %s %s", p.Name, p.Spec.NodeName, p.Status.Phase)
		for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			st := "running"
			switch {
			case cs.State.Waiting != nil:
				st = "waiting:" + cs.State.Waiting.Reason + ":" + cs.State.Waiting.Message
			case cs.State.Terminated != nil:
				st = fmt.Sprintf("terminated:%s:%d", cs.State.Terminated.Reason, cs.State.Terminated.ExitCode)
			}
			fmt.Fprintf(&b, " %s=%s/ready=%v/restarts=%d", cs.Name, st, cs.Ready, cs.RestartCount)
		}
		b.WriteString("] ")
	}
	return b.String()
}

// AgentPod returns the running agent Pod of a node.
func (c *Cluster) AgentPod(t testing.TB, node string) *corev1.Pod {
	t.Helper()
	pods, err := c.CP.Client.CoreV1().Pods(Namespace).List(context.Background(), metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/component=antrea-agent", FieldSelector: "spec.nodeName=" + node,
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range pods.Items {
		if p := &pods.Items[i]; p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			return p
		}
	}
	t.Fatalf("no running antrea-agent Pod on node %s", node)
	return nil
}

// Stream is a long-running `kubectl exec` whose output lines arrive on Lines, each with the time
// it arrived.
type Stream struct {
	cmd   *exec.Cmd
	Lines chan StreamLine
	Done  chan error
}

// StreamLine is one output line of a Stream.
type StreamLine struct {
	Text string
	At   time.Time
}

// StartStream starts `kubectl exec` of cmd in a Pod; it is killed when the test ends.
func (c *Cluster) StartStream(t testing.TB, namespace, pod string, cmd ...string) *Stream {
	t.Helper()
	args := append([]string{"--kubeconfig", c.Kubeconfig, "-n", namespace, "exec", pod, "--"}, cmd...)
	s := &Stream{cmd: exec.Command(filepath.Join(c.Root, "_output", "bin", "kubectl"), args...), Lines: make(chan StreamLine, 4096), Done: make(chan error, 1)}
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s.cmd.Stderr = os.Stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.cmd.Process.Kill() })
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			s.Lines <- StreamLine{Text: sc.Text(), At: time.Now()}
		}
		_, _ = io.Copy(io.Discard, out)
		s.Done <- s.cmd.Wait()
		close(s.Lines)
	}()
	return s
}
