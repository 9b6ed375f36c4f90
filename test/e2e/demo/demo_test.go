//go:build demo

package demo

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

func say(format string, args ...any) { fmt.Printf(format+"\n", args...) }

func lbService(name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: name},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(framework.EchoPort)}},
		},
	}
}

func addr(ip string, port int) string { return net.JoinHostPort(ip, strconv.Itoa(port)) }

func nodePort(svc *corev1.Service) int { return int(svc.Spec.Ports[0].NodePort) }

type demo struct {
	t   *testing.T
	sb  *framework.Sandbox
	lbs []*framework.ProxyLB
	// podIPs and nodeIPs name the addresses a backend may see.
	podIPs  map[string]string
	nodeIPs map[string]string
}

// TestDemo is `make demo`. Every traffic line it prints is also checked: a wrong answer fails
// the demo before it says it is up.
func TestDemo(t *testing.T) {
	ctx := context.Background()
	say("== antrea-proxy demo: a two-node sandbox cluster, KEP-1860 ipMode with proxyLoadBalancerIPs=true ==")
	say("-- starting etcd, kube-apiserver, kube-controller-manager, and two nodes (network namespaces, each with")
	say("   its own Open vSwitch, the real antrea-agent and a kubelet stand-in calling the real antrea-cni)")
	sb := framework.StartSandbox(t, framework.SandboxOptions{Agent: framework.AgentOptions{ProxyLoadBalancerIPs: true}})
	if f := os.Getenv("DEMO_STATE_FILE"); f != "" {
		require.NoError(t, os.WriteFile(f, []byte(sb.NSPrefix+"\n"), 0o644))
	}
	d := &demo{t: t, sb: sb, podIPs: map[string]string{}, nodeIPs: map[string]string{}}
	for _, n := range sb.Nodes {
		d.nodeIPs[n.Name] = n.IP.String()
		say("   %s: underlay %s, podCIDR %s", n.Name, n.IP, n.PodCIDR)
	}
	say("-- starting the real antrea-controller (the LoadBalancer provider) with two pools: %q %s", vipPool.Name, vipPool.CIDRs[0])
	say("   (ipMode VIP, on-link: the node it picks answers ARP) and %q %s (ipMode Proxy: an external", proxyPool.Name, proxyPool.CIDRs[0])
	say("   L4 load balancer owns them)")
	require.NoError(t, sb.Net.RouteOnLink(vipPool.CIDRs[0]))
	_, err := sb.StartLBController(ctx, vipPool, proxyPool)
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			say("   antrea-controller's log: %s", filepath.Join(sb.CP.LogDir, "antrea-controller.log"))
		}
	})

	require.NoError(t, sb.CreateNamespace(ctx, "demo"))
	web := map[string]string{"app": "web"}
	pods, err := sb.RunPods(ctx,
		framework.EchoPod("demo", "web-1", sb.Nodes[0], web),
		framework.EchoPod("demo", "web-2", sb.Nodes[1], web),
		framework.EchoPod("demo", "web-3", sb.Nodes[1], web),
		framework.EchoPod("demo", "client", sb.Nodes[1], map[string]string{"app": "client"}),
	)
	require.NoError(t, err)
	for _, p := range pods {
		d.podIPs[p.Name] = p.Status.PodIP
		say("-- pod %-6s on %s: %s", p.Name, p.Spec.NodeName, p.Status.PodIP)
	}
	svcs := demoServices()
	for _, l := range svcs {
		_, err := sb.CP.Client.CoreV1().Services("demo").Create(ctx, l.spec(), metav1.CreateOptions{})
		require.NoError(t, err)
		say("-- Service %-9s LoadBalancer (%s)", l.name, l.how)
	}
	for _, l := range svcs {
		require.NoError(t, sb.WaitEndpoints(ctx, "demo", l.name, pods[0].Status.PodIP, pods[1].Status.PodIP, pods[2].Status.PodIP))
		require.NoError(t, d.waitServed(ctx, l))
	}
	vip, proxy, local := svcs[0], svcs[1], svcs[2]
	announcer, err := d.announcer(vip)
	require.NoError(t, err)

	say("")
	say("-- what the provider wrote on the Services (status.loadBalancer.ingress, KEP-4631 status.conditions):")
	printConditions(svcs)
	say("   %s is announced by %s (annotation antrea-proxy.io/announcing-node, chosen by the provider)", vip.ip, announcer.Name)
	say("   %s is Degraded: %s.", local.name, degradedMessage(local))
	say("   It is still served (through the external load balancer), but its backends see the load balancer's")
	say("   address instead of the client's: the one thing eTP=Local promises, shown below.")

	node1 := sb.Nodes[0]
	proxyLB, err := sb.StartProxyLB(proxy.ip, 80, addr(node1.IP.String(), nodePort(proxy.svc)))
	require.NoError(t, err)
	localLB, err := sb.StartProxyLB(local.ip, 80, addr(node1.IP.String(), nodePort(local.svc)))
	require.NoError(t, err)
	d.lbs = []*framework.ProxyLB{proxyLB, localLB}
	say("-- external L4 load balancer (l4proxy at %s) given the provider's Proxy addresses:", framework.RouterIP)
	say("   %s:80 -> node1's NodePort %d (%s), %s:80 -> node1's NodePort %d (%s)",
		proxy.ip, nodePort(proxy.svc), proxy.name, local.ip, nodePort(local.svc), local.name)
	require.NoError(t, sb.WaitLBApplied(ctx, "demo", vip.name, vip.ip, true))
	require.NoError(t, sb.WaitLBApplied(ctx, "demo", proxy.name, proxy.ip, false))
	require.NoError(t, sb.WaitLBApplied(ctx, "demo", local.name, local.ip, false))

	d.traffic(pods, vip, proxy, local, announcer)

	say("")
	say("$ antctl get servicemap -n demo --socket %s    # node1's agent", node1.API.Socket)
	out, err := exec.Command(filepath.Join(sb.Bins.Dir, "antctl"), "get", "servicemap", "-n", "demo", "--socket", node1.API.Socket).CombinedOutput()
	fmt.Print(string(out))
	require.NoError(t, err, "antctl get servicemap")
	if t.Failed() {
		say("== demo FAILED: some traffic was not what it must be (lines marked WRONG)")
		t.FailNow()
	}

	say("")
	say("== demo is up: kubeconfig %s; logs in %s", sb.CP.AdminKubeconfig, sb.CP.LogDir)
	say("   node namespaces: %s (ip netns exec %s ...); `make demo-down` stops everything", node1.NS.Name, node1.NS.Name)
	if os.Getenv("DEMO_WAIT") == "" {
		return
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGUSR1)
	<-stop
	say("== demo: stopping (SIGUSR1)")
}

