//go:build cluster

package cluster

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// TestClusterKubeProxyMigration is `make test-cluster-migration`: a cluster that runs kube-proxy
// (nftables mode) and the chart with antreaProxy.proxyAll=false moves to antrea-proxy alone with
// the sequence of docs/getting-started.md "Migrating from kube-proxy" (helm upgrade
// proxyAll=true, then kube-proxy stopped and `kube-proxy --cleanup` on every node; the agents
// take kube-proxy's healthz and metrics ports once they are free, without a restart), and back,
// while clients keep a long-lived connection from a Pod to a ClusterIP and open new connections
// every 100 ms from a node's host network to the ClusterIP and from outside to a NodePort and an
// LoadBalancer IP. kube-proxy runs as a process in each node's network namespace, not as the
// DaemonSet the document deletes; the steps on the nodes are the same. It reports the failed connections and the longest gap of each, fails when one
// does not recover, and checks that no kube-proxy table or chain remains on any node.
func TestClusterKubeProxyMigration(t *testing.T) {
	c := Start(t, nodeCount(t))
	dumpAgentGoroutinesOnFailure(t, c)
	proxies := map[string]*kubeProxy{}
	startKubeProxies := func() {
		for _, n := range c.Nodes {
			kp, err := c.startKubeProxy(n)
			if err != nil {
				t.Fatal(err)
			}
			proxies[n.Name] = kp
			t.Cleanup(kp.stop)
		}
	}
	startKubeProxies()
	c.installForOutsideClient(t, "--set", "antreaProxy.proxyAll=false")
	c.CreateWorkloads(t)
	nodePort := createNodePort(t, c)
	c.WaitDeploymentAvailable(t, DemoNamespace, "echo", 3*time.Minute)
	waitPodRunning(t, c, DemoNamespace, "client")
	svc := getService(t, c, "echo")
	vip := waitLoadBalancer(t, c, "echo-lb")
	for _, n := range c.Nodes {
		waitKubeProxyTable(t, n, svc.Spec.ClusterIP)
	}

	m := &migration{c: c, probers: map[string]*framework.Prober{
		"ClusterIP " + svc.Spec.ClusterIP + ":80 from " + c.Nodes[0].Name + "'s host network": framework.StartProber(
			&framework.NetNS{Name: c.Nodes[0].Name}, net.JoinHostPort(svc.Spec.ClusterIP, "80"), framework.ProberOptions{Interval: 100 * time.Millisecond}),
		fmt.Sprintf("NodePort %s:%d from outside", c.Nodes[len(c.Nodes)-1].IP, nodePort): hostProbe(
			net.JoinHostPort(c.Nodes[len(c.Nodes)-1].IP.String(), strconv.Itoa(nodePort)), 100*time.Millisecond, 2*time.Second),
		"LoadBalancer IP " + vip + ":80 from outside": hostProbe(net.JoinHostPort(vip, "80"), 100*time.Millisecond, 2*time.Second),
	}}
	defer m.stopAll()
	m.waitHealthy(t, time.Now())
	open := func() *Stream {
		return c.StartStream(t, DemoNamespace, "client", "bash", "-c", keepAliveScript, "keepalive", svc.Spec.ClusterIP, strconv.Itoa(echoHTTPPort))
	}
	clientIP := podIP(t, c, DemoNamespace, "client")
	lost := map[string]bool{}
	ka := &keepAlive{s: open(), reopen: open, limit: func() (string, bool) {
		evidence, cport, ok := endpointFirstPickup(t, c, clientIP, svc.Spec.ClusterIP, echoHTTPPort, lost)
		lost[cport] = ok
		return evidence, ok
	}}
	ka.wait(t, 3)

	// To antrea-proxy: proxyAll first, while kube-proxy still serves; then kube-proxy goes.
	at := time.Now()
	c.Helm(t, "upgrade", "antrea-proxy", c.ChartPath(), "--namespace", Namespace, "--reuse-values", "--set", "antreaProxy.proxyAll=true")
	c.WaitAgentsRolled(t, 5*time.Minute)
	upgraded := time.Since(at)
	m.removeKubeProxy(t, proxies)
	checkHostReachesKubernetes(t, c)
	m.waitHealthy(t, time.Now())
	ka.wait(t, 3)
	m.report(t, fmt.Sprintf("kube-proxy -> antrea-proxy (helm upgrade proxyAll=true: agents rolled in %v; kube-proxy stopped and cleaned up)", upgraded.Round(time.Second)), at)
	t.Logf("the long-lived connection from the client Pod: longest wait between two answers %v, lost to the netdev limit: %d", ka.maxGap.Round(time.Millisecond), ka.losses)
	// kube-proxy held its healthz and metrics ports (antrea-agent's defaults too) when the
	// agents started: they retry them and serve there once kube-proxy is gone, without a restart.
	m.waitAgentPorts(t, time.Minute)

	// And back: kube-proxy first, then antrea-agent without proxyAll.
	at = time.Now()
	ka.maxGap = 0
	startKubeProxies()
	for _, n := range c.Nodes {
		waitKubeProxyTable(t, n, svc.Spec.ClusterIP)
	}
	c.Helm(t, "upgrade", "antrea-proxy", c.ChartPath(), "--namespace", Namespace, "--reuse-values", "--set", "antreaProxy.proxyAll=false")
	c.WaitAgentsRolled(t, 5*time.Minute)
	m.waitHealthy(t, time.Now())
	ka.wait(t, 3)
	m.report(t, "antrea-proxy -> kube-proxy (kube-proxy started; helm upgrade proxyAll=false)", at)
	t.Logf("the long-lived connection from the client Pod: longest wait between two answers %v, lost to the netdev limit: %d", ka.maxGap.Round(time.Millisecond), ka.losses)
}

