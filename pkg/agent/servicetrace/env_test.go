package servicetrace

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

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/openflowtest"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/model"
)

// The node under test: node-a, podCIDR 10.10.1.0/24, gateway antrea-gw0 on OpenFlow port 2,
// a client pod (port 10) and two endpoint pods (ports 11, 12); 10.10.2.7 is a pod of node-b.
const (
	nodeName = "node-a"
	gwPort   = 2
)

var (
	nodeIP      = netip.MustParseAddr("192.168.77.10")
	nodePortVIP = netip.MustParseAddr("169.254.0.252")
	serviceVIP  = netip.MustParseAddr("169.254.0.253")
	podCIDR     = netip.MustParsePrefix("10.10.1.0/24")
	gatewayIP   = podCIDR.Addr().Next()
	gwMAC       = net.HardwareAddr{0x0a, 0, 0, 0, 0, 0x01}
	clientIP    = netip.MustParseAddr("10.10.1.5")
	ep1IP       = netip.MustParseAddr("10.10.1.6")
	ep2IP       = netip.MustParseAddr("10.10.1.7")
	remoteEPIP  = netip.MustParseAddr("10.10.2.7")
	fixedNow    = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	testPods    = []Pod{
		{Namespace: "ns", Name: "client", Interface: "apxclient", OFPort: 10, MAC: net.HardwareAddr{0x0a, 0, 0, 0, 0, 0x10}, IPs: []netip.Addr{clientIP}},
		{Namespace: "ns", Name: "web-1", Interface: "apxweb1", OFPort: 11, MAC: net.HardwareAddr{0x0a, 0, 0, 0, 0, 0x11}, IPs: []netip.Addr{ep1IP}},
		{Namespace: "ns", Name: "web-2", Interface: "apxweb2", OFPort: 12, MAC: net.HardwareAddr{0x0a, 0, 0, 0, 0, 0x12}, IPs: []netip.Addr{ep2IP}},
	}
)

// node is one node's writers on a fake bridge: the real proxier, and the gateway and pod flows
// the data path and the CNI server install.
type node struct {
	t *testing.T
	p *proxy.Proxier
}

func newNode(t *testing.T, proxyLBIPs bool) *node {
	t.Helper()
	opts := proxy.Options{NodeName: nodeName, ProxyLoadBalancerIPs: proxyLBIPs, Families: model.Families{IPv4: true},
		GatewayOFPort: gwPort, GatewayIPv4: serviceVIP, Clock: clocktesting.NewFakeClock(fixedNow)}
	opts.Round = 1
	p, err := proxy.New(opts, openflowtest.NewFakeBridge())
	if err != nil {
		t.Fatal(err)
	}
	p.OnNodeUpdate(&v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName},
		Spec:       v1.NodeSpec{PodCIDR: podCIDR.String(), PodCIDRs: []string{podCIDR.String()}},
		Status:     v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: nodeIP.String()}}},
	})
	return &node{t: t, p: p}
}

func (n *node) add(objs ...any) *node {
	for _, o := range objs {
		switch o := o.(type) {
		case *v1.Service:
			n.p.Tracker().Services.OnServiceAdd(o)
		case *discovery.EndpointSlice:
			n.p.Tracker().Endpoints.OnEndpointSliceAdd(o)
		default:
			n.t.Fatalf("add: %T", o)
		}
	}
	return n
}

// inputs syncs the proxier and collects what a trace reads, as the agent does.
func (n *node) inputs() *Inputs {
	n.t.Helper()
	if err := n.p.SyncNow(context.Background(), false); err != nil {
		n.t.Fatalf("sync: %v", err)
	}
	flows, groups := n.p.InstalledState()
	flows = append(flows, pipeline.GatewayFlows(1, pipeline.Gateway{OFPort: gwPort, MAC: gwMAC, IPv4: true,
		NodePortVirtualIPs: []netip.Addr{nodePortVIP}, PodCIDRs: []netip.Prefix{podCIDR}})...)
	for _, pod := range testPods {
		flows = append(flows, pipeline.PodFlows(1, gwMAC, pipeline.Pod{ID: uint64(pod.OFPort), OFPort: pod.OFPort, MAC: pod.MAC, IPs: pod.IPs})...)
	}
	return &Inputs{Flows: flows, Groups: groups, Services: n.p.Services(), Pods: testPods,
		Gateway:       Gateway{Name: "antrea-gw0", OFPort: gwPort, MAC: gwMAC, IPs: []netip.Addr{gatewayIP}},
		NodeAddresses: append(n.p.NodePortAddresses(), nodePortVIP)}
}

type svcOpt func(*v1.Service)

func service(name, clusterIP string, opts ...svcOpt) *v1.Service {
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: metav1.NewTime(fixedNow)},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: clusterIP, ClusterIPs: []string{clusterIP},
			Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}}},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

func nodePort(np int32) svcOpt {
	return func(s *v1.Service) {
		if s.Spec.Type == v1.ServiceTypeClusterIP {
			s.Spec.Type = v1.ServiceTypeNodePort
		}
		s.Spec.Ports[0].NodePort = np
	}
}

func loadBalancer(ip string, mode *v1.LoadBalancerIPMode) svcOpt {
	return func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: ip, IPMode: mode}}
	}
}

func sourceRanges(r ...string) svcOpt {
	return func(s *v1.Service) { s.Spec.LoadBalancerSourceRanges = r }
}

func externalLocal(s *v1.Service) {
	s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
}

func slice(svc string, local []netip.Addr, remote ...netip.Addr) *discovery.EndpointSlice {
	port, proto, name := int32(8080), v1.ProtocolTCP, "http"
	s := &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: svc + "-1", Labels: map[string]string{discovery.LabelServiceName: svc}},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: &name, Port: &port, Protocol: &proto}},
	}
	add := func(ip netip.Addr, node string) {
		ready := true
		s.Endpoints = append(s.Endpoints, discovery.Endpoint{Addresses: []string{ip.String()}, NodeName: &node,
			Conditions: discovery.EndpointConditions{Ready: &ready, Serving: &ready}})
	}
	for _, ip := range local {
		add(ip, nodeName)
	}
	for _, ip := range remote {
		add(ip, "node-b")
	}
	return s
}

// manyRemote returns n endpoint addresses of other nodes (10.20.x.y).
func manyRemote(n int) []netip.Addr {
	out := make([]netip.Addr, n)
	for i := range out {
		out[i] = netip.MustParseAddr(fmt.Sprintf("10.20.%d.%d", i/250, i%250+1))
	}
	return out
}
