package agent

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/antrea-proxy/antrea-proxy/pkg/config"
	"github.com/antrea-proxy/antrea-proxy/pkg/lbapi"
)

// served is what antrea-controller serves by default: its class and class-less Services.
var served = lbServed{Class: config.DefaultLoadBalancerClass, Classless: true}

// lbService returns a Service of type typ with the announcing-node annotation (when not "")
// and, as antrea-controller writes it, a status ingress with ipMode VIP for each address the
// annotation names.
func lbService(name, typ, annotation string) *v1.Service {
	s := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: v1.ServiceSpec{Type: v1.ServiceType(typ)}}
	if annotation != "" {
		s.Annotations = map[string]string{"antrea-proxy.io/announcing-node": annotation}
		vip := v1.LoadBalancerIPModeVIP
		as, _ := lbapi.ParseAnnouncingNodes(annotation)
		for _, a := range as {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, v1.LoadBalancerIngress{IP: a.Addr.String(), IPMode: &vip})
		}
	}
	return s
}

func withClass(s *v1.Service, class string) *v1.Service {
	s.Spec.LoadBalancerClass = &class
	return s
}

func TestAnnouncedIPs(t *testing.T) {
	ip := netip.MustParseAddr
	svcs := []*v1.Service{
		lbService("a", "LoadBalancer", "172.18.0.5=node-1,fd00::5=node-1"),
		lbService("b", "LoadBalancer", "172.18.0.6=node-2"),
		lbService("c", "LoadBalancer", "172.18.0.7=node-1,garbage,172.18.0.5=node-1"),
		lbService("d", "ClusterIP", "172.18.0.8=node-1"),
		lbService("e", "LoadBalancer", ""),
		lbService("f", "LoadBalancer", "172.18.0.9=node-1"),
	}
	// 172.18.0.9 is assigned to node-1 but not programmed (e.g. proxyLoadBalancerIPs=false).
	programmed := []netip.Addr{ip("172.18.0.5"), ip("172.18.0.6"), ip("172.18.0.7"), ip("172.18.0.8"), ip("fd00::5")}
	require.Equal(t, []netip.Addr{ip("172.18.0.5"), ip("172.18.0.7"), ip("fd00::5")}, announcedIPs("node-1", served, svcs, programmed))
	require.Equal(t, []netip.Addr{ip("172.18.0.6")}, announcedIPs("node-2", served, svcs, programmed))
	require.Empty(t, announcedIPs("node-3", served, svcs, programmed))
	require.Empty(t, announcedIPs("node-1", served, svcs, nil))
}

