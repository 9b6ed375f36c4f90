//go:build cluster

package cluster

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// This file holds what the LoadBalancer failover measurement (lbfailover_test.go) does to the
// cluster from the host: an outside client that opens a TCP connection to an address at a fixed
// rate, and the faults it injects into a node (killing processes, freezing the node).

// installForOutsideClient installs the chart with InstallArgs and extra (later values win),
// waits for the agents, the controller and the Nodes, and lets the host reach the LoadBalancer
// pool from externalClient, as a client outside the cluster.
func (c *Cluster) installForOutsideClient(t *testing.T, extra ...string) {
	t.Helper()
	args := append([]string{"install", "antrea-proxy", c.ChartPath(), "--namespace", Namespace}, c.InstallArgs()...)
	c.Helm(t, append(args, extra...)...)
	c.WaitAgentsRolled(t, 5*time.Minute)
	c.WaitDeploymentAvailable(t, Namespace, "antrea-controller", 3*time.Minute)
	c.WaitNodesReady(t)
	if err := c.AddExternalClient(); err != nil {
		t.Fatal(err)
	}
	if err := RouteIntoUnderlay(LBPool); err != nil {
		t.Fatal(err)
	}
}

// hostProbe opens a TCP connection from the host's externalClient address to addr every
// interval, each bounded by timeout (connect and read the echo server's first line).
func hostProbe(addr string, interval, timeout time.Duration) *framework.Prober {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IP(externalClient.Addr().AsSlice())}}
	return framework.StartDialerProber("the host ("+externalClient.Addr().String()+")", d, addr,
		framework.ProberOptions{Interval: interval, Timeout: timeout})
}

// slowest returns the longest successful attempt and how many took over a second (a SYN the
// client had to send again).
func slowest(as []framework.ProbeAttempt) (time.Duration, int) {
	var worst time.Duration
	slow := 0
	for _, a := range as {
		if !a.OK() {
			continue
		}
		d := a.End.Sub(a.Start)
		worst = max(worst, d)
		if d > time.Second {
			slow++
		}
	}
	return worst, slow
}

// nodePIDs returns the processes of a node (everything below its cgroup in the pids hierarchy)
// whose command name is one of comms; every process when comms is empty.
func nodePIDs(node string, comms ...string) ([]int, error) {
	root := filepath.Join("/sys/fs/cgroup/pids", node)
	var pids []int
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil // the cgroup went away
		}
		for _, f := range strings.Fields(string(b)) {
			pid, err := strconv.Atoi(f)
			if err != nil {
				continue
			}
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
			if len(comms) == 0 || contains(comms, strings.TrimSpace(string(comm))) {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids, err
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// killNodeProcesses sends SIGKILL to the node's processes named comms and returns their PIDs;
// it fails unless every name matched one.
func killNodeProcesses(node string, comms ...string) ([]int, error) {
	pids, err := nodePIDs(node, comms...)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, pid := range pids {
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		seen[strings.TrimSpace(string(comm))] = true
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			return pids, fmt.Errorf("SIGKILL %d: %w", pid, err)
		}
	}
	for _, c := range comms {
		if !seen[c] {
			return pids, fmt.Errorf("no process %q on node %s", c, node)
		}
	}
	return pids, nil
}

// freezer is the node's cgroup in the v1 freezer hierarchy: freezing it stops every process of
// the node (kubelet, containerd, its shims, every container) at once, as a hung machine would.
func freezer(node string) string {
	return filepath.Join("/sys/fs/cgroup/freezer", node, "freezer.state")
}

// setFrozen freezes (true) or thaws the node and waits until the kernel reports the state.
func setFrozen(node string, frozen bool) error {
	want := "THAWED"
	if frozen {
		want = "FROZEN"
	}
	if err := os.WriteFile(freezer(node), []byte(want), 0o644); err != nil {
		return err
	}
	return framework.Poll(context.Background(), 30*time.Second, "node "+node+" "+want, func(context.Context) (bool, string, error) {
		b, err := os.ReadFile(freezer(node))
		got := strings.TrimSpace(string(b))
		return err == nil && got == want, got, nil
	})
}

// neighborMAC is the host's neighbour entry for ip on the underlay ("" if none).
func neighborMAC(ip netip.Addr) string {
	out, err := runOut("ip", "neigh", "show", ip.String(), "dev", hostVeth)
	if err != nil {
		return ""
	}
	f := strings.Fields(out)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "lladdr" {
			return f[i+1]
		}
	}
	return ""
}

// uplinkMAC is the MAC address of a node's eth0.
func uplinkMAC(node string) (string, error) {
	out, err := runOut("ip", "-n", node, "-o", "link", "show", "eth0")
	if err != nil {
		return "", err
	}
	f := strings.Fields(out)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "link/ether" {
			return f[i+1], nil
		}
	}
	return "", fmt.Errorf("no MAC address in %q", out)
}

// runOut runs a command and returns its output, with an error naming it.
func runOut(args ...string) (string, error) {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// logFollower follows one container's log file on its node (tail -F), from the current end:
// the lines a container writes while it stops are kept even once its Pod is gone.
type logFollower struct {
	cmd *exec.Cmd
	out *strings.Builder
	err error
}

// followLogs follows the newest log file of a container of pod on node.
func (c *Cluster) followLogs(node *Node, pod *corev1.Pod, container string) *logFollower {
	dir := filepath.Join(node.Dir, "fs", "var", "log", "pods", pod.Namespace+"_"+pod.Name+"_"+string(pod.UID), container)
	files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	l := &logFollower{out: &strings.Builder{}}
	if len(files) == 0 {
		l.err = fmt.Errorf("no log file in %s", dir)
		return l
	}
	sort.Strings(files)
	l.cmd = exec.Command("tail", "-n", "0", "-F", files[len(files)-1])
	l.cmd.Stdout = l.out
	l.err = l.cmd.Start()
	return l
}

// lines stops following and returns the lines containing one of subs.
func (l *logFollower) lines(subs ...string) string {
	if l.err != nil {
		return l.err.Error()
	}
	_ = l.cmd.Process.Kill()
	_ = l.cmd.Wait()
	var b strings.Builder
	for _, line := range strings.Split(l.out.String(), "\n") {
		for _, s := range subs {
			if strings.Contains(line, s) {
				b.WriteString(line + "\n")
				break
			}
		}
	}
	return b.String()
}

// watchNeighbors records, with timestamps, every change of the host's neighbour entries on the
// underlay link (ip monitor neigh) while the scenario runs, and logs those of ip when it ends:
// they show when the host learned which node answers for the address.
func (c *Cluster) watchNeighbors(t *testing.T, ip netip.Addr) {
	var out strings.Builder
	cmd := exec.Command("ip", "-ts", "monitor", "neigh", "dev", hostVeth)
	cmd.Stdout = &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Logf("ip monitor neigh: %v", err)
		return
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Logf("the host's neighbour entry of %s (ip monitor neigh):\n%s", ip, grepLines(out.String(), ip.String()+" "))
	})
}
