package tracer

import (
	"context"
	"net"
	"net/netip"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent/servicetrace/servicetracetest"
	"github.com/antrea-proxy/antrea-proxy/pkg/model"
	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/oftrace"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/openflowtest"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy"
)

// The node under test: node-a, podCIDR 10.10.1.0/24, gateway on OpenFlow port 2. Local pods:
// a client on port 10 and two endpoint pods on ports 11 and 12. Another node's pod (remote
// endpoint) is 10.10.2.7. External clients come in through the gateway.
const (
	nodeName   = "node-a"
	gwPort     = 2
	clientPort = 10
	ep1Port    = 11
	ep2Port    = 12
	flowRound  = 1
)

var (
	nodeIP        = netip.MustParseAddr("192.168.77.10")
	nodePortVIP   = netip.MustParseAddr("169.254.0.252") // the host DNATs NodePorts to it
	serviceVIP    = netip.MustParseAddr("169.254.0.253") // SNAT source of external connections
	podCIDR       = netip.MustParsePrefix("10.10.1.0/24")
	clientPodIP   = netip.MustParseAddr("10.10.1.5")
	ep1IP         = netip.MustParseAddr("10.10.1.6")
	ep2IP         = netip.MustParseAddr("10.10.1.7")
	remoteEPIP    = netip.MustParseAddr("10.10.2.7")
	externalIP    = netip.MustParseAddr("192.168.77.99")
	gwMAC         = net.HardwareAddr{0x0a, 0, 0, 0, 0, 0x01}
	podMACs       = map[uint32]net.HardwareAddr{clientPort: {0x0a, 0, 0, 0, 0, 0x10}, ep1Port: {0x0a, 0, 0, 0, 0, 0x11}, ep2Port: {0x0a, 0, 0, 0, 0, 0x12}}
	podIPs        = map[uint32]netip.Addr{clientPort: clientPodIP, ep1Port: ep1IP, ep2Port: ep2IP}
	fixedNow      = servicetracetest.Now() // the Services' creation time
	nodeAddresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: nodeIP.String()}, {Type: v1.NodeHostName, Address: nodeName}}
)

// newProxier is the one place that builds a proxier: adapt it when proxy.New changes.
func newProxier(t *testing.T, proxyLBIPs bool, b *openflowtest.FakeBridge) *proxy.Proxier {
	t.Helper()
	opts := proxy.Options{
		NodeName:             nodeName,
		ProxyLoadBalancerIPs: proxyLBIPs,
		Families:             model.Families{IPv4: true},
		GatewayOFPort:        gwPort,
		GatewayIPv4:          serviceVIP,
		Clock:                clocktesting.NewFakeClock(fixedNow),
	}
	opts.Round = 1
	p, err := proxy.New(opts, b)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// env is one node: the proxier and the flows of the other writers on one fake bridge.
type env struct {
	t      *testing.T
	p      *proxy.Proxier
	bridge *openflowtest.FakeBridge
}

func newEnv(t *testing.T, proxyLBIPs bool) *env {
	t.Helper()
	b := openflowtest.NewFakeBridge()
	e := &env{t: t, p: newProxier(t, proxyLBIPs, b), bridge: b}
	e.p.OnNodeUpdate(&v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName},
		Spec:       v1.NodeSpec{PodCIDR: podCIDR.String(), PodCIDRs: []string{podCIDR.String()}},
		Status:     v1.NodeStatus{Addresses: nodeAddresses},
	})
	e.installNodeFlows()
	return e
}

// installNodeFlows adds what the node data path (gateway) and the CNI server (pods) install.
func (e *env) installNodeFlows() {
	e.t.Helper()
	flows := pipeline.GatewayFlows(flowRound, pipeline.Gateway{OFPort: gwPort, MAC: gwMAC, IPv4: true,
		NodePortVirtualIPs: []netip.Addr{nodePortVIP}, PodCIDRs: []netip.Prefix{podCIDR}})
	for port, ip := range podIPs {
		flows = append(flows, pipeline.PodFlows(flowRound, gwMAC, pipeline.Pod{ID: uint64(port), OFPort: port, MAC: podMACs[port], IPs: []netip.Addr{ip}})...)
	}
	ops := make([]of.Op, len(flows))
	for i := range flows {
		ops[i] = of.Op{Kind: of.AddFlow, Flow: &flows[i]}
	}
	if err := e.bridge.Apply(context.Background(), ops); err != nil {
		e.t.Fatalf("installing gateway and pod flows: %v", err)
	}
}

