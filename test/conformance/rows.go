package conformance

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// This file enumerates the probe rows of shapes: every address of every probed port, from every
// client that can reach it.

// Nodes is the number of nodes of each sandbox.
const Nodes = 2

// Clients are the probe clients: a pod on each node, each node's host network, the external
// client.
var Clients = []string{"pod@node1", "pod@node2", "host@node1", "host@node2", "external"}

// Row is one address of one Service port probed from one client.
type Row struct {
	Shape *Shape
	Port  Port
	// Target is clusterIP, clusterIP-other (the ClusterIP on OtherPort, which the Service does
	// not define), nodePort@nodeN, lb, externalIP, lb-other and externalIP-other (the
	// LoadBalancer IP and the externalIP on OtherPort), or clusterIP-unallocated (an address of
	// the ServiceCIDR no Service holds, on OtherPort; its Shape is Unallocated's).
	Target string
	// TargetNode is the node index of a nodePort target, -1 otherwise.
	TargetNode int
	Client     string
}

// Key names the row.
func (r Row) Key() string {
	return fmt.Sprintf("%s %s/%s/%d %s <- %s", r.Shape.Name, r.Port.Name, r.Port.Protocol, r.Port.Port, r.Target, r.Client)
}

// OtherPort is a port no shape defines (the generator's ports are 80 and up, one per Service
// port): the clusterIP-other rows probe every shape's ClusterIP on it, over TCP and UDP, and
// the lb-other and externalIP-other rows its LoadBalancer IP and externalIP. The router (the
// nodes' default gateway) owns those addresses and answers on OtherPort: a probe a node does
// not capture is routed there and answered as "outside".
const OtherPort = 8999

// otherPortName is the port name of the rows of OtherPort.
const otherPortName = "other"

// UnallocatedClusterIP is an address of the sandbox's ServiceCIDR (10.96.0.0/16) outside the
// generator's ClusterIPs, which no Service holds: the clusterIP-unallocated rows probe it on
// OtherPort. The router owns it too, so a probe that leaves the node is answered.
var UnallocatedClusterIP = netip.MustParseAddr("10.96.250.250")

// Unallocated is the pseudo-shape of the clusterIP-unallocated rows: no Service, no endpoint.
func Unallocated() *Shape {
	return &Shape{Name: "unallocated", Type: "ClusterIP", ClusterIP: UnallocatedClusterIP}
}

// Rows lists the rows of shapes, then the clusterIP-unallocated rows. SCTP ports are not
// probed: the sandbox's kernel has no SCTP (see docs/conformance.md). ClusterIPs are not probed
// from the external client, which has no route to them.
func Rows(shapes []Shape) []Row {
	var rows []Row
	for i := range shapes {
		s := &shapes[i]
		rows = append(rows, otherPortRows(s, "clusterIP-other", Clients[:4])...)
		if s.Type == "LoadBalancer" {
			rows = append(rows, otherPortRows(s, "lb-other", Clients)...)
		}
		if s.ExternalIP.IsValid() {
			rows = append(rows, otherPortRows(s, "externalIP-other", Clients)...)
		}
		for _, p := range s.Ports {
			if p.Protocol == "SCTP" {
				continue
			}
			add := func(target string, node int, clients []string) {
				for _, c := range clients {
					rows = append(rows, Row{Shape: s, Port: p, Target: target, TargetNode: node, Client: c})
				}
			}
			add("clusterIP", -1, Clients[:4])
			if p.NodePort != 0 {
				for n := 0; n < Nodes; n++ {
					add("nodePort@node"+strconv.Itoa(n+1), n, Clients)
				}
			}
			if s.Type == "LoadBalancer" {
				add("lb", -1, Clients)
			}
			if s.ExternalIP.IsValid() {
				add("externalIP", -1, Clients)
			}
		}
	}
	return append(rows, otherPortRows(Unallocated(), "clusterIP-unallocated", Clients[:4])...)
}

// otherPortRows are the rows of target on OtherPort, over TCP and UDP, from clients.
func otherPortRows(s *Shape, target string, clients []string) []Row {
	var rows []Row
	for _, proto := range []string{"TCP", "UDP"} {
		p := Port{Name: otherPortName, Protocol: proto, Port: OtherPort}
		for _, c := range clients {
			rows = append(rows, Row{Shape: s, Port: p, Target: target, TargetNode: -1, Client: c})
		}
	}
	return rows
}

