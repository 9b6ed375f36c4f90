//go:build cluster

package cluster

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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

// TestKeepAliveScriptOneWrite needs no cluster: go test -tags cluster -run TestKeepAliveScriptOneWrite
// ./test/cluster/. TestRealCluster runs the same check first.
func TestKeepAliveScriptOneWrite(t *testing.T) { checkKeepAliveOneWrite(t) }

// checkKeepAliveOneWrite runs keepAliveScript on this host against a local HTTP server under
// strace and checks that every request leaves in one write(2): a request written line by line
// can be split across a roll's data-path gap, and the echo server closes a connection whose
// request headers take more than 5 s (its ReadHeaderTimeout), which the test would report as a
// data-path failure.
func checkKeepAliveOneWrite(t *testing.T) {
	const req = "GET / HTTP/1.1\r\nHost: echo\r\n\r\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("local " + r.RemoteAddr + "\n"))
	}))
	defer srv.Close()
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	trace := filepath.Join(t.TempDir(), "strace")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "strace", "-f", "-e", "trace=write", "-s", "256", "-o", trace,
		"bash", "-c", keepAliveScript, "keepalive", u.Hostname(), u.Port())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("strace (hack/cluster.sh installs it): %v", err)
	}
	sc := bufio.NewScanner(out)
	for answers := 0; answers < 3; answers++ {
		if !sc.Scan() || !strings.HasPrefix(sc.Text(), "ok ") {
			t.Fatalf("keepAliveScript against a local server: %q, %v", sc.Text(), sc.Err())
		}
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	b, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	quoted := strconv.Quote(req)
	requests := 0
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.Contains(l, "write(") || !strings.Contains(l, "GET") && !strings.Contains(l, "Host:") && !strings.Contains(l, `"\r\n"`) {
			continue
		}
		if !strings.Contains(l, quoted+", 30)") {
			t.Fatalf("keepAliveScript wrote part of a request: %s (want every request in one write of %s)", l, quoted)
		}
		requests++
	}
	if requests < 3 {
		t.Fatalf("strace saw %d request writes of keepAliveScript, want at least 3:\n%s", requests, b)
	}
}

// dumpAgentGoroutinesOnFailure makes every agent print its goroutines into its log (SIGQUIT,
// which also ends it) when the test has failed, before the logs are saved: an agent that stopped
// making progress then shows where.
func dumpAgentGoroutinesOnFailure(t *testing.T, c *Cluster) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		pods, err := c.CP.Client.CoreV1().Pods(Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=antrea-agent"})
		if err != nil {
			t.Logf("listing agent Pods for a goroutine dump: %v", err)
			return
		}
		for _, p := range pods.Items {
			if _, err := c.Exec(Namespace, p.Name, "antrea-agent", "sh", "-c", "kill -QUIT 1"); err != nil {
				t.Logf("goroutine dump of %s: %v", p.Name, err)
			}
		}
		// The kubelet's log files get the dump within a moment; give them that long.
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			done := true
			for _, n := range c.Nodes {
				logs, _ := filepath.Glob(filepath.Join(n.Dir, "fs", "var", "log", "pods", Namespace+"_antrea-agent-*", "antrea-agent", "*.log"))
				found := false
				for _, l := range logs {
					if b, err := os.ReadFile(l); err == nil && strings.Contains(string(b), "goroutine ") {
						found = true
					}
				}
				done = done && found
			}
			if done {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
}

// ctOrig is the original-direction tuple of an `ovs-appctl dpctl/dump-conntrack` line.
var ctOrig = regexp.MustCompile(`orig=\(src=([^,]+),dst=([^,]+),sport=(\d+),dport=(\d+)\),reply=\(src=[^,]+,dst=[^,]+,sport=\d+,dport=(\d+)\)`)

// endpointFirstPickup looks in the OVS conntrack of the client's node for the trace of the
// netdev datapath's limit (docs/getting-started.md, "Upgrades with the userspace datapath"):
// after ovs-vswitchd restarted with an empty connection tracker, a packet of the endpoint
// (endpoint:port -> client:cport) reached it before the client's, and was committed as a
// connection of its own, not DNATed; the client's next packet was then DNATed with its source
// port moved, since the reply tuple was taken. It returns the two entries, for a client
// source port not in seen, and that port.
func endpointFirstPickup(t *testing.T, c *Cluster, clientIP, clusterIP string, port int, seen map[string]bool) (string, string, bool) {
	pod := c.AgentPod(t, c.Nodes[0].Name)
	out, err := c.Exec(Namespace, pod.Name, "antrea-ovs", "ovs-appctl", "dpctl/dump-conntrack", "-m")
	if err != nil {
		t.Logf("dump-conntrack on %s: %v", c.Nodes[0].Name, err)
		return "", "", false
	}
	return findEndpointFirstPickup(out, clientIP, clusterIP, port, seen)
}

// findEndpointFirstPickup is endpointFirstPickup on a conntrack dump.
func findEndpointFirstPickup(dump, clientIP, clusterIP string, port int, seen map[string]bool) (string, string, bool) {
	p := strconv.Itoa(port)
	lines := strings.Split(dump, "\n")
	for _, dnat := range lines {
		m := ctOrig.FindStringSubmatch(dnat)
		if m == nil || m[1] != clientIP || m[2] != clusterIP || m[4] != p || !strings.Contains(dnat, "mark=1") || seen[m[3]] {
			continue
		}
		cport := m[3]
		if m[5] == cport {
			continue // the DNAT kept the client's port: no clash
		}
		for _, rev := range lines {
			r := ctOrig.FindStringSubmatch(rev)
			if r != nil && r[2] == clientIP && r[3] == p && r[4] == cport && !strings.Contains(rev, "mark=") {
				return dnat + "\n" + rev, cport, true
			}
		}
	}
	return "", "", false
}