// traffic sends the demo's connections and checks each answer.
func (d *demo) traffic(pods []*corev1.Pod, vip, proxy, local *lbSvc, announcer *framework.Node) {
	webs := []string{"web-1", "web-2", "web-3"}
	client := pods[3]
	clientNS, err := d.sb.PodNetNS(client)
	require.NoError(d.t, err)
	fromPod := []string{client.Status.PodIP}
	node1, node2 := d.sb.Nodes[0], d.sb.Nodes[1]
	say("")
	say("  from pod client (%s) on node2:", client.Status.PodIP)
	d.try(clientNS, "ClusterIP of web-vip", addr(vip.svc.Spec.ClusterIP, 80), expect{servers: webs, sources: fromPod})
	d.try(clientNS, "LB IP of web-vip (VIP)", addr(vip.ip.String(), 80), expect{servers: webs, sources: fromPod})
	d.try(clientNS, "LB IP of web-proxy (Proxy)", addr(proxy.ip.String(), 80), expect{servers: webs, sources: nodeSources(node1), relay: d.lbs[0]})
	say("  from the external client (%s):", framework.ClientIP)
	ext := d.sb.Net.Client
	d.try(ext, "NodePort of web-vip on node2", addr(node2.IP.String(), nodePort(vip.svc)), expect{servers: webs, sources: nodeSources(node2)})
	d.try(ext, "LB IP of web-vip (VIP)", addr(vip.ip.String(), 80), expect{servers: webs, sources: nodeSources(announcer)})
	d.checkARP(ext, vip, announcer)
	d.try(ext, "LB IP of web-proxy (Proxy)", addr(proxy.ip.String(), 80), expect{servers: webs, sources: nodeSources(node1), relay: d.lbs[0]})
	// The load balancers relay to node1's NodePorts, so node1 is where their traffic enters.
	// eTP=Local: node1 (the load balancer's target) sends only to its own endpoint and keeps the
	// source, which is the load balancer's, not the client's: what LoadBalancerDegraded says.
	d.try(ext, "LB IP of web-local (eTP=Local)", addr(local.ip.String(), 80),
		expect{servers: []string{"web-1"}, sources: []string{framework.RouterIP.String()}, relay: d.lbs[1]})
}
