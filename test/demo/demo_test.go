//go:build demo

// Package demo is the one-node lab demo, `bash hack/demo.sh lab` (`make demo` runs the
// two-node sandbox cluster demo, test/e2e/demo): a real Open vSwitch (userspace datapath), pods
// as network namespaces, an external L4 load balancer namespace and the real proxier fed by a
// fake clientset, showing KEP-1860 Option 1 with real traffic, including
// proxyLoadBalancerIPs=false. There is no control plane and no node data path (no host gateway,
// routes or nftables): the client, the pods and the load balancer are namespaces on the bridge,
// routed through a fake gateway MAC (test/lab).
package demo

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver"
	"github.com/antrea-proxy/antrea-proxy/pkg/antctl"
	"github.com/antrea-proxy/antrea-proxy/pkg/config"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy"
	"github.com/antrea-proxy/antrea-proxy/test/lab"
)

const (
	nodeName = "demo-node"
	nodeIP   = "192.168.77.10"
	vipIP    = "172.18.0.100"
	proxyIP  = "172.18.0.101"
)

func say(format string, args ...any) { fmt.Printf(format+"\n", args...) }

func lbService(name, clusterIP string, nodePort int32, ip string, mode v1.LoadBalancerIPMode) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: name},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, ClusterIP: clusterIP, ClusterIPs: []string{clusterIP},
			Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, NodePort: nodePort}}},
		Status: v1.ServiceStatus{LoadBalancer: v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: ip, IPMode: &mode}}}},
	}
}

func endpoints(svc string) *discovery.EndpointSlice {
	port, proto, name, ready, node := int32(8080), v1.ProtocolTCP, "http", true, nodeName
	s := &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "demo", Name: svc + "-1", Labels: map[string]string{discovery.LabelServiceName: svc}},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: &name, Port: &port, Protocol: &proto}},
	}
	for _, ip := range []string{"10.10.0.11", "10.10.0.12"} {
		s.Endpoints = append(s.Endpoints, discovery.Endpoint{Addresses: []string{ip}, NodeName: &node,
			Conditions: discovery.EndpointConditions{Ready: &ready}})
	}
	return s
}

// buildL4Proxy compiles the external load balancer helper.
func buildL4Proxy(t *testing.T) string {
	_, self, _, _ := runtime.Caller(0)
	bin := filepath.Join(t.TempDir(), "l4proxy")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = filepath.Join(filepath.Dir(self), "..", "e2e", "l4proxy")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building l4proxy: %v: %s", err, out)
	}
	return bin
}

func runProxier(t *testing.T, l *lab.Lab, proxyLBIPs bool, objs []k8sruntime.Object) (*proxy.Proxier, func()) {
	p, err := proxy.New(proxy.Options{NodeName: nodeName, Round: 1, ProxyLoadBalancerIPs: proxyLBIPs,
		MinSyncInterval: 100 * time.Millisecond, FullSyncPeriod: time.Minute}, l.OF)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, fake.NewSimpleClientset(objs...)) }()
	deadline := time.Now().Add(30 * time.Second)
	for len(p.Services()) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the proxier did not install both Services within 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return p, func() { cancel(); <-done }
}

// printServiceMap serves the proxier's state on the agent API, as antrea-agent does, and runs
// `antctl get servicemap -A` against it.
func printServiceMap(t *testing.T, l *lab.Lab, p *proxy.Proxier, proxyLBIPs bool) {
	cfg := &config.AgentConfig{}
	cfg.DefaultsFrom(config.Env{Getenv: func(string) string { return nodeName }, Hostname: os.Hostname})
	cfg.APISocket = filepath.Join(t.TempDir(), "antrea-agent.sock")
	cfg.AntreaProxy.ProxyLoadBalancerIPs = &proxyLBIPs
	srv, err := apiserver.Start(context.Background(), apiserver.Options{Config: cfg, Services: p, OVS: l.DB})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	say("$ antctl get servicemap -A")
	if rc := antctl.Main([]string{"get", "servicemap", "-A", "--socket", cfg.APISocket}, os.Stdout, os.Stderr); rc != 0 {
		t.Errorf("antctl exited with %d", rc)
	}
}

