//go:build cluster

package cluster

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// nodeCount is CLUSTER_NODES, default 2.
func nodeCount(t *testing.T) int {
	n := 2
	if v := os.Getenv("CLUSTER_NODES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("CLUSTER_NODES=%q: want a positive number", v)
		}
	}
	return n
}

// TestRealCluster installs the chart on real nodes and checks the data path, the LoadBalancer
// provider and the proxyLoadBalancerIPs option end to end.
func TestRealCluster(t *testing.T) {
	checkKeepAliveOneWrite(t)
	c := Start(t, nodeCount(t))
	dumpAgentGoroutinesOnFailure(t, c)
	start := time.Now()
	c.Helm(t, append([]string{"install", "antrea-proxy", c.ChartPath(), "--namespace", Namespace}, c.InstallArgs()...)...)
	c.WaitAgentsRolled(t, 5*time.Minute)
	c.WaitDeploymentAvailable(t, Namespace, "antrea-controller", 3*time.Minute)
	t.Logf("chart up in %v", time.Since(start).Round(time.Second))
	checkInstallCNI(t, c)
	c.WaitNodesReady(t)
	checkHostReachesKubernetes(t, c)

	c.CreateWorkloads(t)
	c.WaitDeploymentAvailable(t, DemoNamespace, "echo", 3*time.Minute)
	waitPodRunning(t, c, DemoNamespace, "client")
	checkPodIPs(t, c)

	svc := getService(t, c, "echo")
	checkClusterDNS(t, c, svc.Spec.ClusterIP)
	seen := probeUntilAllBackends(t, c, svc.Spec.ClusterIP, 80)
	t.Logf("ClusterIP %s answered from %v", svc.Spec.ClusterIP, seen)

	vip := waitLoadBalancer(t, c, "echo-lb")
	probeUntilAnswer(t, c, vip, 80)
	for _, n := range c.Nodes {
		waitServiceMap(t, c, n.Name, vip+"(VIP):programmed")
	}
	if got := vipFlows(t, c, c.Nodes[0].Name, vip); got == 0 {
		t.Fatalf("no OVS flow matches the VIP %s on %s", vip, c.Nodes[0].Name)
	}

	// A long-lived connection to the ClusterIP, opened before the upgrade.
	startCapture(t, c)
	open := func() *Stream {
		return c.StartStream(t, DemoNamespace, "client", "bash", "-c", keepAliveScript, "keepalive", svc.Spec.ClusterIP, strconv.Itoa(echoHTTPPort))
	}
	clientIP := podIP(t, c, DemoNamespace, "client")
	lostPorts := map[string]bool{}
	ka := &keepAlive{s: open(), onFail: func() { dumpConntrack(t, c) }, reopen: open,
		limit: func() (string, bool) {
			evidence, cport, ok := endpointFirstPickup(t, c, clientIP, svc.Spec.ClusterIP, echoHTTPPort, lostPorts)
			lostPorts[cport] = ok
			return evidence, ok
		}}
	ka.wait(t, 3)

	before := agentUIDs(t, c)
	up := time.Now()
	c.Helm(t, "upgrade", "antrea-proxy", c.ChartPath(), "--namespace", Namespace, "--reuse-values", "--set", "antreaProxy.proxyLoadBalancerIPs=false")
	c.WaitAgentsRolled(t, 5*time.Minute)
	checkAllReplaced(t, c, before)
	t.Logf("helm upgrade --set antreaProxy.proxyLoadBalancerIPs=false: every agent Pod replaced and ready in %v", time.Since(up).Round(time.Second))
	for _, n := range c.Nodes {
		waitServiceMap(t, c, n.Name, vip+"(VIP):skipped: proxyLoadBalancerIPs=false")
		waitNoVIPFlows(t, c, n.Name, vip)
	}
	ka.wait(t, 3)
	t.Logf("the long-lived connection to %s (backend %s) answers after the agents' roll; longest wait between two answers %v; lost to the netdev limit: %d",
		svc.Spec.ClusterIP, ka.backend, ka.maxGap.Round(time.Millisecond), ka.losses)

	before = agentUIDs(t, c)
	c.Helm(t, "upgrade", "antrea-proxy", c.ChartPath(), "--namespace", Namespace, "--reuse-values", "--set", "antreaProxy.proxyLoadBalancerIPs=true")
	c.WaitAgentsRolled(t, 5*time.Minute)
	checkAllReplaced(t, c, before)
	for _, n := range c.Nodes {
		waitServiceMap(t, c, n.Name, vip+"(VIP):programmed")
	}
	probeUntilAnswer(t, c, vip, 80)
	ka.wait(t, 2)
	t.Logf("the long-lived connection still answers after the upgrade back; longest wait between two answers %v; lost to the netdev limit so far: %d",
		ka.maxGap.Round(time.Millisecond), ka.losses)

	rolls := extraRolls(t)
	for i := 1; i <= rolls; i++ {
		ka.maxGap = 0
		rollAgents(t, c, i)
		ka.wait(t, 2)
		t.Logf("roll %d/%d: longest wait between two answers %v; connections lost to the netdev limit so far: %d", i, rolls, ka.maxGap.Round(time.Millisecond), ka.losses)
	}
	t.Logf("%d agent rolls; long-lived connections lost to the netdev datapath's limit: %d", rolls+2, ka.losses)
}

