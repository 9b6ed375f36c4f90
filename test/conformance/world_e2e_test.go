//go:build e2e

package conformance

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// world is one sandbox with the suite's pods and the shapes' objects in it.
type world struct {
	kind string // "antrea-proxy" or "kube-proxy"
	sb   *framework.Sandbox
	// backendIPs and clientIPs by pod name; clients are "c1" (node1) and "c2" (node2).
	backendIPs map[string]string
	clients    map[string]*client
	addrs      Addresses
	// probeTimeout is how long a probe waits for an answer before it counts as dropped.
	probeTimeout time.Duration

	mu   sync.Mutex
	errs map[string]string // the first unclassified probe error of each row
	// drops are the start times of the probes of each row that got no answer.
	drops map[string][]time.Time
}

// client is where probes start: a pod, a node's host network or the external client.
type client struct {
	name string // pod@node1, host@node2, external
	node int    // -1 for the external client
	ns   *framework.NetNS
	ip   netip.Addr
}

// testNamespace holds every object of the suite.
const testNamespace = "conf"

// lbClass keeps every LoadBalancer controller away from the shapes' Services: the suite writes
// their ingress itself, as a cloud provider would.
const lbClass = "conformance.e2e/manual"

// startWorld starts a sandbox of kind and runs the backends and the client pods.
func startWorld(t *testing.T, kind framework.NodeProxy) *world {
	opts := framework.SandboxOptions{Proxy: kind, Agent: framework.AgentOptions{ProxyLoadBalancerIPs: true}}
	opts.ControlPlane.LogSubdir = string(kind)
	if kind == framework.ProxyAntrea {
		opts.ControlPlane.LogSubdir = "antrea-proxy"
	}
	sb := framework.StartSandbox(t, opts)
	w := &world{kind: "antrea-proxy", sb: sb, backendIPs: map[string]string{}, clients: map[string]*client{}, errs: map[string]string{}, drops: map[string][]time.Time{}}
	if kind == framework.ProxyKubeProxy {
		w.kind = "kube-proxy"
	}
	ctx := context.Background()
	if err := sb.CreateNamespace(ctx, testNamespace); err != nil {
		t.Fatal(err)
	}
	for i, n := range sb.Nodes {
		if err := sb.SetNodeZone(ctx, n, Zones[i]); err != nil {
			t.Fatal(err)
		}
	}
	var pods []*corev1.Pod
	for _, b := range Backends {
		pods = append(pods, framework.EchoPod(testNamespace, b.Name, sb.Nodes[b.Node], map[string]string{"role": "backend"}))
	}
	for i, n := range sb.Nodes {
		pods = append(pods, framework.EchoPod(testNamespace, fmt.Sprintf("c%d", i+1), n, map[string]string{"role": "client"}))
	}
	running, err := sb.RunPods(ctx, pods...)
	if err != nil {
		t.Fatal(err)
	}
	w.addrs = Addresses{Router: framework.RouterIP, External: framework.ClientIP}
	for _, n := range sb.Nodes {
		gw, err := gatewayOf(n.PodCIDR)
		if err != nil {
			t.Fatal(err)
		}
		w.addrs.NodeIPs = append(w.addrs.NodeIPs, n.IP)
		w.addrs.Gateways = append(w.addrs.Gateways, gw)
	}
	for _, p := range running {
		if strings.HasPrefix(p.Name, "b") {
			w.backendIPs[p.Name] = p.Status.PodIP
			continue
		}
		ns, err := sb.PodNetNS(p)
		if err != nil {
			t.Fatal(err)
		}
		node := int(p.Name[1] - '1')
		ip := netip.MustParseAddr(p.Status.PodIP)
		w.clients["pod@"+sb.Nodes[node].Name] = &client{name: "pod@" + sb.Nodes[node].Name, node: node, ns: ns, ip: ip}
		w.addrs.Pods = append(w.addrs.Pods, ip)
	}
	for i, n := range sb.Nodes {
		w.clients["host@"+n.Name] = &client{name: "host@" + n.Name, node: i, ns: n.NS, ip: n.IP}
	}
	w.clients["external"] = &client{name: "external", node: -1, ns: sb.Net.Client, ip: framework.ClientIP}
	return w
}

// gatewayOf is the first address of a podCIDR: both kinds' pod gateway address.
func gatewayOf(podCIDR string) (netip.Addr, error) {
	p, err := netip.ParsePrefix(podCIDR)
	if err != nil {
		return netip.Addr{}, err
	}
	return p.Masked().Addr().Next(), nil
}

