//go:build cluster

package cluster

import (
	"context"
	"net"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// The load balancer's configuration, from objects alone (no cluster, no root).

func lbNode(name, ip string, ready bool, lbls map[string]string) *corev1.Node {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls},
		Status: corev1.NodeStatus{
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}},
		},
	}
}

func lbService(name, ingress string, mode corev1.LoadBalancerIPMode, mutate func(*corev1.Service)) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: corev1.ServiceSpec{
			Type:                  corev1.ServiceTypeLoadBalancer,
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster,
			Ports: []corev1.ServicePort{
				{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, NodePort: 30080},
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, NodePort: 30053},
				{Name: "sctp", Port: 9, Protocol: corev1.ProtocolSCTP, NodePort: 30009},
			},
		},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: ingress, IPMode: &mode}}}},
	}
	if mutate != nil {
		mutate(svc)
	}
	return svc
}

func fk(addr string, proto corev1.Protocol) frontendKey {
	return frontendKey{Addr: netip.MustParseAddrPort(addr), Proto: proto}
}

func TestDesiredFrontendsFollowTheServices(t *testing.T) {
	nodes := []*corev1.Node{
		lbNode("n2", "10.123.0.12", true, nil),
		lbNode("n1", "10.123.0.11", true, nil),
		lbNode("down", "10.123.0.13", false, nil),
		lbNode("excluded", "10.123.0.14", true, map[string]string{excludeLabel: ""}),
	}
	in := lbInputs{
		Pool:  ProxyPool,
		Nodes: nodes,
		Services: []*corev1.Service{
			lbService("cluster", "192.168.241.1", corev1.LoadBalancerIPModeProxy, nil),
			lbService("vip", "192.168.241.2", corev1.LoadBalancerIPModeVIP, nil),
			lbService("elsewhere", "192.168.240.1", corev1.LoadBalancerIPModeProxy, nil),
			lbService("local", "192.168.241.3", corev1.LoadBalancerIPModeProxy, func(s *corev1.Service) {
				s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
				s.Spec.HealthCheckNodePort = 32000
				s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
				s.Spec.LoadBalancerSourceRanges = []string{" 10.123.0.11/32", "10.124.0.0/16", "bogus"}
				s.Spec.Ports = s.Spec.Ports[:1]
			}),
		},
		Healthy: map[healthKey]bool{{Node: netip.MustParseAddr("10.123.0.12"), Port: 32000}: true},
	}
	wantChecks := []healthKey{{Node: netip.MustParseAddr("10.123.0.11"), Port: 32000}, {Node: netip.MustParseAddr("10.123.0.12"), Port: 32000}}
	if got := healthChecks(in); !reflect.DeepEqual(got, wantChecks) {
		t.Errorf("health checks %v, want %v (the Ready, not excluded nodes on the Local Service's port)", got, wantChecks)
	}
	want := map[frontendKey]frontendConfig{
		fk("192.168.241.1:80", corev1.ProtocolTCP): {Service: "ns/cluster", Targets: []string{"10.123.0.11:30080", "10.123.0.12:30080"}},
		fk("192.168.241.1:53", corev1.ProtocolUDP): {Service: "ns/cluster", Targets: []string{"10.123.0.11:30053", "10.123.0.12:30053"}},
		fk("192.168.241.3:80", corev1.ProtocolTCP): {Service: "ns/local", Targets: []string{"10.123.0.12:30080"}, Affinity: true,
			SourceRanges: []netip.Prefix{netip.MustParsePrefix("10.123.0.11/32"), netip.MustParsePrefix("10.124.0.0/16")}},
	}
	if got := desiredFrontends(in); !reflect.DeepEqual(got, want) {
		t.Errorf("frontends\n got %v\nwant %v", got, want)
	}
	// No node passes the Local Service's health check: fail open to every eligible node.
	in.Healthy = nil
	if got := desiredFrontends(in)[fk("192.168.241.3:80", corev1.ProtocolTCP)].Targets; !reflect.DeepEqual(got, []string{"10.123.0.11:30080", "10.123.0.12:30080"}) {
		t.Errorf("targets with no healthy node %v, want every eligible node", got)
	}
}