func (e *env) add(objs ...any) {
	for _, o := range objs {
		switch o := o.(type) {
		case *v1.Service:
			e.p.Tracker().Services.OnServiceAdd(o)
		case *discovery.EndpointSlice:
			e.p.Tracker().Endpoints.OnEndpointSliceAdd(o)
		default:
			e.t.Fatalf("add: %T", o)
		}
	}
}

// tracer syncs the proxier and returns a tracer over the bridge's flows and groups.
func (e *env) tracer() *oftrace.Tracer {
	e.t.Helper()
	if err := e.p.SyncNow(context.Background(), false); err != nil {
		e.t.Fatalf("sync: %v", err)
	}
	flows, err := e.bridge.DumpFlows(context.Background(), of.FlowFilter{})
	if err != nil {
		e.t.Fatal(err)
	}
	groups, err := e.bridge.DumpGroups(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	tr, err := oftrace.New(flows, groups, oftrace.Options{})
	if err != nil {
		e.t.Fatal(err)
	}
	return tr
}

// Packets.

func podMAC(port uint32) net.HardwareAddr { return podMACs[port] }

// fromPod is a TCP packet from the local pod on port to dst:dport.
func fromPod(port uint32, sport uint16, dst netip.Addr, dport uint16) oftrace.Packet {
	return oftrace.Packet{InPort: port, EthSrc: podMAC(port), EthDst: gwMAC, EthType: of.EthTypeIP, Proto: of.ProtoTCP,
		Src: podIPs[port], Dst: dst, SrcPort: sport, DstPort: dport}
}

// fromGateway is a TCP packet that the host sends into OVS through the gateway.
func fromGateway(src netip.Addr, sport uint16, dst netip.Addr, dport uint16) oftrace.Packet {
	return oftrace.Packet{InPort: gwPort, EthSrc: gwMAC, EthType: of.EthTypeIP, Proto: of.ProtoTCP,
		Src: src, Dst: dst, SrcPort: sport, DstPort: dport}
}

// Objects.

// The Services of the trace tests are servicetracetest's: ClusterIP ns/<name>, port http 80/TCP
// to 8080, created at fixedNow (servicetracetest.Now).
type svcOpt = servicetracetest.ServiceOption

func service(name, clusterIP string, opts ...svcOpt) *v1.Service {
	return servicetracetest.Service(name, clusterIP, opts...)
}

func nodePort(np int32) svcOpt { return servicetracetest.NodePort(np) }

func loadBalancer(ingress ...v1.LoadBalancerIngress) svcOpt {
	return func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Status.LoadBalancer.Ingress = ingress
	}
}

func externalLocal(s *v1.Service) {
	s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
}

func internalLocal(s *v1.Service) {
	p := v1.ServiceInternalTrafficPolicyLocal
	s.Spec.InternalTrafficPolicy = &p
}

type endpoint struct {
	ip   netip.Addr
	node string
}

func slice(svc string, eps ...endpoint) *discovery.EndpointSlice {
	port, proto, name := int32(8080), v1.ProtocolTCP, "http"
	s := &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: svc + "-1", Labels: map[string]string{discovery.LabelServiceName: svc}},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: &name, Port: &port, Protocol: &proto}},
	}
	for _, ep := range eps {
		ready, node := true, ep.node
		s.Endpoints = append(s.Endpoints, discovery.Endpoint{Addresses: []string{ep.ip.String()}, NodeName: &node,
			Conditions: discovery.EndpointConditions{Ready: &ready, Serving: &ready}})
	}
	return s
}

func local(ip netip.Addr) endpoint  { return endpoint{ip: ip, node: nodeName} }
func remote(ip netip.Addr) endpoint { return endpoint{ip: ip, node: "node-b"} }