// service is the Service object of a shape.
func service(s Shape) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: s.Name},
		Spec: corev1.ServiceSpec{
			Type:      corev1.ServiceType(s.Type),
			ClusterIP: s.ClusterIP.String(),
		},
	}
	for _, p := range s.Ports {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{
			Name: p.Name, Protocol: corev1.Protocol(p.Protocol), Port: p.Port, NodePort: p.NodePort,
			TargetPort: intstr.FromInt32(framework.EchoPort),
		})
	}
	if s.Type != "ClusterIP" {
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
		if s.ETPLocal {
			svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		}
	}
	if s.ITPLocal {
		local := corev1.ServiceInternalTrafficPolicyLocal
		svc.Spec.InternalTrafficPolicy = &local
	}
	if s.Affinity {
		svc.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
	}
	if s.ExternalIP.IsValid() {
		svc.Spec.ExternalIPs = []string{s.ExternalIP.String()}
	}
	if s.Type == "LoadBalancer" {
		class := lbClass
		svc.Spec.LoadBalancerClass = &class
		svc.Spec.LoadBalancerSourceRanges = s.SourceRanges
		svc.Spec.HealthCheckNodePort = s.HealthCheckNodePort
	}
	if s.TrafficDistribution != "" {
		td := s.TrafficDistribution
		svc.Spec.TrafficDistribution = &td
	}
	return svc
}

// endpointSlice is the shape's EndpointSlice, written by the suite (the Services have no
// selector), with the backends' addresses, nodes, zones, states and hints.
func (w *world) endpointSlice(s Shape) *discoveryv1.EndpointSlice {
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: s.Name + "-conf", Labels: map[string]string{
			discoveryv1.LabelServiceName: s.Name, discoveryv1.LabelManagedBy: "conformance.e2e",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{},
	}
	for _, p := range s.Ports {
		name, port, proto := p.Name, int32(framework.EchoPort), corev1.Protocol(p.Protocol)
		sl.Ports = append(sl.Ports, discoveryv1.EndpointPort{Name: &name, Port: &port, Protocol: &proto})
	}
	for _, ep := range s.Endpoints {
		node := BackendNode(ep.Backend)
		ready, serving, terminating := conditions(ep.State)
		nodeName, zone := w.sb.Nodes[node].Name, Zones[node]
		e := discoveryv1.Endpoint{
			Addresses:  []string{w.backendIPs[ep.Backend]},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &serving, Terminating: &terminating},
			NodeName:   &nodeName, Zone: &zone,
		}
		if ep.Zone != "" {
			e.Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: ep.Zone}}}
			if s.TrafficDistribution == "PreferSameNode" {
				e.Hints.ForNodes = []discoveryv1.ForNode{{Name: nodeName}}
			}
		}
		sl.Endpoints = append(sl.Endpoints, e)
	}
	return sl
}

func conditions(st EndpointState) (ready, serving, terminating bool) {
	switch st {
	case Ready:
		return true, true, false
	case ServingTerminating:
		return false, true, true
	case Terminating:
		return false, false, true
	}
	return false, false, false
}

// create writes every shape's EndpointSlice, then its Service and (LoadBalancer) its ingress,
// starts the Proxy-mode load balancers and the router's answers on OtherPort, and waits until
// the nodes have programmed it all.
func (w *world) create(t *testing.T, shapes []Shape) {
	ctx := context.Background()
	cs := w.sb.CP.Client
	for _, s := range shapes {
		if _, err := cs.DiscoveryV1().EndpointSlices(testNamespace).Create(ctx, w.endpointSlice(s), metav1.CreateOptions{}); err != nil {
			t.Fatalf("%s: creating the EndpointSlice of %s: %v", w.kind, s.Name, err)
		}
	}
	for _, s := range shapes {
		if _, err := cs.CoreV1().Services(testNamespace).Create(ctx, service(s), metav1.CreateOptions{}); err != nil {
			t.Fatalf("%s: creating Service %s: %v", w.kind, s.Name, err)
		}
	}
	for _, s := range shapes {
		if s.Type != "LoadBalancer" {
			continue
		}
		mode := corev1.LoadBalancerIPModeVIP
		if s.LBMode == LBProxy {
			mode = corev1.LoadBalancerIPModeProxy
		}
		if err := w.sb.SetLBIngress(ctx, testNamespace, s.Name, s.LBIP, mode); err != nil {
			t.Fatal(err)
		}
		if s.LBMode != LBProxy {
			continue
		}
		target := w.sb.Nodes[s.ProxyTarget].IP.String()
		for _, p := range s.Ports {
			if p.Protocol == "SCTP" {
				continue
			}
			if _, err := w.sb.StartProxyLB(s.LBIP, int(p.Port), target+":"+strconv.Itoa(int(p.NodePort))); err != nil {
				t.Fatalf("%s: %v", w.kind, err)
			}
		}
	}
	if err := w.sb.ServeOutsideOn(OtherPort, outsideAddresses(shapes)...); err != nil {
		t.Fatalf("%s: %v", w.kind, err)
	}
	start := time.Now()
	if err := w.waitProgrammed(ctx, shapes); err != nil {
		t.Fatalf("%s: %v", w.kind, err)
	}
	t.Logf("%s: %d shapes programmed in %v", w.kind, len(shapes), time.Since(start).Round(time.Millisecond))
}
