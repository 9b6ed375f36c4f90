// Package conformance is the differential suite of antrea-proxy against kube-proxy: a seeded
// generator of random Service shapes (this file), the reduction of what a probe saw to an
// outcome class (outcome.go), the comparison of two implementations' rows and the list of known
// differences it is checked against (compare.go, rules.go; the list itself is the table in
// docs/conformance.md). The end-to-end test that runs the shapes in two sandboxes, one of
// antrea-proxy nodes and one of kube-proxy nodes, is conformance_test.go (build tag e2e).
package conformance

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
)

// Backends are the echo pods every sandbox runs for the shapes' endpoints: two on each node.
var Backends = []Backend{{"b1a", 0}, {"b1b", 0}, {"b2a", 1}, {"b2b", 1}}

// Backend is one echo pod: its name and the index of its node.
type Backend struct {
	Name string
	Node int
}

// EndpointState is an endpoint's conditions in its EndpointSlice.
type EndpointState string

// The endpoint states a shape uses (ready, serving and terminating conditions).
const (
	Ready              EndpointState = "ready"               // ready, serving, not terminating
	ServingTerminating EndpointState = "serving-terminating" // not ready, serving, terminating
	Terminating        EndpointState = "terminating"         // not ready, not serving, terminating
	NotReady           EndpointState = "not-ready"           // not ready, not serving, not terminating
)

// Endpoint is one backend in a shape's EndpointSlice.
type Endpoint struct {
	Backend string
	State   EndpointState
	// Zone is the endpoint's zone hint (hints.forZones), "" for none; with PreferSameNode the
	// endpoint also has a node hint (hints.forNodes) for its own node, and none without Zone.
	Zone string
}

// Port is one Service port. NodePort is 0 for a ClusterIP Service.
type Port struct {
	Name     string
	Protocol string // TCP, UDP or SCTP
	Port     int32
	NodePort int32
}

// LBMode is the ipMode of a LoadBalancer Service's ingress.
type LBMode string

// The ingress modes.
const (
	LBVIP   LBMode = "VIP"
	LBProxy LBMode = "Proxy"
)

// Shape is one generated Service with its endpoints. Every address in it is fixed by the
// generator, so that both sandboxes get exactly the same objects.
type Shape struct {
	Name      string
	Type      string // ClusterIP, NodePort or LoadBalancer
	ClusterIP netip.Addr
	Ports     []Port
	ETPLocal  bool // externalTrafficPolicy: Local (NodePort and LoadBalancer only)
	ITPLocal  bool // internalTrafficPolicy: Local
	Affinity  bool // sessionAffinity: ClientIP
	// ExternalIP is the Service's one externalIP, if valid.
	ExternalIP netip.Addr
	// LBIP and LBMode are the LoadBalancer ingress (LoadBalancer only).
	LBIP   netip.Addr
	LBMode LBMode
	// ProxyTarget is the node index whose NodePort the Proxy-mode load balancer relays to.
	ProxyTarget int
	// HealthCheckNodePort is spec.healthCheckNodePort of an eTP=Local LoadBalancer (set here,
	// so that the API server does not pick one that a later shape's NodePort needs).
	HealthCheckNodePort int32
	// SourceRanges is spec.loadBalancerSourceRanges (LoadBalancer only).
	SourceRanges []string
	// TrafficDistribution is spec.trafficDistribution ("" for none): PreferClose or
	// PreferSameZone (the endpoints carry zone hints) or PreferSameNode (zone and node hints).
	TrafficDistribution string
	Endpoints           []Endpoint
}

// Address ranges of the generated objects (inside the sandbox's Service CIDR 10.96.0.0/16 and
// the underlay's load balancer ranges, see test/e2e/framework/network.go).
var (
	clusterIPBase  = netip.MustParseAddr("10.96.100.10")
	vipBase        = netip.MustParseAddr("172.18.0.10")  // VIP-mode LB IPs: .10-.127
	externalIPBase = netip.MustParseAddr("172.18.0.128") // externalIPs: .128-.254
	proxyBase      = netip.MustParseAddr("172.18.1.10")  // Proxy-mode LB IPs
	firstNodePort  = int32(30100)
	// healthCheckBase + shape index is an eTP=Local LoadBalancer's healthCheckNodePort.
	healthCheckBase = int32(32000)
)

// Zones of the two nodes (framework node1, node2).
var Zones = []string{"zone-a", "zone-b"}

// sourceRangeChoices are the loadBalancerSourceRanges a shape picks from: the external client
// only, the pods only, the whole underlay (nodes, client, router), and nobody in the sandbox.
var sourceRangeChoices = [][]string{
	{"192.168.77.100/32"},
	{"10.244.0.0/16"},
	{"192.168.77.0/24"},
	{"203.0.113.0/24"},
}