// clientNode is the node index of a client, -1 for the external one.
func clientNode(c string) int {
	switch c {
	case "pod@node1", "host@node1":
		return 0
	case "pod@node2", "host@node2":
		return 1
	}
	return -1
}

// Attrs are the row's attributes the rules of docs/conformance.md select on: addr (the target,
// with lb-VIP or lb-Proxy for a LoadBalancer IP, lb-VIP-other or lb-Proxy-other for it on
// OtherPort), client, type, proto, etp, itp, affinity,
// lbmode, ranges (the first source range), clienteps and targeteps (what the client's and the
// NodePort's node have: ready, serving or none; - when not a node), own (true when the client's
// own node handles the address: not another node's NodePort, not the external client), hints
// (all, partial or -), td (trafficDistribution, "" for none) and readyeps (whether any endpoint
// is ready).
func (r Row) Attrs() map[string]string {
	s := r.Shape
	a := map[string]string{
		"addr": r.Target, "client": r.Client, "type": s.Type, "proto": r.Port.Protocol,
		"etp": policy(s.ETPLocal), "itp": policy(s.ITPLocal), "affinity": strconv.FormatBool(s.Affinity),
		"lbmode": "-", "ranges": "-", "clienteps": "-", "targeteps": "-", "td": s.TrafficDistribution,
		"own": strconv.FormatBool(r.ownNode()), "hints": s.hints(), "readyeps": strconv.FormatBool(s.endpointsOn(0) == "ready" || s.endpointsOn(1) == "ready"),
	}
	switch r.Target {
	case "lb":
		a["addr"] = "lb-" + string(s.LBMode)
	case "lb-other":
		a["addr"] = "lb-" + string(s.LBMode) + "-other"
	}
	if s.Type == "LoadBalancer" {
		a["lbmode"] = string(s.LBMode)
		if len(s.SourceRanges) > 0 {
			a["ranges"] = s.SourceRanges[0]
		}
	}
	if n := clientNode(r.Client); n >= 0 {
		a["clienteps"] = s.endpointsOn(n)
	}
	if r.TargetNode >= 0 {
		a["targeteps"] = s.endpointsOn(r.TargetNode)
	}
	return a
}

// ownNode reports whether the client's own node handles the row's address: every address
// but another node's NodePort, for a pod or the host; never for the external client.
func (r Row) ownNode() bool {
	n := clientNode(r.Client)
	if n < 0 {
		return false
	}
	return r.TargetNode < 0 || r.TargetNode == n
}

// hints is "all" when the shape asks for topology-aware routing and every endpoint has a zone
// hint, "partial" when some have none, "-" without trafficDistribution.
func (s *Shape) hints() string {
	if s.TrafficDistribution == "" {
		return "-"
	}
	for _, ep := range s.Endpoints {
		if ep.Zone == "" {
			return "partial"
		}
	}
	return "all"
}

func policy(local bool) string {
	if local {
		return "Local"
	}
	return "Cluster"
}

// endpointsOn says what the shape has on node n: "ready" (a ready endpoint), "serving" (only
// serving-terminating ones) or "none".
func (s *Shape) endpointsOn(n int) string {
	out := "none"
	for _, ep := range s.Endpoints {
		if BackendNode(ep.Backend) != n {
			continue
		}
		switch ep.State {
		case Ready:
			return "ready"
		case ServingTerminating:
			out = "serving"
		}
	}
	return out
}

// EndpointState is the state of a backend among the shape's endpoints ("absent" when it is not
// one).
func (s *Shape) EndpointState(backend string) string {
	for _, ep := range s.Endpoints {
		if ep.Backend == backend {
			return string(ep.State)
		}
	}
	return "absent"
}

// containsToken reports whether text has tok with no digit or dot right before or after it
// (10.96.100.1 is not in "10.96.100.10", nor 3010 in "30100").
func containsToken(text, tok string) bool {
	edge := func(b byte) bool { return (b >= '0' && b <= '9') || b == '.' }
	for i := 0; ; {
		j := strings.Index(text[i:], tok)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(tok)
		if (start == 0 || !edge(text[start-1])) && (end == len(text) || !edge(text[end])) {
			return true
		}
		i = start + 1
	}
}