// podIP returns a Pod's IP.
func podIP(t *testing.T, c *Cluster, ns, name string) string {
	p, err := c.CP.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p.Status.PodIP
}

// WaitNodesReady waits for every Node's Ready condition (the CNI conflist is installed).
func (c *Cluster) WaitNodesReady(t testing.TB) {
	t.Helper()
	framework.WaitFor(t, 2*time.Minute, "every Node to be Ready", func(ctx context.Context) (bool, string, error) {
		nodes, err := c.CP.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		ready := 0
		var msgs []string
		for _, n := range nodes.Items {
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady {
					if cond.Status == corev1.ConditionTrue {
						ready++
					} else {
						msgs = append(msgs, n.Name+": "+cond.Message)
					}
				}
			}
		}
		return ready == len(c.Nodes), strings.Join(msgs, "; "), nil
	})
}

// checkHostReachesKubernetes connects from every node's host network to the kubernetes Service's
// ClusterIP. No kube-proxy runs: the agents came up through kubeAPIServerOverride, and the
// ClusterIP answers only because antrea-agent (proxyAll) routes the host's Service traffic into
// OVS, which DNATs it to kube-apiserver.
func checkHostReachesKubernetes(t *testing.T, c *Cluster) {
	dial := fmt.Sprintf("exec 3<>/dev/tcp/%s/443", c.KubernetesIP)
	for _, n := range c.Nodes {
		framework.WaitFor(t, time.Minute, "node "+n.Name+"'s host network to reach the kubernetes Service "+c.KubernetesIP.String(),
			func(ctx context.Context) (bool, string, error) {
				out, err := exec.CommandContext(ctx, "ip", "netns", "exec", n.Name, "timeout", "3", "bash", "-c", dial).CombinedOutput()
				if err != nil {
					return false, fmt.Sprintf("%v: %s", err, out), nil
				}
				return true, "", nil
			})
	}
	t.Logf("every node's host network reaches the kubernetes Service %s:443 through antrea-agent", c.KubernetesIP)
}

func checkInstallCNI(t *testing.T, c *Cluster) {
	for _, n := range c.Nodes {
		for _, f := range []string{"opt/cni/bin/antrea-cni", "etc/cni/net.d/10-antrea.conflist"} {
			if _, err := os.Stat(filepath.Join(n.Dir, "fs", f)); err != nil {
				t.Errorf("node %s: install-cni did not install /%s: %v", n.Name, f, err)
			}
		}
	}
}

func waitPodRunning(t *testing.T, c *Cluster, ns, name string) {
	framework.WaitFor(t, 2*time.Minute, "Pod "+ns+"/"+name+" to run", func(ctx context.Context) (bool, string, error) {
		p, err := c.CP.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		return p.Status.Phase == corev1.PodRunning, c.podSummary(ctx, ""), nil
	})
}