// TestAnnouncedIPsOnlyAllocated checks that only addresses antrea-controller allocated from a VIP
// pool to a Service it serves are announced, whatever the announcing-node annotation says.
func TestAnnouncedIPsOnlyAllocated(t *testing.T) {
	router, vip := netip.MustParseAddr("172.18.0.1"), netip.MustParseAddr("172.18.0.5")
	programmed := []netip.Addr{router, vip}
	proxyMode, vipMode := v1.LoadBalancerIPModeProxy, v1.LoadBalancerIPModeVIP
	ingress := func(s *v1.Service, ip string, mode *v1.LoadBalancerIPMode) *v1.Service {
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: ip, IPMode: mode}}
		return s
	}
	annotated := func(v string) *v1.Service {
		return &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s", Annotations: map[string]string{"antrea-proxy.io/announcing-node": v}},
			Spec:       v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer},
		}
	}
	for _, tc := range []struct {
		name  string
		scope lbServed
		svc   *v1.Service
		want  []netip.Addr
	}{
		{"allocated, ipMode VIP", served, ingress(annotated("172.18.0.5=node-1"), "172.18.0.5", &vipMode), []netip.Addr{vip}},
		{"allocated, ipMode unset", served, ingress(annotated("172.18.0.5=node-1"), "172.18.0.5", nil), []netip.Addr{vip}},
		{"forged annotation, no status", served, annotated("172.18.0.1=node-1"), nil},
		{"forged annotation for an address outside the status", served,
			ingress(annotated("172.18.0.1=node-1,172.18.0.5=node-1"), "172.18.0.5", &vipMode), []netip.Addr{vip}},
		{"externalIP equal to the address", served, func() *v1.Service {
			s := annotated("172.18.0.1=node-1")
			s.Spec.ExternalIPs = []string{"172.18.0.1"}
			return s
		}(), nil},
		{"ipMode Proxy", served, ingress(annotated("172.18.0.5=node-1"), "172.18.0.5", &proxyMode), nil},
		{"our class", served, withClass(ingress(annotated("172.18.0.5=node-1"), "172.18.0.5", &vipMode), config.DefaultLoadBalancerClass), []netip.Addr{vip}},
		{"other class", served, withClass(ingress(annotated("172.18.0.5=node-1"), "172.18.0.5", &vipMode), "example.com/other"), nil},
		{"class-less, served", served, ingress(annotated("172.18.0.5=node-1"), "172.18.0.5", &vipMode), []netip.Addr{vip}},
		{"class-less, not served", lbServed{Class: config.DefaultLoadBalancerClass},
			ingress(annotated("172.18.0.5=node-1"), "172.18.0.5", &vipMode), nil},
		{"configured class", lbServed{Class: "example.com/lb"},
			withClass(ingress(annotated("172.18.0.5=node-1"), "172.18.0.5", &vipMode), "example.com/lb"), []netip.Addr{vip}},
		{"default class when another is configured", lbServed{Class: "example.com/lb"},
			withClass(ingress(annotated("172.18.0.5=node-1"), "172.18.0.5", &vipMode), config.DefaultLoadBalancerClass), nil},
		{"NodePort with status", served, func() *v1.Service {
			s := ingress(annotated("172.18.0.5=node-1"), "172.18.0.5", &vipMode)
			s.Spec.Type = v1.ServiceTypeNodePort
			return s
		}(), nil},
		{"malformed annotation", served, ingress(annotated("172.18.0.5"), "172.18.0.5", &vipMode), nil},
		{"annotation names another node", served, ingress(annotated("172.18.0.5=node-2"), "172.18.0.5", &vipMode), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := announcedIPs("node-1", tc.scope, []*v1.Service{tc.svc}, programmed)
			require.Equal(t, tc.want, got)
		})
	}

	// A forged annotation on one Service cannot borrow another Service's status.
	owner := ingress(annotated("172.18.0.5=node-2"), "172.18.0.5", &vipMode)
	forger := annotated("172.18.0.5=node-1")
	require.Empty(t, announcedIPs("node-1", served, []*v1.Service{owner, forger}, programmed))
}

// TestUplinkCache: the announcer looks its uplink up on the first pass, when forced (a Service
// or Node changed, the last pass failed) and once it is uplinkRefresh old, not on every pass.
func TestUplinkCache(t *testing.T) {
	var c uplinkCache
	lookups := 0
	names := []string{"eth0", "eth1", "eth2", "eth3"}
	lookup := func() string { lookups++; return names[lookups-1] }
	t0 := time.Unix(1000, 0)
	steps := []struct {
		force   bool
		after   time.Duration
		want    string
		lookups int
	}{
		{false, 0, "eth0", 1},
		{false, announceInterval, "eth0", 1},
		{false, uplinkRefresh - time.Millisecond, "eth0", 1},
		{true, uplinkRefresh - time.Millisecond, "eth1", 2},
		{false, uplinkRefresh - time.Millisecond + announceInterval, "eth1", 2},
		{false, 2*uplinkRefresh - time.Millisecond, "eth2", 3},
	}
	for i, s := range steps {
		if got := c.get(s.force, t0.Add(s.after), lookup); got != s.want || lookups != s.lookups {
			t.Fatalf("step %d (force %v, +%v): %q after %d lookups, want %q after %d", i, s.force, s.after, got, lookups, s.want, s.lookups)
		}
	}
}

// TestAnnouncerIdle: the announcer stops ticking only when it wants no address, holds none and
// its last pass succeeded; anything to assert, withdraw or retry keeps the ticks.
func TestAnnouncerIdle(t *testing.T) {
	a := []netip.Addr{netip.MustParseAddr("172.18.0.5")}
	for _, tc := range []struct {
		name            string
		want, announced []netip.Addr
		lastErr         string
		idle            bool
	}{
		{"nothing to do", nil, nil, "", true},
		{"an address to announce", a, nil, "", false},
		{"an address announced, no longer wanted", nil, a, "", false},
		{"announcing", a, a, "", false},
		{"the last pass failed", nil, nil, "no uplink", false},
	} {
		if got := announcerIdle(tc.want, tc.announced, tc.lastErr); got != tc.idle {
			t.Errorf("%s: idle %v, want %v", tc.name, got, tc.idle)
		}
	}
}
