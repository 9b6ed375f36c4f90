//go:build demo

package demo

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

var (
	vipIP   = netip.MustParseAddr("172.18.0.10")
	proxyIP = netip.MustParseAddr("172.18.1.10")
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

type demo struct {
	sb      *framework.Sandbox
	lb      *framework.ProxyLB
	podIPs  map[string]string
	nodeIPs map[string]string
}

// who names the address a backend saw.
func (d *demo) who(ip string) string {
	for name, a := range d.podIPs {
		if a == ip {
			return "pod " + name
		}
	}
	for name, a := range d.nodeIPs {
		if a == ip {
			return name
		}
	}
	switch ip {
	case framework.ClientIP.String():
		return "the external client"
	case framework.RouterIP.String():
		return "the external load balancer"
	case "169.254.0.253":
		return "the node's Service SNAT address"
	}
	return "?"
}

func (d *demo) try(ns *framework.NetNS, label, target string) {
	ctx := context.Background()
	before, _ := d.lb.Stats(ctx)
	r, err := ns.Echo(ctx, "tcp", target, 3*time.Second)
	if err != nil {
		say("    %-30s %-20s -> no answer (%v)", label, target, err)
		return
	}
	after, _ := d.lb.Stats(ctx)
	via := "answered inside the cluster (OVS load-balanced it)"
	if after.TCP > before.TCP {
		via = "relayed by the external load balancer"
	}
	say("    %-30s %-20s -> %s answered; it saw %s (%s): %s", label, target, r.Server, r.ClientIP(), d.who(r.ClientIP()), via)
}

// TestDemo is `make demo`.
func TestDemo(t *testing.T) {
	ctx := context.Background()
	say("== antrea-proxy demo: a two-node sandbox cluster, KEP-1860 ipMode with proxyLoadBalancerIPs=true ==")
	say("-- starting etcd, kube-apiserver, kube-controller-manager, and two nodes (network namespaces, each with")
	say("   its own Open vSwitch, the real antrea-agent and a kubelet stand-in calling the real antrea-cni)")
	sb := framework.StartSandbox(t, framework.SandboxOptions{Agent: framework.AgentOptions{ProxyLoadBalancerIPs: true}})
	if f := os.Getenv("DEMO_STATE_FILE"); f != "" {
		require.NoError(t, os.WriteFile(f, []byte(sb.NSPrefix+"\n"), 0o644))
	}
	d := &demo{sb: sb, podIPs: map[string]string{}, nodeIPs: map[string]string{}}
	for _, n := range sb.Nodes {
		d.nodeIPs[n.Name] = n.IP.String()
		say("   %s: underlay %s, podCIDR %s", n.Name, n.IP, n.PodCIDR)
	}
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
	svcs := map[string]*corev1.Service{}
	for _, name := range []string{"web-vip", "web-proxy"} {
		svcs[name], err = sb.CP.Client.CoreV1().Services("demo").Create(ctx, lbService(name), metav1.CreateOptions{})
		require.NoError(t, err)
		require.NoError(t, sb.WaitEndpoints(ctx, "demo", name, pods[0].Status.PodIP, pods[1].Status.PodIP, pods[2].Status.PodIP))
	}
	require.NoError(t, sb.SetLBIngress(ctx, "demo", "web-vip", vipIP, corev1.LoadBalancerIPModeVIP))
	require.NoError(t, sb.SetLBIngress(ctx, "demo", "web-proxy", proxyIP, corev1.LoadBalancerIPModeProxy))
	proxyNodePort := int(svcs["web-proxy"].Spec.Ports[0].NodePort)
	d.lb, err = sb.StartProxyLB(proxyIP, 80, addr(sb.Nodes[0].IP.String(), proxyNodePort))
	require.NoError(t, err)
	say("-- Service web-vip:   LoadBalancer, ingress %s ipMode VIP (the underlay routes it to node1)", vipIP)
	say("-- Service web-proxy: LoadBalancer, ingress %s ipMode Proxy (an external L4 load balancer at %s", proxyIP, framework.RouterIP)
	say("   owns it and relays to node1's NodePort %d)", proxyNodePort)
	require.NoError(t, sb.WaitLBApplied(ctx, "demo", "web-vip", vipIP, true))
	require.NoError(t, sb.WaitLBApplied(ctx, "demo", "web-proxy", proxyIP, false))

	clientNS, err := sb.PodNetNS(pods[3])
	require.NoError(t, err)
	say("")
	say("  from pod client (%s) on node2:", pods[3].Status.PodIP)
	d.try(clientNS, "ClusterIP of web-vip", addr(svcs["web-vip"].Spec.ClusterIP, 80))
	d.try(clientNS, "LB IP of web-vip (VIP)", addr(vipIP.String(), 80))
	d.try(clientNS, "LB IP of web-proxy (Proxy)", addr(proxyIP.String(), 80))
	say("  from the external client (%s):", framework.ClientIP)
	d.try(sb.Net.Client, "NodePort of web-vip on node2", addr(sb.Nodes[1].IP.String(), int(svcs["web-vip"].Spec.Ports[0].NodePort)))
	d.try(sb.Net.Client, "LB IP of web-vip (VIP)", addr(vipIP.String(), 80))
	d.try(sb.Net.Client, "LB IP of web-proxy (Proxy)", addr(proxyIP.String(), 80))

	node1 := sb.Nodes[0]
	say("")
	say("$ antctl get servicemap -n demo --socket %s    # node1's agent", node1.API.Socket)
	out, err := exec.Command(filepath.Join(sb.Bins.Dir, "antctl"), "get", "servicemap", "-n", "demo", "--socket", node1.API.Socket).CombinedOutput()
	fmt.Print(string(out))
	require.NoError(t, err, "antctl get servicemap")

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
