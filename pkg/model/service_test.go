package model

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

var netipCmp = cmp.Options{
	cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
	cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

var svcNN = types.NamespacedName{Namespace: "ns", Name: "svc"}

func spn(port string, proto Protocol) ServicePortName {
	return ServicePortName{NamespacedName: svcNN, Port: port, Protocol: proto}
}

func newService(mutate func(*v1.Service)) *v1.Service {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "svc"},
		Spec: v1.ServiceSpec{
			Type:       v1.ServiceTypeClusterIP,
			ClusterIP:  "10.96.0.10",
			ClusterIPs: []string{"10.96.0.10"},
			Ports:      []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}},
		},
	}
	if mutate != nil {
		mutate(svc)
	}
	return svc
}

func ptr[T any](v T) *T { return &v }

var v4Opts = ConvertOptions{ProxyLoadBalancerIPs: true, Served: Families{IPv4: true}}

func TestServicePortsFromService(t *testing.T) {
	tests := []struct {
		name string
		svc  *v1.Service
		opts ConvertOptions
		want []ServicePort
	}{
		{
			name: "ClusterIP",
			svc:  newService(nil),
			opts: v4Opts,
			want: []ServicePort{{Name: spn("http", TCP), ClusterIPs: addrs("10.96.0.10"), Port: 80, Protocol: TCP}},
		},
		{
			name: "ClusterIP ignores nodePort, LB ingress and source ranges; clusterIP fallback",
			svc: newService(func(s *v1.Service) {
				s.Spec.ClusterIPs = nil
				s.Spec.Ports[0].NodePort = 30080
				s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/8"}
				s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "192.0.2.1"}}
				s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
			}),
			opts: v4Opts,
			want: []ServicePort{{Name: spn("http", TCP), ClusterIPs: addrs("10.96.0.10"), Port: 80, Protocol: TCP}},
		},
		{
			name: "NodePort with eTP Local, iTP Local, affinity default timeout, UDP",
			svc: newService(func(s *v1.Service) {
				s.Spec.Type = v1.ServiceTypeNodePort
				s.Spec.Ports = []v1.ServicePort{{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP, NodePort: 30053}}
				s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
				s.Spec.InternalTrafficPolicy = ptr(v1.ServiceInternalTrafficPolicyLocal)
				s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
				s.Spec.HealthCheckNodePort = 31000 // not LB: ignored
			}),
			opts: v4Opts,
			want: []ServicePort{{
				Name: spn("dns", UDP), ClusterIPs: addrs("10.96.0.10"), Port: 53, Protocol: UDP, NodePort: 30053,
				ExternalPolicyLocal: true, InternalPolicyLocal: true, StickyMaxAgeSeconds: 10800,
			}},
		},
		{
			name: "LoadBalancer with ingress decisions, source ranges, health check, affinity timeout",
			svc: newService(func(s *v1.Service) {
				s.Spec.Type = v1.ServiceTypeLoadBalancer
				s.Spec.Ports[0].NodePort = 30080
				s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
				s.Spec.HealthCheckNodePort = 31000
				s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
				s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr(int32(60))}}
				s.Spec.LoadBalancerSourceRanges = []string{" 10.0.0.0/8 ", "bogus", "192.168.1.7/24", "fd00::/8"}
				s.Spec.TrafficDistribution = ptr("PreferClose")
				s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{
					{IP: "192.0.2.1", IPMode: modePtr("VIP")},
					{IP: "192.0.2.2", IPMode: modePtr("Proxy")},
					{IP: "192.0.2.3"},
					{Hostname: "lb.example.com"},
					{IP: "2001:db8::1"},
				}
			}),
			opts: v4Opts,
			want: []ServicePort{{
				Name: spn("http", TCP), ClusterIPs: addrs("10.96.0.10"), Port: 80, Protocol: TCP, NodePort: 30080,
				LoadBalancerIngress: []LBIngress{
					{IP: netip.MustParseAddr("192.0.2.1"), IPMode: IPModeVIP, Decision: Decision{true, ReasonProgrammedVIP}},
					{IP: netip.MustParseAddr("192.0.2.2"), IPMode: IPModeProxy, Decision: Decision{false, ReasonSkippedProxy}},
					{IP: netip.MustParseAddr("192.0.2.3"), Decision: Decision{true, ReasonProgrammedUnset}},
					{Hostname: "lb.example.com", Decision: Decision{false, ReasonSkippedHostname}},
					{IP: netip.MustParseAddr("2001:db8::1"), Decision: Decision{false, ReasonSkippedFamily}},
				},
				SourceRanges:        prefixes("10.0.0.0/8", "192.168.1.0/24"),
				ExternalPolicyLocal: true,
				StickyMaxAgeSeconds: 60,
				HealthCheckNodePort: 31000,
				TrafficDistribution: "PreferClose",
			}},
		},
		{
			name: "LoadBalancer with proxyLoadBalancerIPs=false and no node ports",
			svc: newService(func(s *v1.Service) {
				s.Spec.Type = v1.ServiceTypeLoadBalancer
				s.Spec.AllocateLoadBalancerNodePorts = ptr(false)
				s.Spec.HealthCheckNodePort = 31000 // eTP Cluster: ignored
				s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "192.0.2.1", IPMode: modePtr("VIP")}}
			}),
			opts: ConvertOptions{ProxyLoadBalancerIPs: false, Served: Families{IPv4: true}},
			want: []ServicePort{{
				Name: spn("http", TCP), ClusterIPs: addrs("10.96.0.10"), Port: 80, Protocol: TCP,
				LoadBalancerIngress: []LBIngress{
					{IP: netip.MustParseAddr("192.0.2.1"), IPMode: IPModeVIP, Decision: Decision{false, ReasonSkippedDisabled}},
				},
			}},
		},
		{
			name: "ExternalIPs: invalid, duplicate and non-served dropped; eTP Local honoured",
			svc: newService(func(s *v1.Service) {
				s.Spec.ExternalIPs = []string{"203.0.113.1", "nope", "2001:db8::5", "203.0.113.1", "203.0.113.2"}
				s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
			}),
			opts: v4Opts,
			want: []ServicePort{{
				Name: spn("http", TCP), ClusterIPs: addrs("10.96.0.10"), Port: 80, Protocol: TCP,
				ExternalIPs: addrs("203.0.113.1", "203.0.113.2"), ExternalPolicyLocal: true,
			}},
		},
		{
			name: "multi-port with SCTP, default protocol and malformed ports dropped",
			svc: newService(func(s *v1.Service) {
				s.Spec.Ports = []v1.ServicePort{
					{Name: "a", Port: 80, Protocol: v1.ProtocolTCP},
					{Name: "b", Port: 80, Protocol: v1.ProtocolUDP},
					{Name: "c", Port: 9000, Protocol: v1.ProtocolSCTP},
					{Name: "d", Port: 8080}, // protocol defaults to TCP
					{Name: "zero", Port: 0},
					{Name: "big", Port: 70000},
					{Name: "http", Port: 81, Protocol: "HTTP"},
				}
			}),
			opts: v4Opts,
			want: []ServicePort{
				{Name: spn("a", TCP), ClusterIPs: addrs("10.96.0.10"), Port: 80, Protocol: TCP},
				{Name: spn("b", UDP), ClusterIPs: addrs("10.96.0.10"), Port: 80, Protocol: UDP},
				{Name: spn("c", SCTP), ClusterIPs: addrs("10.96.0.10"), Port: 9000, Protocol: SCTP},
				{Name: spn("d", TCP), ClusterIPs: addrs("10.96.0.10"), Port: 8080, Protocol: TCP},
			},
		},
		{
			name: "dual-stack Service on dual-stack proxier",
			svc: newService(func(s *v1.Service) {
				s.Spec.ClusterIPs = []string{"10.96.0.10", "fd00:10:96::a"}
				s.Spec.ExternalIPs = []string{"203.0.113.1", "2001:db8::5"}
			}),
			opts: ConvertOptions{Served: DualStack},
			want: []ServicePort{{
				Name: spn("http", TCP), ClusterIPs: addrs("10.96.0.10", "fd00:10:96::a"), Port: 80, Protocol: TCP,
				ExternalIPs: addrs("203.0.113.1", "2001:db8::5"),
			}},
		},
		{
			name: "dual-stack Service on IPv6-only proxier",
			svc: newService(func(s *v1.Service) {
				s.Spec.ClusterIPs = []string{"10.96.0.10", "fd00:10:96::a"}
			}),
			opts: ConvertOptions{Served: Families{IPv6: true}},
			want: []ServicePort{{Name: spn("http", TCP), ClusterIPs: addrs("fd00:10:96::a"), Port: 80, Protocol: TCP}},
		},
		{
			name: "IPv6-only Service on IPv4-only proxier is not handled",
			svc:  newService(func(s *v1.Service) { s.Spec.ClusterIPs = []string{"fd00:10:96::a"} }),
			opts: v4Opts,
			want: nil,
		},
		{
			name: "unnamed single port",
			svc:  newService(func(s *v1.Service) { s.Spec.Ports[0].Name = "" }),
			opts: v4Opts,
			want: []ServicePort{{Name: spn("", TCP), ClusterIPs: addrs("10.96.0.10"), Port: 80, Protocol: TCP}},
		},
		{name: "nil Service", svc: nil, opts: v4Opts, want: nil},
		{name: "headless", svc: newService(func(s *v1.Service) { s.Spec.ClusterIPs = []string{"None"} }), opts: v4Opts, want: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ServicePortsFromService(tc.svc, tc.opts)
			if diff := cmp.Diff(tc.want, got, netipCmp); diff != "" {
				t.Errorf("ServicePorts (-want +got):\n%s", diff)
			}
		})
	}
}

