package proxy

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
)

func dualStackOptions() Options {
	opts := testOptions()
	opts.Families = model.DualStack
	opts.GatewayIPv6 = netip.MustParseAddr("fd00:10::1")
	return opts
}

func dualStack(v6 string) svcOpt {
	return func(s *v1.Service) {
		s.Spec.ClusterIPs = append(s.Spec.ClusterIPs, v6)
		s.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	}
}

// portExternalIPs returns the ExternalIPs the status lists over every port of st.
func portExternalIPs(st *ServiceStatus) []string {
	var out []string
	for _, ps := range st.Ports {
		for _, ip := range ps.Port.ExternalIPs {
			if !slices.Contains(out, ip.String()) {
				out = append(out, ip.String())
			}
		}
	}
	return out
}

// TestRefusedAddresses: ExternalIPs and LB IPs no Service may have (loopback, the agent's IPv6
// NodePort virtual IP, the Service virtual IP) are never programmed, the status lists only
// what is, the Service shows AddressRefused naming each address with one event, and the rest
// of the Service keeps working.
func TestRefusedAddresses(t *testing.T) {
	events := &eventLog{}
	opts := dualStackOptions()
	opts.Events = events
	h := newHarness(t, opts)
	svc := makeService("ns1", "web", "10.96.0.10", dualStack("fd00:96::10"),
		withExternalIPs("127.0.0.1", "192.0.2.5", "fc01::aabb:ccdd:eefe"),
		withLB(30080, vip("fc01::aabb:ccdd:eeff"), vip("172.18.0.100")))
	h.addService(svc)
	h.addSlice(makeSlice("ns1", "web", "web-1", 8080, v1.ProtocolTCP, "http", ep{ip: "10.10.1.5", node: testNode, ready: true}))
	h.sync()
	dump := h.bridge.Dump()
	for _, bad := range []string{"127.0.0.1", "fc01::aabb:ccdd:eefe", "fc01::aabb:ccdd:eeff"} {
		if strings.Contains(dump, bad) {
			t.Errorf("%s is programmed:\n%s", bad, dump)
		}
	}
	for _, good := range []string{"nw_dst=192.0.2.5,tp_dst=80", "nw_dst=172.18.0.100,tp_dst=80", "nw_dst=10.96.0.10,tp_dst=80"} {
		if !strings.Contains(dump, good) {
			t.Errorf("%s is missing:\n%s", good, dump)
		}
	}
	st := statusOf(h, "ns1", "web")
	if got := portExternalIPs(st); !slices.Equal(got, []string{"192.0.2.5"}) {
		t.Errorf("status ExternalIPs %v, want only the programmed one", got)
	}
	for _, ps := range st.Ports {
		for _, ing := range ps.Port.LoadBalancerIngress {
			want := ing.IP.String() == "172.18.0.100"
			if ing.Decision.Program != want || (!want && ing.Decision.Reason != model.ReasonSkippedRefused) {
				t.Errorf("LB ingress %s: decision %+v", ing.IP, ing.Decision)
			}
		}
	}
	pr := st.Problem
	if pr == nil || pr.Reason != ProblemAddressRefused {
		t.Fatalf("want AddressRefused, got %+v", pr)
	}
	for _, want := range []string{"externalIP 127.0.0.1 is refused: a loopback address",
		"externalIP fc01::aabb:ccdd:eefe is refused: the agent's NodePort virtual IP",
		"load balancer IP fc01::aabb:ccdd:eeff is refused: the agent's Service virtual IP"} {
		if !strings.Contains(pr.Message, want) {
			t.Errorf("problem %q does not say %q", pr.Message, want)
		}
	}
	h.sync()
	if got := events.events(); !slices.Equal(got, []string{"ns1/web AddressRefused"}) {
		t.Errorf("events %v, want one", got)
	}
	// Fixing the Service clears the problem.
	fixed := svc.DeepCopy()
	fixed.Spec.ExternalIPs = []string{"192.0.2.5"}
	fixed.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{vip("172.18.0.100")}
	h.updateService(svc, fixed)
	h.sync()
	if st := statusOf(h, "ns1", "web"); st.Problem != nil {
		t.Errorf("fixed: want no problem, got %+v", st.Problem)
	}
}

// TestExternalIPCIDRs: with antreaProxy.externalIPCIDRs set, an ExternalIP outside them is
// refused; LB IPs are not restricted.
func TestExternalIPCIDRs(t *testing.T) {
	opts := testOptions()
	opts.ExternalIPCIDRs = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}
	h := newHarness(t, opts)
	h.addService(makeService("ns1", "web", "10.96.0.10", withExternalIPs("192.0.2.5", "198.51.100.5"),
		withLB(30080, vip("203.0.113.9"))))
	h.sync()
	st := statusOf(h, "ns1", "web")
	if got := portExternalIPs(st); !slices.Equal(got, []string{"192.0.2.5"}) {
		t.Errorf("status ExternalIPs %v", got)
	}
	if st.Problem == nil || st.Problem.Message != "externalIP 198.51.100.5 is refused: "+model.RefusedOutsideExternals {
		t.Errorf("problem %+v", st.Problem)
	}
	if !strings.Contains(h.bridge.Dump(), "nw_dst=203.0.113.9,tp_dst=80") {
		t.Errorf("the LB IP must stay programmed")
	}
}

