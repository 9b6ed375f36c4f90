package proxy

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"net/netip"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// checkGolden compares got with testdata/<name>.golden (rewritten with -update).
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run go test -update to create it): %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s: canonical dump differs from %s (-want +got):\n%s", name, path, diff)
	}
}

func twoEndpoints() []ep {
	return []ep{{ip: "10.10.1.5", node: testNode, ready: true}, {ip: "10.10.2.6", node: "node-b", ready: true}}
}

func withETPLocal(s *v1.Service) { s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal }

func withITPLocal(s *v1.Service) {
	p := v1.ServiceInternalTrafficPolicyLocal
	s.Spec.InternalTrafficPolicy = &p
}

func withAffinity(seconds int32) svcOpt {
	return func(s *v1.Service) {
		s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: &seconds}}
	}
}

func withSourceRanges(r ...string) svcOpt {
	return func(s *v1.Service) { s.Spec.LoadBalancerSourceRanges = r }
}

func withIPv6(clusterIP string) svcOpt {
	return func(s *v1.Service) {
		s.Spec.ClusterIP, s.Spec.ClusterIPs = clusterIP, []string{clusterIP}
		s.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol}
	}
}

// goldenCase is one Service shape with its endpoints.
type goldenCase struct {
	name   string
	svc    *v1.Service
	slices func(svc *v1.Service) []*discovery.EndpointSlice
	opts   func(*Options)
	// cidrs are the ServiceCIDRs set (SetServiceCIDRs) before the sync.
	cidrs []netip.Prefix
}

// twoEndpointSlices gives every port one endpoint on this node and one on another.
func twoEndpointSlices(svc *v1.Service) []*discovery.EndpointSlice {
	var out []*discovery.EndpointSlice
	for _, p := range svc.Spec.Ports {
		out = append(out, makeSlice(svc.Namespace, svc.Name, svc.Name+"-"+p.Name, 8000+p.Port, p.Protocol, p.Name, twoEndpoints()...))
	}
	return out
}

