// Package servicetracetest builds a node for trace tests: the real proxier on a fake bridge, and
// the gateway and pod flows the data path and the CNI server install, collected into
// servicetrace.Inputs as the agent collects them.
package servicetracetest

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent/servicetrace"
	"github.com/antrea-proxy/antrea-proxy/pkg/config"
	"github.com/antrea-proxy/antrea-proxy/pkg/model"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/openflowtest"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy"
)

// The node: node-a (192.168.77.10), podCIDR 10.10.1.0/24, gateway antrea-gw0 on OpenFlow port 2
// with address 10.10.1.1, a client pod ns/client (port 10) and two endpoint pods ns/web-1 and
// ns/web-2 (ports 11, 12); RemoteEndpoint is a pod of node-b.
const (
	NodeName       = "node-a"
	NodeIP         = "192.168.77.10"
	NodePortVIP    = "169.254.0.252"
	ServiceVIP     = "169.254.0.253"
	PodCIDR        = "10.10.1.0/24"
	GatewayName    = "antrea-gw0"
	GatewayPort    = 2
	GatewayIP      = "10.10.1.1"
	ClientIP       = "10.10.1.5"
	Endpoint1IP    = "10.10.1.6"
	Endpoint2IP    = "10.10.1.7"
	RemoteEndpoint = "10.10.2.7"
)

// Now is the proxier's clock.
func Now() time.Time { return time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC) }

func mac(last byte) net.HardwareAddr { return net.HardwareAddr{0x0a, 0, 0, 0, 0, last} }

// Pods are the node's pods.
func Pods() []servicetrace.Pod {
	pod := func(name, ifName string, port uint32, ip string) servicetrace.Pod {
		return servicetrace.Pod{Namespace: "ns", Name: name, Interface: ifName, OFPort: port, MAC: mac(byte(0x10 + port - 10)),
			IPs: []netip.Addr{netip.MustParseAddr(ip)}}
	}
	return []servicetrace.Pod{pod("client", "apxclient", 10, ClientIP), pod("web-1", "apxweb1", 11, Endpoint1IP), pod("web-2", "apxweb2", 12, Endpoint2IP)}
}

// Node is one node's writers: the real proxier on a fake bridge; Inputs adds the gateway's
// and the pods' flows.
type Node struct {
	t      *testing.T
	P      *proxy.Proxier
	Bridge *openflowtest.FakeBridge
}

// NewNode returns a node whose proxier serves IPv4 (and LB IPs when proxyLBIPs), with the
// agent's default reject meters.
func NewNode(t *testing.T, proxyLBIPs bool) *Node {
	t.Helper()
	opts := proxy.Options{NodeName: NodeName, ProxyLoadBalancerIPs: proxyLBIPs, Families: model.Families{IPv4: true},
		GatewayOFPort: GatewayPort, GatewayIPv4: netip.MustParseAddr(ServiceVIP), Clock: clocktesting.NewFakeClock(Now())}
	opts.Round = 1
	// The agent's default rate limits: rejected packets pass the RejectMeter table's meters.
	opts.RejectMeters = config.DefaultRejectMeters
	b := openflowtest.NewFakeBridge()
	p, err := proxy.New(opts, b)
	if err != nil {
		t.Fatal(err)
	}
	p.OnNodeUpdate(&v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: NodeName},
		Spec:       v1.NodeSpec{PodCIDR: PodCIDR, PodCIDRs: []string{PodCIDR}},
		Status:     v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: NodeIP}}},
	})
	return &Node{t: t, P: p, Bridge: b}
}

// Add gives the proxier Services and EndpointSlices.
func (n *Node) Add(objs ...any) *Node {
	for _, o := range objs {
		switch o := o.(type) {
		case *v1.Service:
			n.P.Tracker().Services.OnServiceAdd(o)
		case *discovery.EndpointSlice:
			n.P.Tracker().Endpoints.OnEndpointSliceAdd(o)
		default:
			n.t.Fatalf("add: %T", o)
		}
	}
	return n
}