// TestServiceCIDRs: setting the ServiceCIDRs refuses an ExternalIP inside them that is not the
// Service's own ClusterIP, moves PortsGeneration, is reported by ServiceCIDRs and adds the drop
// flows; clearing them brings the ExternalIP back.
func TestServiceCIDRs(t *testing.T) {
	h := newHarness(t, testOptions())
	h.addService(makeService("ns1", "web", "10.96.0.10", withExternalIPs("10.96.0.77", "10.96.0.10")))
	h.sync()
	if got := portExternalIPs(statusOf(h, "ns1", "web")); !slices.Equal(got, []string{"10.96.0.77", "10.96.0.10"}) {
		t.Fatalf("no ServiceCIDR known: ExternalIPs %v", got)
	}
	gen := h.p.PortsGeneration()
	cidr := netip.MustParsePrefix("10.96.0.0/16")
	h.p.SetServiceCIDRs([]netip.Prefix{cidr})
	h.sync()
	st := statusOf(h, "ns1", "web")
	if got := portExternalIPs(st); !slices.Equal(got, []string{"10.96.0.10"}) {
		t.Errorf("ExternalIPs %v, want only the Service's own ClusterIP", got)
	}
	if st.Problem == nil || st.Problem.Reason != ProblemAddressRefused ||
		!strings.Contains(st.Problem.Message, "externalIP 10.96.0.77 is refused: inside ServiceCIDR 10.96.0.0/16") {
		t.Errorf("problem %+v", st.Problem)
	}
	if got := h.p.ServiceCIDRs(); !slices.Equal(got, []netip.Prefix{cidr}) {
		t.Errorf("ServiceCIDRs %v", got)
	}
	if h.p.PortsGeneration() == gen {
		t.Errorf("PortsGeneration did not move")
	}
	dump := h.bridge.Dump()
	if !strings.Contains(dump, "priority=90,ct_state=+new+trk,ip,nw_dst=10.96.0.0/16 actions=drop") || strings.Contains(dump, "nw_dst=10.96.0.77") {
		t.Errorf("flows:\n%s", dump)
	}
	h.p.SetServiceCIDRs(nil)
	h.sync()
	if got := portExternalIPs(statusOf(h, "ns1", "web")); len(got) != 2 || statusOf(h, "ns1", "web").Problem != nil {
		t.Errorf("CIDRs cleared: ExternalIPs %v, problem %+v", got, statusOf(h, "ns1", "web").Problem)
	}
	if strings.Contains(h.bridge.Dump(), "priority=90") {
		t.Errorf("the drop flow stays")
	}
}

// TestClaimsIncremental: a loser is recomputed when its winner changes (partial sync), an idle
// full resync afterwards computes nothing, and a newer claimer leaves the owner alone.
func TestClaimsIncremental(t *testing.T) {
	events := &eventLog{}
	opts := testOptions()
	opts.Events = events
	h := newHarness(t, opts)
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	old := makeService("ns1", "old", "10.96.0.1", withExternalIPs("192.0.2.1"))
	old.CreationTimestamp = t0
	young := makeService("ns1", "young", "10.96.0.2", withExternalIPs("192.0.2.1"))
	young.CreationTimestamp = metav1.NewTime(t0.Add(time.Hour))
	h.addService(old)
	h.sync()
	computed := map[types.NamespacedName]int{}
	h.p.onCompute = func(nn types.NamespacedName) { computed[nn]++ }
	h.addService(young)
	h.sync()
	if computed[types.NamespacedName{Namespace: "ns1", Name: "old"}] != 0 {
		t.Errorf("a newer claimer recomputed the owner: %v", computed)
	}
	if pr := statusOf(h, "ns1", "young").Problem; pr == nil || pr.Message != "externalIP 192.0.2.1:80/TCP is claimed by ns1/old" {
		t.Fatalf("young: %+v", pr)
	}
	moved := old.DeepCopy()
	moved.Spec.ExternalIPs = []string{"192.0.2.2"}
	h.updateService(old, moved)
	h.sync()
	if st := statusOf(h, "ns1", "young"); st.Problem != nil || !slices.Equal(portExternalIPs(st), []string{"192.0.2.1"}) {
		t.Fatalf("young after the owner moved: %+v", st)
	}
	clear(computed)
	if err := h.p.SyncNow(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	if len(computed) != 0 {
		t.Errorf("idle full resync computed %v", computed)
	}
	if got := events.events(); !slices.Equal(got, []string{"ns1/young FlowConflict"}) {
		t.Errorf("events %v", got)
	}
}

// TestServiceCIDRsBeforeFirstSync: ServiceCIDRs known before the first sync (the agent waits for
// them) decide the first sync's refusals.
func TestServiceCIDRsBeforeFirstSync(t *testing.T) {
	h := newHarness(t, testOptions())
	h.p.SetServiceCIDRs([]netip.Prefix{netip.MustParsePrefix("10.96.0.0/16")})
	h.addService(makeService("ns1", "web", "10.96.0.10", withExternalIPs("10.96.0.77", "192.0.2.5")))
	h.sync()
	st := statusOf(h, "ns1", "web")
	if got := portExternalIPs(st); !slices.Equal(got, []string{"192.0.2.5"}) || st.Problem == nil {
		t.Errorf("ExternalIPs %v, problem %+v", got, st.Problem)
	}
	if strings.Contains(h.bridge.Dump(), "nw_dst=10.96.0.77") {
		t.Errorf("10.96.0.77 is programmed")
	}
}