// Generate returns n shapes from seed; the same seed and n give the same shapes.
func Generate(seed uint64, n int) []Shape {
	g := &generator{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), nextNodePort: firstNodePort,
		clusterIP: clusterIPBase, vip: vipBase, ext: externalIPBase, proxy: proxyBase}
	out := make([]Shape, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, g.shape(i))
	}
	return out
}

type generator struct {
	r                           *rand.Rand
	nextNodePort                int32
	clusterIP, vip, ext, proxy  netip.Addr
	vipUsed, extUsed, proxyUsed int
}

// Range sizes: VIP .10-.127, externalIPs .128-.254, Proxy .10-.254.
const (
	maxVIPs    = 118
	maxExtIPs  = 127
	maxProxies = 245
)

func (g *generator) chance(p float64) bool { return g.r.Float64() < p }

func (g *generator) shape(i int) Shape {
	s := Shape{Name: fmt.Sprintf("s%03d", i), ClusterIP: g.clusterIP}
	g.clusterIP = g.clusterIP.Next()
	s.Type = []string{"ClusterIP", "NodePort", "LoadBalancer"}[g.r.IntN(3)]
	s.Ports = g.ports(s.Type != "ClusterIP")
	if s.Type != "ClusterIP" {
		s.ETPLocal = g.chance(0.4)
	}
	s.ITPLocal = g.chance(0.25)
	s.Affinity = g.chance(0.2)
	if g.chance(0.2) && g.extUsed < maxExtIPs {
		s.ExternalIP, g.ext, g.extUsed = g.ext, g.ext.Next(), g.extUsed+1
	}
	if s.Type == "LoadBalancer" {
		g.loadBalancer(&s)
	}
	if s.Type == "LoadBalancer" && s.ETPLocal {
		s.HealthCheckNodePort = healthCheckBase + int32(i)
	}
	s.Endpoints = g.endpoints()
	if g.chance(0.2) {
		s.TrafficDistribution = []string{"PreferClose", "PreferSameZone", "PreferSameNode"}[g.r.IntN(3)]
		for j := range s.Endpoints {
			// Mostly each endpoint's own zone (and node); sometimes one endpoint without a
			// hint, which makes the proxies ignore the hints of the whole Service.
			s.Endpoints[j].Zone = Zones[BackendNode(s.Endpoints[j].Backend)]
			if g.chance(0.1) {
				s.Endpoints[j].Zone = ""
			}
		}
	}
	return s
}

// loadBalancer picks the ingress of a LoadBalancer shape: VIP or Proxy mode, falling back to
// the other range when one is used up, and to a NodePort Service when both are.
func (g *generator) loadBalancer(s *Shape) {
	proxy := g.chance(0.4)
	switch {
	case (proxy || g.vipUsed >= maxVIPs) && g.proxyUsed < maxProxies:
		s.LBMode, s.LBIP, g.proxy, g.proxyUsed = LBProxy, g.proxy, g.proxy.Next(), g.proxyUsed+1
		s.ProxyTarget = g.r.IntN(2)
	case g.vipUsed < maxVIPs:
		s.LBMode, s.LBIP, g.vip, g.vipUsed = LBVIP, g.vip, g.vip.Next(), g.vipUsed+1
	default:
		s.Type = "NodePort"
		return
	}
	if g.chance(0.3) {
		s.SourceRanges = sourceRangeChoices[g.r.IntN(len(sourceRangeChoices))]
	}
}

// ports picks one to three ports, of distinct numbers and names; SCTP ports are generated
// but not probed (see docs/conformance.md).
func (g *generator) ports(nodePorts bool) []Port {
	n := 1 + g.r.IntN(3)
	out := make([]Port, 0, n)
	for j := 0; j < n; j++ {
		proto := "TCP"
		switch x := g.r.IntN(10); {
		case x >= 9:
			proto = "SCTP"
		case x >= 6:
			proto = "UDP"
		}
		p := Port{Name: fmt.Sprintf("p%d", j), Protocol: proto, Port: int32(80 + j)}
		if nodePorts {
			p.NodePort = g.nextNodePort
			g.nextNodePort++
		}
		out = append(out, p)
	}
	return out
}

// endpoints picks a subset of the backends, each in a random state (mostly ready); sometimes
// none at all.
func (g *generator) endpoints() []Endpoint {
	if g.chance(0.1) {
		return nil
	}
	var out []Endpoint
	for _, b := range Backends {
		if !g.chance(0.6) {
			continue
		}
		st := Ready
		switch x := g.r.IntN(10); {
		case x == 9:
			st = NotReady
		case x == 8:
			st = Terminating
		case x >= 6:
			st = ServingTerminating
		}
		out = append(out, Endpoint{Backend: b.Name, State: st})
	}
	return out
}

// BackendNode is the node index of a backend, -1 for an unknown name.
func BackendNode(name string) int {
	for _, b := range Backends {
		if b.Name == name {
			return b.Node
		}
	}
	return -1
}
