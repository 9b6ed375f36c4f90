package proxy

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
)

// TestFamiliesFollowPodCIDRs: without configured families the proxier serves the families of
// the Node's podCIDRs, and re-programs every Service when they change.
func TestFamiliesFollowPodCIDRs(t *testing.T) {
	opts := testOptions()
	opts.Families = model.Families{}
	h := newHarness(t, opts)
	svc := makeService("ns1", "dual", "10.96.0.10", func(s *v1.Service) {
		s.Spec.ClusterIPs = []string{"10.96.0.10", "fd00:96::10"}
		s.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	})
	h.addService(svc)
	h.sync()
	if strings.Contains(h.bridge.Dump(), "ipv6_dst=fd00:96::10") {
		t.Fatal("the IPv6 cluster IP is programmed before the Node says it is dual-stack")
	}
	h.p.OnNodeUpdate(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode},
		Spec: v1.NodeSpec{PodCIDRs: []string{"10.244.1.0/24", "fd00:244:1::/64"}}})
	h.sync()
	dump := h.bridge.Dump()
	if !strings.Contains(dump, "ipv6_dst=fd00:96::10") || !strings.Contains(dump, "nw_dst=10.96.0.10") {
		t.Fatalf("dual-stack podCIDRs: want both cluster IPs programmed:\n%s", dump)
	}
}