// Both a VIP and a Proxy ingress on one Service: only the VIP one is programmed, on every port.
func TestServicePortsMixedIPModes(t *testing.T) {
	svc := newService(func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: "https", Port: 443, Protocol: v1.ProtocolTCP})
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{
			{IP: "192.0.2.1", IPMode: modePtr("Proxy")},
			{IP: "192.0.2.2", IPMode: modePtr("VIP")},
		}
	})
	ports := ServicePortsFromService(svc, v4Opts)
	require.Len(t, ports, 2)
	for _, p := range ports {
		var programmed []netip.Addr
		for _, ing := range p.LoadBalancerIngress {
			if ing.Decision.Program {
				programmed = append(programmed, ing.IP)
			}
		}
		require.Equal(t, addrs("192.0.2.2"), programmed, "port %s", p.Name)
	}
	// Each ServicePort owns its slices: mutating one does not affect the other.
	ports[0].ClusterIPs[0] = netip.MustParseAddr("1.1.1.1")
	ports[0].LoadBalancerIngress[0].Hostname = "mutated"
	require.Equal(t, addrs("10.96.0.10"), ports[1].ClusterIPs)
	require.Empty(t, ports[1].LoadBalancerIngress[0].Hostname)
}

func TestShouldSkipService(t *testing.T) {
	skip := SkipSet{Names: sets.New(types.NamespacedName{Namespace: "kube-system", Name: "kube-dns"}),
		IPs: sets.New(netip.MustParseAddr("10.96.0.99"), netip.MustParseAddr("fd00::99"))}

	tests := []struct {
		name      string
		svc       *v1.Service
		proxyName string
		wantSkip  bool
		reason    string // substring
	}{
		{"plain ClusterIP", newService(nil), "", false, ""},
		{"nil", nil, "", true, SkipReasonNil},
		{"ExternalName", newService(func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeExternalName
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "", nil
			s.Spec.ExternalName = "example.com"
		}), "", true, SkipReasonExternalName},
		{"headless clusterIP", newService(func(s *v1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = "None", nil }), "", true, SkipReasonHeadless},
		{"headless clusterIPs", newService(func(s *v1.Service) { s.Spec.ClusterIPs = []string{"None"} }), "", true, SkipReasonHeadless},
		{"no cluster IP", newService(func(s *v1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = "", nil }), "", true, SkipReasonNoClusterIP},
		{"service.kubernetes.io/headless label", newService(func(s *v1.Service) {
			s.Labels = map[string]string{v1.IsHeadlessService: ""}
		}), "", true, "service.kubernetes.io/headless is set"},
		{"headless label wins over a matching proxy name", newService(func(s *v1.Service) {
			s.Labels = map[string]string{v1.IsHeadlessService: "", LabelServiceProxyName: "antrea"}
		}), "antrea", true, "service.kubernetes.io/headless"},
		{"unparseable cluster IP", newService(func(s *v1.Service) { s.Spec.ClusterIPs = []string{"10.96.0.300"} }), "", true, SkipReasonNoClusterIP},
		{"proxy-name label, no proxy name configured", newService(func(s *v1.Service) {
			s.Labels = map[string]string{LabelServiceProxyName: "other"}
		}), "", true, `service-proxy-name="other" is set`},
		{"empty proxy-name label still skips", newService(func(s *v1.Service) {
			s.Labels = map[string]string{LabelServiceProxyName: ""}
		}), "", true, "service-proxy-name"},
		{"proxy-name label matches", newService(func(s *v1.Service) {
			s.Labels = map[string]string{LabelServiceProxyName: "antrea"}
		}), "antrea", false, ""},
		{"proxy-name label differs", newService(func(s *v1.Service) {
			s.Labels = map[string]string{LabelServiceProxyName: "other"}
		}), "antrea", true, `does not match "antrea"`},
		{"proxy-name label missing", newService(nil), "antrea", true, "is missing"},
		{"skipServices by name", newService(func(s *v1.Service) { s.Namespace, s.Name = "kube-system", "kube-dns" }), "", true, SkipReasonSkipName},
		{"same name other namespace", newService(func(s *v1.Service) { s.Name = "kube-dns" }), "", false, ""},
		{"skipServices by secondary cluster IP", newService(func(s *v1.Service) {
			s.Spec.ClusterIPs = []string{"10.96.0.1", "fd00::99"}
		}), "", true, SkipReasonSkipIP},
		{"skipServices by legacy-format cluster IP", newService(func(s *v1.Service) {
			s.Spec.ClusterIPs = []string{"010.096.000.099"}
		}), "", true, SkipReasonSkipIP},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			gotSkip, reason := ShouldSkipService(tc.svc, tc.proxyName, skip)
			require.Equal(t, tc.wantSkip, gotSkip, "reason %q", reason)
			if tc.wantSkip {
				require.Contains(t, reason, tc.reason)
			} else {
				require.Empty(t, reason)
			}
		})
	}
	// A zero SkipSet skips nothing extra.
	gotSkip, _ := ShouldSkipService(newService(nil), "", SkipSet{})
	require.False(t, gotSkip)
}