// checkPodIPs checks that every echo Pod got an address of its Node's podCIDR from antrea-cni.
func checkPodIPs(t *testing.T, c *Cluster) {
	ctx := context.Background()
	pods, err := c.CP.Client.CoreV1().Pods(DemoNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=echo"})
	if err != nil {
		t.Fatal(err)
	}
	nodesSeen := map[string]bool{}
	for _, p := range pods.Items {
		node, err := c.CP.Client.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cidr, err := netip.ParsePrefix(node.Spec.PodCIDR)
		if err != nil {
			t.Fatalf("node %s podCIDR %q: %v", node.Name, node.Spec.PodCIDR, err)
		}
		ip, err := netip.ParseAddr(p.Status.PodIP)
		if err != nil || !cidr.Contains(ip) {
			t.Errorf("Pod %s on %s has IP %q, not in the node's podCIDR %s", p.Name, node.Name, p.Status.PodIP, cidr)
		}
		nodesSeen[node.Name] = true
		t.Logf("Pod %s on %s: %s (podCIDR %s)", p.Name, node.Name, ip, cidr)
	}
	if len(nodesSeen) != len(c.Nodes) {
		t.Errorf("echo Pods run on %d nodes, want %d", len(nodesSeen), len(c.Nodes))
	}
}

func getService(t *testing.T, c *Cluster, name string) *corev1.Service {
	svc, err := c.CP.Client.CoreV1().Services(DemoNamespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// probeUntilAllBackends probes ip:port from the client until every echo Pod has answered.
func probeUntilAllBackends(t *testing.T, c *Cluster, ip string, port int) map[string]bool {
	pods, err := c.CP.Client.CoreV1().Pods(DemoNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: "app=echo"})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	framework.WaitFor(t, 2*time.Minute, fmt.Sprintf("every echo Pod to answer on %s:%d", ip, port), func(ctx context.Context) (bool, string, error) {
		out, err := c.Probe(ip, port)
		if err != nil {
			return false, err.Error(), nil
		}
		if f := strings.Fields(out); len(f) == 2 {
			seen[f[0]] = true
		}
		return len(seen) == len(pods.Items), fmt.Sprintf("seen %v, last %q", seen, out), nil
	})
	return seen
}

func probeUntilAnswer(t *testing.T, c *Cluster, ip string, port int) {
	framework.WaitFor(t, 2*time.Minute, fmt.Sprintf("an echo Pod to answer on %s:%d", ip, port), func(ctx context.Context) (bool, string, error) {
		out, err := c.Probe(ip, port)
		if err != nil {
			return false, err.Error(), nil
		}
		return strings.HasPrefix(out, "echo-"), out, nil
	})
}

// waitLoadBalancer waits for antrea-controller to give the Service a VIP-mode ingress IP with the
// KEP-4631 conditions (LoadBalancerServing True, LoadBalancerProvisioning False).
func waitLoadBalancer(t *testing.T, c *Cluster, name string) string {
	var ip string
	framework.WaitFor(t, 2*time.Minute, "Service "+name+" to get a LoadBalancer IP", func(ctx context.Context) (bool, string, error) {
		svc, err := c.CP.Client.CoreV1().Services(DemoNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		st := svc.Status.LoadBalancer
		if len(st.Ingress) == 0 || st.Ingress[0].IPMode == nil || *st.Ingress[0].IPMode != corev1.LoadBalancerIPModeVIP {
			return false, fmt.Sprintf("status %+v", svc.Status), nil
		}
		serving := meta.FindStatusCondition(svc.Status.Conditions, "LoadBalancerServing")
		prov := meta.FindStatusCondition(svc.Status.Conditions, "LoadBalancerProvisioning")
		if serving == nil || serving.Status != metav1.ConditionTrue || prov == nil || prov.Status != metav1.ConditionFalse {
			return false, fmt.Sprintf("conditions %+v", svc.Status.Conditions), nil
		}
		ip = st.Ingress[0].IP
		t.Logf("Service %s: ingress %s (VIP); %s=%s %q", name, ip, serving.Type, serving.Status, serving.Message)
		return true, "", nil
	})
	return ip
}

// waitServiceMap waits until `antctl get servicemap` in the node's agent Pod shows want.
func waitServiceMap(t *testing.T, c *Cluster, node, want string) {
	var last string
	framework.WaitFor(t, 2*time.Minute, fmt.Sprintf("antctl get servicemap on %s to show %q", node, want), func(ctx context.Context) (bool, string, error) {
		pod := c.AgentPod(t, node)
		out, err := c.Exec(Namespace, pod.Name, "antrea-agent", "antctl", "get", "servicemap", "-A")
		if err != nil {
			return false, err.Error(), nil
		}
		last = out
		return strings.Contains(out, want), out, nil
	})
	t.Logf("antctl get servicemap -A on %s:\n%s", node, last)
}

// vipFlows counts the OVS flows on a node that match the VIP.
func vipFlows(t *testing.T, c *Cluster, node, vip string) int {
	pod := c.AgentPod(t, node)
	out, err := c.Exec(Namespace, pod.Name, "antrea-ovs", "ovs-ofctl", "-O", "OpenFlow15", "dump-flows", "br-int")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "="+vip+",") || strings.Contains(l, "="+vip+" ") || strings.HasSuffix(l, "="+vip) {
			n++
		}
	}
	return n
}

func waitNoVIPFlows(t *testing.T, c *Cluster, node, vip string) {
	framework.WaitFor(t, time.Minute, "the VIP flows to disappear on "+node, func(ctx context.Context) (bool, string, error) {
		n := vipFlows(t, c, node, vip)
		return n == 0, fmt.Sprintf("%d flows", n), nil
	})
}

func agentUIDs(t *testing.T, c *Cluster) map[types.UID]bool {
	pods, err := c.CP.Client.CoreV1().Pods(Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=antrea-agent"})
	if err != nil {
		t.Fatal(err)
	}
	uids := map[types.UID]bool{}
	for _, p := range pods.Items {
		uids[p.UID] = true
	}
	return uids
}

// checkAllReplaced checks that the upgrade rolled every agent Pod (the checksum/config annotation).
func checkAllReplaced(t *testing.T, c *Cluster, before map[types.UID]bool) {
	for uid := range agentUIDs(t, c) {
		if before[uid] {
			t.Fatalf("agent Pod %s was not replaced by the upgrade", uid)
		}
	}
}

// keepAlive follows the keep-alive stream: every line must be an answer from backend (once it is
// known), and the longest wait between two answers is recorded.
type keepAlive struct {
	s       *Stream
	backend string
	last    time.Time
	maxGap  time.Duration
	// onFail, if set, runs before a failure is reported (diagnostics).
	onFail func()
	// limit, if set, tells whether a lost connection is the documented limit of the netdev
	// datapath, with the evidence; reopen then opens the next connection. losses counts them.
	limit  func() (string, bool)
	reopen func() *Stream
	losses int
}

// fatalf runs onFail and fails the test.
func (k *keepAlive) fatalf(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Logf("keep-alive failure at %s", time.Now().UTC().Format(time.RFC3339Nano))
	if k.onFail != nil {
		k.onFail()
	}
	t.Fatalf(format, args...)
}

// check consumes one line and reports whether it was an answer. A connection lost to the netdev
// datapath's limit is replaced by a new one; any other failure fails the test.
func (k *keepAlive) check(t *testing.T, l StreamLine) bool {
	f := strings.Fields(l.Text)
	if len(f) > 0 && f[0] == "fail" && k.limit != nil {
		if evidence, ok := k.limit(); ok {
			k.losses++
			t.Logf("the long-lived connection was lost (%q) to the userspace datapath's limit (docs/getting-started.md): "+
				"the endpoint's packet reached the restarted ovs-vswitchd before the client's; OVS conntrack of the client's node:\n%s\nopening another one",
				l.Text, evidence)
			k.s, k.backend, k.last = k.reopen(), "", time.Time{}
			return false
		}
	}
	if len(f) < 3 || f[0] != "ok" {
		k.fatalf(t, "the long-lived connection failed: %q", l.Text)
	}
	if k.backend == "" {
		k.backend = f[2]
	}
	if f[2] != k.backend {
		k.fatalf(t, "the long-lived connection now reaches %s, not %s: %q", f[2], k.backend, l.Text)
	}
	if !k.last.IsZero() && l.At.Sub(k.last) > k.maxGap {
		k.maxGap = l.At.Sub(k.last)
	}
	k.last = l.At
	return true
}

// wait checks every line received so far, then waits for n answers more, so that those were sent
// after the call.
func (k *keepAlive) wait(t *testing.T, n int) {
	for drained := false; !drained; {
		select {
		case l, ok := <-k.s.Lines:
			if !ok {
				k.fatalf(t, "the long-lived connection ended: %v", <-k.s.Done)
			}
			k.check(t, l)
		default:
			drained = true
		}
	}
	deadline := time.After(3 * time.Minute)
	for got := 0; got < n; {
		select {
		case l, ok := <-k.s.Lines:
			if !ok {
				k.fatalf(t, "the long-lived connection ended: %v", <-k.s.Done)
			}
			if k.check(t, l) {
				got++
			}
		case <-deadline:
			k.fatalf(t, "no answer on the long-lived connection for 3 minutes")
		}
	}
}
