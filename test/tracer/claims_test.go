package tracer

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/oftrace"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy"
)

// The contested tuple of TestClaimsMatrix: the victim's ClusterIP, or its external address
// (an LB IP or ExternalIP), port 80/TCP. The victim's endpoint is ep1, the attacker's ep2.
var (
	victimClusterIP = netip.MustParseAddr("10.96.0.30")
	attackerCluster = netip.MustParseAddr("10.96.0.31")
	victimExternal  = netip.MustParseAddr("192.168.77.50")
)

// claimShape is one Service shape of the matrix: it builds the Service (named name, created
// at created) claiming addr:80 the shape's way.
type claimShape struct {
	name  string
	build func(name string, addr netip.Addr, created time.Time) *v1.Service
	// cluster is set for shapes that claim addr as their ClusterIP.
	cluster bool
	// client is the packet to addr:80 that the shape serves (a pod's, or an external one).
	client func(addr netip.Addr, sport uint16) oftrace.Packet
}

func createdAt(t time.Time) svcOpt {
	return func(s *v1.Service) { s.CreationTimestamp = metav1.NewTime(t) }
}

func affinity(s *v1.Service) { s.Spec.SessionAffinity = v1.ServiceAffinityClientIP }

func externalIPs(ips ...netip.Addr) svcOpt {
	return func(s *v1.Service) {
		for _, ip := range ips {
			s.Spec.ExternalIPs = append(s.Spec.ExternalIPs, ip.String())
		}
	}
}

func podClient(addr netip.Addr, sport uint16) oftrace.Packet {
	return fromPod(clientPort, sport, addr, 80)
}
func extClient(addr netip.Addr, sport uint16) oftrace.Packet {
	return fromGateway(externalIP, sport, addr, 80)
}

var victims = []claimShape{
	{name: "ClusterIP", cluster: true, client: podClient, build: func(n string, a netip.Addr, c time.Time) *v1.Service {
		return service(n, a.String(), createdAt(c))
	}},
	{name: "ClusterIP+affinity", cluster: true, client: podClient, build: func(n string, a netip.Addr, c time.Time) *v1.Service {
		return service(n, a.String(), createdAt(c), affinity)
	}},
	{name: "LB+eTP=Local", client: extClient, build: func(n string, a netip.Addr, c time.Time) *v1.Service {
		return service(n, "10.96.0.40", createdAt(c), nodePort(30040), loadBalancer(v1.LoadBalancerIngress{IP: a.String()}), externalLocal)
	}},
	{name: "ExternalIP+eTP=Local", client: extClient, build: func(n string, a netip.Addr, c time.Time) *v1.Service {
		return service(n, "10.96.0.40", createdAt(c), externalIPs(a), externalLocal)
	}},
	{name: "LB+sourceRanges", client: extClient, build: func(n string, a netip.Addr, c time.Time) *v1.Service {
		return service(n, "10.96.0.40", createdAt(c), nodePort(30040), loadBalancer(v1.LoadBalancerIngress{IP: a.String()}),
			sourceRanges("192.168.77.0/24"))
	}},
}

var attackers = []claimShape{
	{name: "ExternalIP", build: func(n string, a netip.Addr, c time.Time) *v1.Service {
		return service(n, attackerCluster.String(), createdAt(c), externalIPs(a))
	}},
	{name: "ExternalIP+eTP=Local", build: func(n string, a netip.Addr, c time.Time) *v1.Service {
		return service(n, attackerCluster.String(), createdAt(c), externalIPs(a), externalLocal)
	}},
	{name: "ExternalIP+affinity", build: func(n string, a netip.Addr, c time.Time) *v1.Service {
		return service(n, attackerCluster.String(), createdAt(c), externalIPs(a), affinity)
	}},
	{name: "LB+sourceRanges", build: func(n string, a netip.Addr, c time.Time) *v1.Service {
		return service(n, attackerCluster.String(), createdAt(c), nodePort(30041), loadBalancer(v1.LoadBalancerIngress{IP: a.String()}),
			sourceRanges("0.0.0.0/0"))
	}},
	{name: "LB", build: func(n string, a netip.Addr, c time.Time) *v1.Service {
		return service(n, attackerCluster.String(), createdAt(c), nodePort(30041), loadBalancer(v1.LoadBalancerIngress{IP: a.String()}))
	}},
}

