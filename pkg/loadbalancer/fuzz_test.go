package loadbalancer

import (
	"encoding/json"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// checkPlainAddr fails unless a is valid, unmapped and zone-free.
func checkPlainAddr(t *testing.T, what string, a netip.Addr) {
	t.Helper()
	if !a.IsValid() || a.Is4In6() || a.Zone() != "" {
		t.Fatalf("%s: %v is not a plain IP address", what, a)
	}
}

// FuzzParseIPList checks the antrea-proxy.io/load-balancer-ips parser: only plain addresses
// come out, an error is returned exactly when some non-empty entry is dropped, and the
// rendered result parses to the same list.
func FuzzParseIPList(f *testing.F) {
	for _, s := range []string{"10.0.10.5", "10.0.10.5, fd00:10::5", " ::ffff:10.0.0.1 ,,", "fe80::1%eth0", "10.0.10.300,x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ips, err := ParseIPList(s)
		nonEmpty := 0
		for _, p := range strings.Split(s, ",") {
			if strings.TrimSpace(p) != "" {
				nonEmpty++
			}
		}
		if (err == nil) != (len(ips) == nonEmpty) {
			t.Fatalf("ParseIPList(%q) = %v, %v from %d entries", s, ips, err, nonEmpty)
		}
		parts := make([]string, len(ips))
		for i, a := range ips {
			checkPlainAddr(t, s, a)
			parts[i] = a.String()
		}
		again, err := ParseIPList(strings.Join(parts, ","))
		if err != nil || !slices.Equal(again, ips) {
			t.Fatalf("ParseIPList(%q) = %v, rendered and parsed %v (%v)", s, ips, again, err)
		}
	})
}

// FuzzParseAnnouncingNodes checks the antrea-proxy.io/announcing-node parser: entries come out
// with a valid, unmapped address and a node, an error is returned exactly when a non-empty
// entry is dropped, and FormatAnnouncingNodes' rendering parses to the same announcements.
func FuzzParseAnnouncingNodes(f *testing.F) {
	for _, s := range []string{"10.0.10.5=node-1", "10.0.10.5=node-1, fd00:10::5=node-2", "10.0.10.5=", "=node", "10.0.10.5", "a=b=c", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		as, err := ParseAnnouncingNodes(s)
		nonEmpty := 0
		for _, p := range strings.Split(s, ",") {
			if strings.TrimSpace(p) != "" {
				nonEmpty++
			}
		}
		if (err == nil) != (len(as) == nonEmpty) {
			t.Fatalf("ParseAnnouncingNodes(%q) = %v, %v from %d entries", s, as, err, nonEmpty)
		}
		for _, a := range as {
			if !a.Addr.IsValid() || a.Addr.Is4In6() || a.Node == "" {
				t.Fatalf("ParseAnnouncingNodes(%q): bad entry %+v", s, a)
			}
		}
		again, err := ParseAnnouncingNodes(FormatAnnouncingNodes(as))
		if err != nil || !reflect.DeepEqual(again, as) {
			t.Fatalf("ParseAnnouncingNodes(%q) = %v, formatted and parsed %v (%v)", s, as, again, err)
		}
	})
}

// FuzzRequest checks the conversion of a Service (JSON from the fuzzer, seeded with real ones)
// and its annotations into an allocation request: it never panics, wants only plain,
// distinct addresses, asks for one or two families (one for SingleStack), one port key per
// spec port, and reports every malformed address as an unmet loadBalancerIP feature.
func FuzzRequest(f *testing.F) {
	for _, svc := range []*v1.Service{
		lbService("a"),
		lbService("b", withAnn(AnnotationLoadBalancerIPs, "10.0.10.5, fd00:10::5"), withPool("vip"), withAnn(AnnotationAllowSharedIP, "k"),
			dualStack(v1.IPFamilyPolicyRequireDualStack)),
		lbService("c", func(s *v1.Service) { s.Spec.LoadBalancerIP = "10.0.10.5" }, withAnn(AnnotationLoadBalancerIPs, "10.0.10.5,bad")),
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
		_, annErr := ParseIPList(svc.Annotations[AnnotationLoadBalancerIPs])
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