// Inputs syncs the proxier and collects what a trace reads, as the agent does.
func (n *Node) Inputs() *servicetrace.Inputs {
	n.t.Helper()
	if err := n.P.SyncNow(context.Background(), false); err != nil {
		n.t.Fatalf("sync: %v", err)
	}
	flows, groups := n.P.InstalledState()
	gwMAC := mac(1)
	flows = append(flows, pipeline.GatewayFlows(1, pipeline.Gateway{OFPort: GatewayPort, MAC: gwMAC, IPv4: true,
		NodePortVirtualIPs: []netip.Addr{netip.MustParseAddr(NodePortVIP)}, PodCIDRs: []netip.Prefix{netip.MustParsePrefix(PodCIDR)}})...)
	for _, pod := range Pods() {
		flows = append(flows, pipeline.PodFlows(1, gwMAC, pipeline.Pod{ID: uint64(pod.OFPort), OFPort: pod.OFPort, MAC: pod.MAC, IPs: pod.IPs})...)
	}
	return &servicetrace.Inputs{Flows: flows, Groups: groups, Services: n.P.Services(), Pods: Pods(),
		Gateway:       servicetrace.Gateway{Name: GatewayName, OFPort: GatewayPort, MAC: gwMAC, IPs: []netip.Addr{netip.MustParseAddr(GatewayIP)}},
		NodeAddresses: append(n.P.NodePortAddresses(), netip.MustParseAddr(NodePortVIP))}
}

// ServiceOption changes a Service.
type ServiceOption func(*v1.Service)

// Service is a ClusterIP Service ns/name with port http 80/TCP to target port 8080.
func Service(name, clusterIP string, opts ...ServiceOption) *v1.Service {
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: metav1.NewTime(Now())},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: clusterIP, ClusterIPs: []string{clusterIP},
			Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}}},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// NodePort makes the Service a NodePort Service (unless it is a LoadBalancer) with nodePort np.
func NodePort(np int32) ServiceOption {
	return func(s *v1.Service) {
		if s.Spec.Type == v1.ServiceTypeClusterIP {
			s.Spec.Type = v1.ServiceTypeNodePort
		}
		s.Spec.Ports[0].NodePort = np
	}
}

// LoadBalancer makes the Service a LoadBalancer with one ingress IP (ipMode mode; nil unset).
func LoadBalancer(ip string, mode *v1.LoadBalancerIPMode) ServiceOption {
	return func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: ip, IPMode: mode}}
	}
}

// ExternalIPs sets spec.externalIPs.
func ExternalIPs(ips ...string) ServiceOption {
	return func(s *v1.Service) { s.Spec.ExternalIPs = ips }
}

// ClientIPAffinity sets sessionAffinity ClientIP with timeout seconds.
func ClientIPAffinity(seconds int32) ServiceOption {
	return func(s *v1.Service) {
		s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: &seconds}}
	}
}

// SourceRanges sets loadBalancerSourceRanges.
func SourceRanges(r ...string) ServiceOption {
	return func(s *v1.Service) { s.Spec.LoadBalancerSourceRanges = r }
}

// ExternalLocal sets externalTrafficPolicy=Local.
func ExternalLocal(s *v1.Service) {
	s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
}

// Slice is the EndpointSlice of Service svc (port http 8080/TCP) with ready endpoints on this
// node (local) and on node-b (remote).
func Slice(svc string, local []string, remote ...string) *discovery.EndpointSlice {
	port, proto, name := int32(8080), v1.ProtocolTCP, "http"
	s := &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: svc + "-1", Labels: map[string]string{discovery.LabelServiceName: svc}},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: &name, Port: &port, Protocol: &proto}},
	}
	add := func(ip, node string) {
		ready := true
		s.Endpoints = append(s.Endpoints, discovery.Endpoint{Addresses: []string{ip}, NodeName: &node,
			Conditions: discovery.EndpointConditions{Ready: &ready, Serving: &ready}})
	}
	for _, ip := range local {
		add(ip, NodeName)
	}
	for _, ip := range remote {
		add(ip, "node-b")
	}
	return s
}

// ManyRemote returns n endpoint addresses of other nodes (10.20.x.y).
func ManyRemote(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("10.20.%d.%d", i/250, i%250+1)
	}
	return out
}