type migration struct {
	c       *Cluster
	probers map[string]*framework.Prober
}

// removeKubeProxy stops kube-proxy on every node, runs `kube-proxy --cleanup` there and checks
// that none of its nftables tables or iptables chains is left.
func (m *migration) removeKubeProxy(t *testing.T, proxies map[string]*kubeProxy) {
	for _, n := range m.c.Nodes {
		proxies[n.Name].stop()
		out, err := m.c.kubeProxyCleanup(n)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("kube-proxy --cleanup on %s: exit 0, %d lines of log", n.Name, strings.Count(out, "\n"))
	}
	for _, n := range m.c.Nodes {
		left, err := kubeProxyLeftovers(n)
		if err != nil {
			t.Fatal(err)
		}
		if len(left) > 0 {
			t.Errorf("node %s keeps kube-proxy's rules after the clean-up:\n%s", n.Name, strings.Join(left, "\n"))
		} else {
			t.Logf("%s: no kube-proxy table in `nft list tables`, no kube-proxy chain in iptables-save/ip6tables-save", n.Name)
		}
	}
}

// waitHealthy waits until every prober answered for 2 s in a row after since.
func (m *migration) waitHealthy(t *testing.T, since time.Time) {
	for name, p := range m.probers {
		if err := p.WaitHealthy(context.Background(), since, 2*time.Second, 3*time.Minute); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

// report logs, per prober, the attempts started since at: failed connections and longest gap.
func (m *migration) report(t *testing.T, what string, at time.Time) {
	var b strings.Builder
	for name, p := range m.probers {
		var since []framework.ProbeAttempt
		for _, a := range p.Attempts() {
			if !a.Start.Before(at) {
				since = append(since, a)
			}
		}
		s := framework.Summarize(since, at)
		worst, slow := slowest(since)
		fmt.Fprintf(&b, "\n  %s: %s; slowest answered connection %v, %d took over 1 s", name, s, worst.Round(time.Millisecond), slow)
		if !s.Recovered {
			t.Errorf("%s: %s never answered again", what, name)
		}
	}
	t.Logf("%s:%s", what, b.String())
}

func (m *migration) stopAll() {
	for _, p := range m.probers {
		p.Stop()
	}
}

// waitAgentPorts waits until every agent serves /healthz on kube-proxy's port 10256 now that
// kube-proxy is gone (the agents retry a port they could not bind), without a restart.
func (m *migration) waitAgentPorts(t *testing.T, timeout time.Duration) {
	start := time.Now()
	for _, n := range m.c.Nodes {
		framework.WaitFor(t, timeout, n.Name+"'s antrea-agent to serve /healthz on 10256", func(context.Context) (bool, string, error) {
			out, err := runOut("ip", "netns", "exec", n.Name, "timeout", "3", "bash", "-c",
				`exec 3<>/dev/tcp/127.0.0.1/10256 && printf 'GET /healthz HTTP/1.0\r\n\r\n' >&3 && head -n1 <&3`)
			return err == nil && strings.Contains(out, "200"), strings.TrimSpace(out), nil
		})
	}
	t.Logf("every agent serves /healthz on 127.0.0.1:10256 %v after kube-proxy was removed, without a restart", time.Since(start).Round(100*time.Millisecond))
}

// createNodePort creates the NodePort Service echo-np and returns its node port.
func createNodePort(t *testing.T, c *Cluster) int {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "echo-np", Namespace: DemoNamespace},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": "echo"},
			Ports: []corev1.ServicePort{{Name: "tcp", Port: 80, TargetPort: intstr.FromInt32(echoTCPPort)}}},
	}
	created, err := c.CP.Client.CoreV1().Services(DemoNamespace).Create(context.Background(), svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return int(created.Spec.Ports[0].NodePort)
}

// waitKubeProxyTable waits until kube-proxy programmed the ClusterIP in the node's nftables.
func waitKubeProxyTable(t *testing.T, n *Node, clusterIP string) {
	framework.WaitFor(t, 2*time.Minute, "kube-proxy on "+n.Name+" to program "+clusterIP, func(context.Context) (bool, string, error) {
		out, err := runOut("ip", "netns", "exec", n.Name, "nft", "list", "table", "ip", "kube-proxy")
		if err != nil {
			return false, err.Error(), nil
		}
		return strings.Contains(out, clusterIP), "no rule for it yet", nil
	})
}
