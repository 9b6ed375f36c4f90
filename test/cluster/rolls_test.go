//go:build cluster

package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// extraRolls is CLUSTER_ROLLS, default 0: how many more times TestRealCluster restarts every
// agent Pod (antrea-ovs included) while the long-lived connection runs, to measure how often a
// roll breaks it.
func extraRolls(t *testing.T) int {
	v := os.Getenv("CLUSTER_ROLLS")
	if v == "" {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("CLUSTER_ROLLS=%q: want a number >= 0", v)
	}
	return n
}

// rollAgents restarts every agent Pod, as `kubectl rollout restart` does (a new template
// annotation), and waits until all are replaced and ready.
func rollAgents(t *testing.T, c *Cluster, i int) {
	t.Helper()
	before := agentUIDs(t, c)
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"antrea-proxy.io/test-roll":"%d-%d"}}}}}`, i, time.Now().UnixNano())
	if _, err := c.CP.Client.AppsV1().DaemonSets(Namespace).Patch(context.Background(), "antrea-agent",
		types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	c.WaitAgentsRolled(t, 5*time.Minute)
	checkAllReplaced(t, c, before)
}

// startCapture records, in every node's network namespace, the TCP packets of the echo
// Service's HTTP port (pod veths and the gateway), into the log directory that outlives the
// test: after a failure it shows which packet of the long-lived connection came first after
// ovs-vswitchd restarted.
func startCapture(t *testing.T, c *Cluster) {
	for _, n := range c.Nodes {
		f := filepath.Join(c.CP.LogDir, n.Name+"-keepalive.pcap")
		cmd := exec.Command("ip", "netns", "exec", n.Name, "tcpdump", "-i", "any", "-nn", "-U", "-s", "128", "-w", f,
			"tcp port "+strconv.Itoa(echoHTTPPort))
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Logf("tcpdump on %s: %v (no capture)", n.Name, err)
			continue
		}
		t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGINT); _ = cmd.Wait() })
	}
}

// dumpConntrack logs, for every node, OVS's conntrack entries and the node kernel's of the echo
// Service's HTTP port, and saves the OVS logs.
func dumpConntrack(t *testing.T, c *Cluster) {
	port := "=" + strconv.Itoa(echoHTTPPort)
	for _, n := range c.Nodes {
		pods, err := c.CP.Client.CoreV1().Pods(Namespace).List(context.Background(), metav1.ListOptions{
			LabelSelector: "app.kubernetes.io/component=antrea-agent", FieldSelector: "spec.nodeName=" + n.Name,
		})
		if err == nil {
			for _, p := range pods.Items {
				out, err := c.Exec(Namespace, p.Name, "antrea-ovs", "ovs-appctl", "dpctl/dump-conntrack", "-m")
				t.Logf("---- %s OVS conntrack (%s, port %d) ----\n%s%v", n.Name, p.Name, echoHTTPPort, grepLines(out, port), err)
			}
		}
		out, err := exec.Command("ip", "netns", "exec", n.Name, "conntrack", "-L", "-p", "tcp", "--dport", strconv.Itoa(echoHTTPPort)).CombinedOutput()
		t.Logf("---- %s kernel conntrack ----\n%s%v", n.Name, out, err)
		logs, _ := filepath.Glob(filepath.Join(n.Dir, "fs", "var", "log", "antrea", "openvswitch", "*.log"))
		for _, l := range logs {
			if b, err := os.ReadFile(l); err == nil {
				_ = os.WriteFile(filepath.Join(c.CP.LogDir, n.Name+"-ovs-"+filepath.Base(l)), b, 0o644)
			}
		}
	}
}

func grepLines(s, sub string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}