func goldenCases() []goldenCase {
	tcp, udp, sctp := v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP
	return []goldenCase{
		{name: "clusterip", svc: makeService("ns1", "web", "10.96.0.10")},
		{name: "nodeport", svc: makeService("ns1", "web", "10.96.0.10", withNodePort(30080))},
		{name: "lb-vip", svc: makeService("ns1", "web", "10.96.0.10", withLB(30080, vip("172.18.0.100")))},
		{name: "lb-proxy", svc: makeService("ns1", "web", "10.96.0.10", withLB(30080, proxyMode("172.18.0.101")))},
		{name: "externalip", svc: makeService("ns1", "web", "10.96.0.10", withExternalIPs("203.0.113.7"))},
		{name: "multiport", svc: makeService("ns1", "web", "10.96.0.10", withPorts(
			v1.ServicePort{Name: "http", Port: 80, Protocol: tcp},
			v1.ServicePort{Name: "dns", Port: 53, Protocol: udp}))},
		{name: "udp", svc: makeService("ns1", "dns", "10.96.0.53", withPorts(v1.ServicePort{Name: "dns", Port: 53, Protocol: udp}))},
		{name: "sctp", svc: makeService("ns1", "sig", "10.96.0.36", withPorts(v1.ServicePort{Name: "sig", Port: 3868, Protocol: sctp}))},
		{name: "no-endpoints", svc: makeService("ns1", "empty", "10.96.0.99"),
			slices: func(*v1.Service) []*discovery.EndpointSlice { return nil }},
		{name: "etp-local", svc: makeService("ns1", "web", "10.96.0.10", withLB(30080, vip("172.18.0.100")), withETPLocal)},
		{name: "itp-local", svc: makeService("ns1", "web", "10.96.0.10", withITPLocal)},
		{name: "affinity", svc: makeService("ns1", "web", "10.96.0.10", withNodePort(30080), withAffinity(600))},
		{name: "affinity-long-timeout", svc: makeService("ns1", "web", "10.96.0.10", withAffinity(86400))},
		{name: "source-ranges", svc: makeService("ns1", "web", "10.96.0.10",
			withLB(30080, vip("172.18.0.100")), withSourceRanges("192.0.2.0/24", "198.51.100.7/32"))},
		{name: "terminating-fallback", svc: makeService("ns1", "web", "10.96.0.10"),
			slices: func(svc *v1.Service) []*discovery.EndpointSlice {
				s := makeSlice("ns1", "web", "web-1", 8080, tcp, "http", ep{ip: "10.10.1.5", node: testNode}, ep{ip: "10.10.2.6", node: "node-b"})
				serving := true
				s.Endpoints[1].Conditions.Serving = &serving // serving and terminating
				return []*discovery.EndpointSlice{s}
			}},
		{name: "ipv6", svc: makeService("ns1", "web6", "fd00:96::10", withIPv6("fd00:96::10"), withNodePort(30080)),
			slices: func(svc *v1.Service) []*discovery.EndpointSlice {
				s := makeSlice("ns1", "web6", "web6-1", 8080, tcp, "http", ep{ip: "fd00:10:1::5", node: testNode, ready: true})
				s.AddressType = discovery.AddressTypeIPv6
				return []*discovery.EndpointSlice{s}
			},
			opts: func(o *Options) { o.Families.IPv6 = true; o.GatewayIPv6 = netip.MustParseAddr("fd00:10::1") }},
		{name: "service-cidrs", svc: makeService("ns1", "web", "10.96.0.10"),
			cidrs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16"), netip.MustParsePrefix("fd00:96::/112")},
			opts: func(o *Options) {
				o.Families.IPv6, o.GatewayIPv6 = true, netip.MustParseAddr("fd00:10::1")
				o.Skip = model.SkipSet{IPs: sets.New(netip.MustParseAddr("10.96.0.11"))}
			}},
		{name: "topology-zone-hints", svc: makeService("ns1", "web", "10.96.0.10"),
			slices: func(svc *v1.Service) []*discovery.EndpointSlice {
				s := makeSlice("ns1", "web", "web-1", 8080, tcp, "http", twoEndpoints()...)
				s.Endpoints[0].Hints = &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: "zone-a"}}}
				s.Endpoints[1].Hints = &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: "zone-b"}}}
				return []*discovery.EndpointSlice{s}
			}},
		// One endpoint more than a group holds: two second-level groups under group 1.
		{name: "split-groups", svc: makeService("ns1", "web", "10.96.0.10"),
			slices: func(*v1.Service) []*discovery.EndpointSlice {
				return largeEndpointSlices("ns1", "web", pipeline.MaxGroupBuckets+1)
			}},
	}
}

// TestGoldenDumps installs one Service of each shape and compares the whole bridge (groups and
// flows, canonical text) with a golden file.
func TestGoldenDumps(t *testing.T) {
	for _, tc := range goldenCases() {
		t.Run(tc.name, func(t *testing.T) {
			h := installGoldenCase(t, tc)
			checkGolden(t, tc.name, h.bridge.Dump())
		})
	}
}

func installGoldenCase(t *testing.T, tc goldenCase) *harness {
	t.Helper()
	opts := testOptions()
	if tc.opts != nil {
		tc.opts(&opts)
	}
	return installGoldenCaseOn(t, tc, newHarness(t, opts))
}

// installGoldenCaseOn feeds the case to h's proxier and syncs it.
func installGoldenCaseOn(t *testing.T, tc goldenCase, h *harness) *harness {
	t.Helper()
	h.p.OnNodeUpdate(&v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: testNode, Labels: map[string]string{v1.LabelTopologyZone: "zone-a"}},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{
			{Type: v1.NodeInternalIP, Address: "192.168.77.10"}, {Type: v1.NodeInternalIP, Address: "fd00:77::10"},
		}},
	})
	if tc.cidrs != nil {
		h.p.SetServiceCIDRs(tc.cidrs)
	}
	h.addService(tc.svc)
	slices := twoEndpointSlices
	if tc.slices != nil {
		slices = tc.slices
	}
	for _, s := range slices(tc.svc) {
		h.addSlice(s)
	}
	h.sync()
	return h
}