func TestDesiredFrontendsWithoutNodePortsRelayToEndpoints(t *testing.T) {
	svc := lbService("nonp", "192.168.241.4", corev1.LoadBalancerIPModeProxy, func(s *corev1.Service) {
		s.Spec.Ports = []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}
	})
	name, port, tcp, yes, no := "http", int32(8080), corev1.ProtocolTCP, true, false
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: "nonp-1", Labels: map[string]string{discoveryv1.LabelServiceName: "nonp"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port, Protocol: &tcp}},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.244.1.5"}, Conditions: discoveryv1.EndpointConditions{Ready: &yes}},
			{Addresses: []string{"10.244.0.7"}},
			{Addresses: []string{"10.244.0.9"}, Conditions: discoveryv1.EndpointConditions{Ready: &no}},
		},
	}
	in := lbInputs{Pool: ProxyPool, Services: []*corev1.Service{svc}, Nodes: []*corev1.Node{lbNode("n1", "10.123.0.11", true, nil)},
		Slices: []*discoveryv1.EndpointSlice{slice}}
	got := desiredFrontends(in)[fk("192.168.241.4:80", corev1.ProtocolTCP)].Targets
	if want := []string{"10.244.0.7:8080", "10.244.1.5:8080"}; !reflect.DeepEqual(got, want) {
		t.Errorf("targets %v, want the ready endpoints %v", got, want)
	}
}

// The relay itself, on loopback addresses.

type hostOps struct{}

func (hostOps) Listen(network, addr string) (net.Listener, error) { return net.Listen(network, addr) }
func (hostOps) ListenPacket(network, addr string) (net.PacketConn, error) {
	return net.ListenPacket(network, addr)
}
func (hostOps) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// nameServer answers every TCP connection and every UDP datagram with its name.
func nameServer(t *testing.T, name string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenPacket("udp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close(); _ = pc.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(name))
			_ = c.Close()
		}
	}()
	go func() {
		buf := make([]byte, 100)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo([]byte(name), from)
		}
	}()
	return ln.Addr().String()
}

// askTCP connects from the local address from (empty: any) and returns what the server said.
func askTCP(addr, from string) (string, error) {
	d := net.Dialer{Timeout: 2 * time.Second}
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	var b strings.Builder
	buf := make([]byte, 100)
	for {
		n, err := c.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			if b.Len() == 0 {
				return "", err
			}
			return b.String(), nil
		}
	}
}

func startTestFrontend(t *testing.T, proto corev1.Protocol, cfg frontendConfig) *frontend {
	t.Helper()
	f, err := startFrontend(hostOps{}, frontendKey{Addr: netip.MustParseAddrPort("127.0.0.1:0"), Proto: proto}, cfg, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.close)
	return f
}

func TestFrontendTCPSpreadsHoldsAffinityAndAdmitsSourceRanges(t *testing.T) {
	a, b := nameServer(t, "a"), nameServer(t, "b")
	targets := []string{a, b}
	if b < a {
		targets = []string{b, a}
	}
	f := startTestFrontend(t, corev1.ProtocolTCP, frontendConfig{Service: "ns/s", Targets: targets})
	addr := f.addr().String()
	seen := map[string]int{}
	for range 10 {
		got, err := askTCP(addr, "")
		if err != nil {
			t.Fatal(err)
		}
		seen[got]++
	}
	if seen["a"] != 5 || seen["b"] != 5 {
		t.Errorf("without affinity: %v, want 5 each (round robin)", seen)
	}

	f.update(frontendConfig{Service: "ns/s", Targets: targets, Affinity: true})
	first, err := askTCP(addr, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	for range 9 {
		if got, err := askTCP(addr, "127.0.0.1"); err != nil || got != first {
			t.Fatalf("with affinity: %q, %v after %q", got, err, first)
		}
	}

	f.update(frontendConfig{Service: "ns/s", Targets: targets, SourceRanges: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}})
	if got, err := askTCP(addr, "127.0.0.1"); err == nil {
		t.Errorf("a client outside the source ranges got %q", got)
	}
	if got, err := askTCP(addr, "127.0.0.2"); err != nil || got == "" {
		t.Errorf("a client inside the source ranges: %q, %v", got, err)
	}
	f.update(frontendConfig{Service: "ns/s"})
	if got, err := askTCP(addr, ""); err == nil {
		t.Errorf("no target, yet the client got %q", got)
	}
}