func (d *demo) try(label, addr string) string {
	server, from, err := d.lab.Dial(context.Background(), d.client, addr, time.Second)
	if err != nil {
		say("  %-34s %-20s -> no answer from a pod (not intercepted by OVS)", label, addr)
		return ""
	}
	via := "directly, load-balanced by OVS"
	if strings.HasPrefix(from, "10.10.0.20:") {
		via = "through the external load balancer"
	}
	say("  %-34s %-20s -> answered by %s, which saw client %s (%s)", label, addr, server, from, via)
	return from
}

type demo struct {
	lab    *lab.Lab
	client *lab.Host
}

// TestDemo is the demo. It also asserts what it shows, so a broken rule fails the lab demo.
func TestDemo(t *testing.T) {
	say("== antrea-proxy demo: KEP-1860 ipMode with proxyLoadBalancerIPs (Option 1) ==")
	say("-- starting Open vSwitch (userspace datapath) in a private network namespace")
	l := lab.New(t)
	d := &demo{lab: l}
	d.client = l.AddHost(t, "client", "10.10.0.10")
	l.AddPod(t, "pod1", "10.10.0.11", 8080)
	l.AddPod(t, "pod2", "10.10.0.12", 8080)
	say("-- pods pod1 (10.10.0.11) and pod2 (10.10.0.12) run an echo server; a client runs at 10.10.0.10")
	extlb := l.AddHost(t, "extlb", "10.10.0.20", proxyIP)
	relay := exec.Command("ip", "netns", "exec", extlb.NS.Name, buildL4Proxy(t), "-listen", proxyIP+":80", "-to", nodeIP+":30081")
	relay.Stderr = os.Stderr
	if err := relay.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = relay.Process.Kill(); _ = relay.Wait() })
	say("-- an external L4 load balancer at 10.10.0.20 owns %s and relays to the NodePort %s:30081", proxyIP, nodeIP)

	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: nodeIP}}}}
	objs := []k8sruntime.Object{node,
		lbService("web-vip", "10.96.0.10", 30080, vipIP, v1.LoadBalancerIPModeVIP), endpoints("web-vip"),
		lbService("web-proxy", "10.96.0.11", 30081, proxyIP, v1.LoadBalancerIPModeProxy), endpoints("web-proxy"),
	}

	for _, proxyLBIPs := range []bool{true, false} {
		say("\n-- antrea-agent with antreaProxy.proxyLoadBalancerIPs=%v", proxyLBIPs)
		p, stop := runProxier(t, l, proxyLBIPs, objs)
		printServiceMap(t, l, p, proxyLBIPs)
		say("")
		d.try("ClusterIP of web-vip", "10.96.0.10:80")
		d.try("NodePort of web-proxy", nodeIP+":30081")
		vipFrom := d.try("LB IP of web-vip (ipMode VIP)", vipIP+":80")
		proxyFrom := d.try("LB IP of web-proxy (ipMode Proxy)", proxyIP+":80")
		stop()
		if proxyLBIPs && !strings.HasPrefix(vipFrom, "10.10.0.10:") {
			t.Errorf("proxyLoadBalancerIPs=true, ipMode VIP: want the pod to see the client 10.10.0.10, got %q", vipFrom)
		}
		if !proxyLBIPs && vipFrom != "" {
			t.Errorf("proxyLoadBalancerIPs=false: the VIP must not be intercepted, but a pod answered (saw %q)", vipFrom)
		}
		if !strings.HasPrefix(proxyFrom, "10.10.0.20:") {
			t.Errorf("ipMode Proxy: want the pod to see the external load balancer 10.10.0.20, got %q", proxyFrom)
		}
	}
	say("\n== demo done: everything it started has been stopped ==")
}
