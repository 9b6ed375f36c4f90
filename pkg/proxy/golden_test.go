package proxy

import (
	"flag"
	"testing"

	"net/netip"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

var update = flag.Bool("update", false, "rewrite the expected dumps of the golden data files in testdata/golden/")

// goldenDir holds one golden data file per Service shape (see golden_data_test.go);
// goldenRateLimitsDir those that turn the rate limits on, which need meters in a real OVS.
const (
	goldenDir           = "testdata/golden"
	goldenRateLimitsDir = "testdata/golden/ratelimits"
)

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

// goldenCase is one Service shape with its endpoints.
type goldenCase struct {
	name   string
	svc    *v1.Service
	slices func(svc *v1.Service) []*discovery.EndpointSlice
	opts   func(*Options)
	// cidrs are the ServiceCIDRs set (SetServiceCIDRs) before the sync.
	cidrs []netip.Prefix
	// node is this node; nil is goldenNode.
	node *v1.Node
}

// twoEndpointSlices gives every port one endpoint on this node and one on another.
func twoEndpointSlices(svc *v1.Service) []*discovery.EndpointSlice {
	var out []*discovery.EndpointSlice
	for _, p := range svc.Spec.Ports {
		out = append(out, makeSlice(svc.Namespace, svc.Name, svc.Name+"-"+p.Name, 8000+p.Port, p.Protocol, p.Name, twoEndpoints()...))
	}
	return out
}

// goldenCases are the cases of the golden data files of goldenDir. A file that does not decode
// is a broken checkout: it panics (TestGoldenDumps reports it as a failure first).
func goldenCases() []goldenCase {
	files, err := readGoldenFiles(goldenDir)
	if err != nil {
		panic(err)
	}
	cases := make([]goldenCase, 0, len(files))
	for i := range files {
		cases = append(cases, files[i].goldenCase())
	}
	return cases
}

// TestGoldenDumps installs the case of each golden data file and compares the whole bridge
// (groups and flows, canonical text with table and register names) with its expected dump.
func TestGoldenDumps(t *testing.T) {
	checkGoldenDir(t, goldenDir)
}

// TestGoldenRateLimits: with the rate limits on, a Service without endpoints rejects through
// RejectMeter (the client address's shard into RejectShard, one metered flow per shard), and a
// Service with session affinity learns at most AffinityFlowsPerService flows, writing the
// learn's result for the counting pass. (The agent installs the meters before the first sync.)
func TestGoldenRateLimits(t *testing.T) {
	checkGoldenDir(t, goldenRateLimitsDir)
}

func checkGoldenDir(t *testing.T, dir string) {
	for _, gf := range loadGoldenFiles(t, dir) {
		tc := gf.goldenCase()
		t.Run(tc.name, func(t *testing.T) {
			h := installGoldenCase(t, tc)
			gf.check(t, h.bridge.DumpNamed(pipeline.Names()))
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
	node := tc.node
	if node == nil {
		node = goldenNode()
	}
	h.p.OnNodeUpdate(node)
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

// goldenNode is this node of the cases that do not give one: in zone-a, with an IPv4 and an
// IPv6 address.
func goldenNode() *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: testNode, Labels: map[string]string{v1.LabelTopologyZone: "zone-a"}},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{
			{Type: v1.NodeInternalIP, Address: "192.168.77.10"}, {Type: v1.NodeInternalIP, Address: "fd00:77::10"},
		}},
	}
}
