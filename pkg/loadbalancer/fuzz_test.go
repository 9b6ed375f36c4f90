package loadbalancer

import (
	"encoding/json"
	"net/netip"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/antrea-proxy/antrea-proxy/pkg/lbapi"
)

// checkPlainAddr fails unless a is valid, unmapped and zone-free.
func checkPlainAddr(t *testing.T, what string, a netip.Addr) {
	t.Helper()
	if !a.IsValid() || a.Is4In6() || a.Zone() != "" {
		t.Fatalf("%s: %v is not a plain IP address", what, a)
	}
}

// FuzzRequest checks the conversion of a Service (JSON from the fuzzer, seeded with real ones)
// and its annotations into an allocation request: it never panics, wants only plain,
// distinct addresses, asks for one or two families (one for SingleStack), one port key per
// spec port, and reports every malformed address as an unmet loadBalancerIP feature.
func FuzzRequest(f *testing.F) {
	for _, svc := range []*v1.Service{
		lbService("a"),
		lbService("b", withAnn(lbapi.AnnotationLoadBalancerIPs, "10.0.10.5, fd00:10::5"), withPool("vip"), withAnn(lbapi.AnnotationAllowSharedIP, "k"),
			dualStack(v1.IPFamilyPolicyRequireDualStack)),
		lbService("c", func(s *v1.Service) { s.Spec.LoadBalancerIP = "10.0.10.5" }, withAnn(lbapi.AnnotationLoadBalancerIPs, "10.0.10.5,bad")),
		lbService("d", func(s *v1.Service) { s.Spec.IPFamilies, s.Spec.ClusterIP = nil, "fd00::1" }),
	} {
		b, err := json.Marshal(svc)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var svc v1.Service
		if json.Unmarshal(data, &svc) != nil {
			return
		}
		req, bad := request(&svc)
		for i, a := range req.Wanted {
			checkPlainAddr(t, "wanted", a)
			if slices.Contains(req.Wanted[:i], a) {
				t.Fatalf("wanted %v twice: %v", a, req.Wanted)
			}
		}
		single := svc.Spec.IPFamilyPolicy == nil || *svc.Spec.IPFamilyPolicy == v1.IPFamilyPolicySingleStack
		if n := len(req.Families); n == 0 || (single && n != 1) {
			t.Fatalf("families %v for ipFamilies %v policy %v", req.Families, svc.Spec.IPFamilies, svc.Spec.IPFamilyPolicy)
		}
		if len(req.Ports) != len(svc.Spec.Ports) {
			t.Fatalf("%d port keys for %d ports", len(req.Ports), len(svc.Spec.Ports))
		}
		_, annErr := lbapi.ParseIPList(svc.Annotations[lbapi.AnnotationLoadBalancerIPs])
		lbIP, ipErr := netip.ParseAddr(svc.Spec.LoadBalancerIP)
		wantBad := 0
		if annErr != nil {
			wantBad++
		}
		if svc.Spec.LoadBalancerIP != "" && (ipErr != nil || lbIP.Zone() != "") {
			wantBad++
		}
		if len(bad) != wantBad {
			t.Fatalf("unmet %v, want %d", bad, wantBad)
		}
	})
}