func TestFrontendUDPKeepsAFlowOnItsTargetUntilTheTargetGoes(t *testing.T) {
	a, b := nameServer(t, "a"), nameServer(t, "b")
	f := startTestFrontend(t, corev1.ProtocolUDP, frontendConfig{Service: "ns/s", Targets: []string{a}})
	c, err := net.Dial("udp", f.addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ask := func() string {
		t.Helper()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Write([]byte("hostname")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 100)
		n, err := c.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		return string(buf[:n])
	}
	if got := ask(); got != "a" {
		t.Fatalf("first datagram answered by %q, want a", got)
	}
	// b joins: the flow stays on a, as a load balancer's flow table keeps it.
	targets := []string{a, b}
	if b < a {
		targets = []string{b, a}
	}
	f.update(frontendConfig{Service: "ns/s", Targets: targets})
	for range 3 {
		if got := ask(); got != "a" {
			t.Fatalf("the flow moved to %q while a was still a target", got)
		}
	}
	// a goes: the flow moves to b.
	f.update(frontendConfig{Service: "ns/s", Targets: []string{b}})
	if got := ask(); got != "b" {
		t.Fatalf("after a left, answered by %q, want b", got)
	}
}

// freePort is a TCP and UDP port of 127.0.0.1 that nothing listens on now.
func freePort(t *testing.T) int32 {
	t.Helper()
	for range 20 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		pc, err := net.ListenPacket("udp", ln.Addr().String())
		_ = ln.Close()
		if err == nil {
			_ = pc.Close()
			return int32(port)
		}
	}
	t.Fatal("no free port")
	return 0
}

func TestProxyLBFollowsServiceChanges(t *testing.T) {
	target := nameServer(t, "backend")
	nodePort := int32(netip.MustParseAddrPort(target).Port())
	port := freePort(t)
	svc := lbService("web", "127.0.0.1", corev1.LoadBalancerIPModeProxy, func(s *corev1.Service) {
		s.Spec.Ports = []corev1.ServicePort{{Name: "http", Port: port, Protocol: corev1.ProtocolTCP, NodePort: nodePort}}
	})
	client := fake.NewClientset(lbNode("n1", "127.0.0.1", true, nil), svc)
	lb, err := StartProxyLB(client, netip.MustParsePrefix("127.0.0.0/8"), hostOps{}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Stop()
	addr := func(p int32) string { return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(p)).String() }
	eventually := func(what string, cond func() bool) {
		t.Helper()
		framework.WaitFor(t, 10*time.Second, what, func(context.Context) (bool, string, error) { return cond(), "", nil })
	}
	answers := func(a string) func() bool {
		return func() bool { got, err := askTCP(a, ""); return err == nil && got == "backend" }
	}
	eventually("the Service's port to be relayed", answers(addr(port)))

	newPort := freePort(t)
	svc.Spec.Ports[0].Port = newPort
	ctx := context.Background()
	if _, err := client.CoreV1().Services("ns").Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually("the new port to be relayed", answers(addr(newPort)))
	eventually("the old port to be refused", func() bool { _, err := askTCP(addr(port), ""); return err != nil })

	if err := client.CoreV1().Services("ns").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually("the deleted Service's port to be refused", func() bool { _, err := askTCP(addr(newPort), ""); return err != nil })
}