// expectOnly checks that every path of p is delivered DNATed to want:8080, and that some is.
func expectOnly(t *testing.T, traces []*oftrace.Trace, want netip.Addr) {
	t.Helper()
	if len(traces) == 0 {
		t.Fatal("no path")
	}
	for _, tr := range traces {
		o, ok := tr.Single()
		if !ok || o.Kind != oftrace.Output || o.Packet.Dst != want || o.Packet.DstPort != 8080 {
			t.Errorf("want only %s:8080, got:\n%s", want, tr)
		}
	}
}

// TestClaimsMatrix pins one owner per (family, address, protocol, port) across flow variants:
// for every victim shape and every attacker shape claiming the victim's tuple later, a packet
// to the tuple reaches only the victim's endpoint, the attacker has a FlowConflict problem
// naming the victim, and, once the victim is deleted, the attacker's flows serve the tuple. A
// ClusterIP victim created after the attacker still wins.
func TestClaimsMatrix(t *testing.T) {
	t0 := fixedNow.Add(-time.Hour)
	for _, v := range victims {
		for _, a := range attackers {
			orders := []bool{false}
			if v.cluster {
				orders = append(orders, true)
			}
			for _, attackerFirst := range orders {
				name := fmt.Sprintf("%s/%s", v.name, a.name)
				if attackerFirst {
					name += "/attacker-older"
				}
				t.Run(name, func(t *testing.T) { runClaim(t, v, a, attackerFirst, t0) })
			}
		}
	}
}

func runClaim(t *testing.T, v, a claimShape, attackerFirst bool, t0 time.Time) {
	addr := victimExternal
	if v.cluster {
		addr = victimClusterIP
	}
	vt, at := t0, t0.Add(time.Minute)
	if attackerFirst {
		vt, at = at, vt
	}
	e := newEnv(t, true)
	victim, attacker := v.build("victim", addr, vt), a.build("attacker", addr, at)
	e.add(attacker, slice("attacker", local(ep2IP)))
	e.tracer() // the attacker is installed first
	e.add(victim, slice("victim", local(ep1IP)))
	tr := e.tracer()
	expectOnly(t, traceAll(t, tr, v.client(addr, 41000)), ep1IP)
	if v.client(addr, 0).InPort != clientPort {
		// An external victim's tuple is not served to pods by the attacker either.
		for _, tr := range traceAll(t, tr, podClient(addr, 41001)) {
			if o, ok := tr.Single(); ok && o.Packet.Dst == ep2IP {
				t.Errorf("a pod's packet to %s:80 reached the attacker:\n%s", addr, tr)
			}
		}
	}
	if pr := problemOf(e.p, "attacker"); pr == nil || pr.Reason != proxy.ProblemFlowConflict ||
		!strings.Contains(pr.Message, "ns/victim") {
		t.Errorf("attacker: want a FlowConflict problem naming ns/victim, got %+v", pr)
	}
	if pr := problemOf(e.p, "victim"); pr != nil {
		t.Errorf("victim: want no problem, got %+v", pr)
	}
	e.p.Tracker().Services.OnServiceDelete(victim)
	tr = e.tracer()
	expectOnly(t, traceAll(t, tr, extClient(addr, 41002)), ep2IP)
	if pr := problemOf(e.p, "attacker"); pr != nil {
		t.Errorf("attacker after the victim left: want no problem, got %+v", pr)
	}
}

func problemOf(p *proxy.Proxier, name string) *proxy.ServiceProblem {
	for _, s := range p.Services() {
		if s.Name == (types.NamespacedName{Namespace: "ns", Name: name}) {
			return s.Problem
		}
	}
	return nil
}
