package model

import (
	"encoding/json"
	"net/netip"
	"reflect"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The fuzz targets of this file build API objects by unmarshalling the fuzzer's bytes as JSON,
// the way the informers hand them to the proxier. Seeds are real objects (f.Add below) and the
// committed corpus in testdata/fuzz. `make fuzz` runs each target; `go test` runs the seeds.

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal seed: %v", err)
	}
	return b
}

// checkAddr fails unless a is what the conversions promise: valid, unmapped, zone-free and of
// a served family.
func checkAddr(t *testing.T, what string, a netip.Addr, served Families) {
	t.Helper()
	if !a.IsValid() || a.Is4In6() || a.Zone() != "" || !served.Serves(a) {
		t.Fatalf("%s: address %v (valid %t) is not a plain address of a served family (%v)", what, a, a.IsValid(), served)
	}
}

func seedServices(f *testing.F) {
	lb := newService(func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Spec.ClusterIPs = []string{"10.96.0.10", "fd00:10:96::a"}
		s.Spec.ExternalIPs = []string{"192.0.2.7", "::ffff:192.0.2.8", "fe80::1%eth0"}
		s.Spec.LoadBalancerSourceRanges = []string{"203.0.113.0/24", "2001:db8::1/64", "010.0.0.1/8"}
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		s.Spec.HealthCheckNodePort = 32000
		s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr[int32](60)}}
		s.Spec.Ports = []v1.ServicePort{
			{Name: "http", Port: 80, NodePort: 30080, Protocol: v1.ProtocolTCP},
			{Name: "dns", Port: 53, NodePort: 30053, Protocol: v1.ProtocolUDP},
			{Name: "bad", Port: 70000, Protocol: "ICMP"},
		}
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{
			{IP: "198.51.100.1"},
			{IP: "198.51.100.2", IPMode: ptr(v1.LoadBalancerIPModeProxy)},
			{IP: "2001:db8::2", IPMode: ptr(v1.LoadBalancerIPModeVIP)},
			{Hostname: "lb.example.com"},
		}
	})
	headless := newService(func(s *v1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = "None", []string{"None"} })
	for _, s := range []*v1.Service{newService(nil), lb, headless} {
		for _, b := range [][2]bool{{true, true}, {false, true}} {
			f.Add(mustJSON(f, s), b[0], b[1], true)
		}
	}
}

// FuzzServicePortsFromService checks that ServicePortsFromService never panics, is
// deterministic, returns only valid ports, protocols and addresses of served families, and
// never programs an LB ingress that DecideLBIngress would not (none at all when
// proxyLoadBalancerIPs is false, never a Proxy-mode one).
func FuzzServicePortsFromService(f *testing.F) {
	seedServices(f)
	f.Fuzz(func(t *testing.T, data []byte, proxyLB, v4, v6 bool) {
		var svc v1.Service
		if json.Unmarshal(data, &svc) != nil {
			return
		}
		opts := ConvertOptions{ProxyLoadBalancerIPs: proxyLB, Served: Families{IPv4: v4, IPv6: v6}}
		ports := ServicePortsFromService(&svc, opts)
		if again := ServicePortsFromService(&svc, opts); !reflect.DeepEqual(ports, again) {
			t.Fatalf("not deterministic:\n%+v\n%+v", ports, again)
		}
		if len(ports) > len(svc.Spec.Ports) {
			t.Fatalf("%d ServicePorts from %d spec ports", len(ports), len(svc.Spec.Ports))
		}
		if _, reason := ShouldSkipService(&svc, "", SkipSet{}); reason == SkipReasonNoClusterIP &&
			ServicePortsFromService(&svc, ConvertOptions{Served: DualStack}) != nil {
			t.Fatalf("ShouldSkipService found no cluster IP but the conversion has ports")
		}
		nn := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
		for _, p := range ports {
			checkServicePort(t, p, nn, &svc, opts)
		}
	})
}

func checkServicePort(t *testing.T, p ServicePort, nn types.NamespacedName, svc *v1.Service, opts ConvertOptions) {
	t.Helper()
	if p.Port == 0 || !slices.Contains([]Protocol{TCP, UDP, SCTP}, p.Protocol) {
		t.Fatalf("%v: invalid port %d/%q", p.Name, p.Port, p.Protocol)
	}
	if p.Name.NamespacedName != nn || p.Name.Protocol != p.Protocol {
		t.Fatalf("port name %v does not match Service %v protocol %s", p.Name, nn, p.Protocol)
	}
	if len(p.ClusterIPs) == 0 {
		t.Fatalf("%v: no cluster IP", p.Name)
	}
	for _, a := range slices.Concat(p.ClusterIPs, p.ExternalIPs) {
		checkAddr(t, p.Name.String(), a, opts.Served)
	}
	for _, r := range p.SourceRanges {
		checkAddr(t, p.Name.String()+" source range", r.Addr(), opts.Served)
		if r != r.Masked() {
			t.Fatalf("%v: source range %v has host bits", p.Name, r)
		}
	}
	nodePortType := svc.Spec.Type == v1.ServiceTypeNodePort || svc.Spec.Type == v1.ServiceTypeLoadBalancer
	if p.NodePort != 0 && !nodePortType {
		t.Fatalf("%v: NodePort %d on a Service of type %q", p.Name, p.NodePort, svc.Spec.Type)
	}
	if (p.StickyMaxAgeSeconds > 0) != (svc.Spec.SessionAffinity == v1.ServiceAffinityClientIP) || p.StickyMaxAgeSeconds < 0 {
		t.Fatalf("%v: sticky %d with sessionAffinity %q", p.Name, p.StickyMaxAgeSeconds, svc.Spec.SessionAffinity)
	}
	for _, ing := range p.LoadBalancerIngress {
		if !ing.Decision.Program {
			continue
		}
		checkAddr(t, p.Name.String()+" LB ingress", ing.IP, opts.Served)
		if !opts.ProxyLoadBalancerIPs || ing.IPMode == IPModeProxy {
			t.Fatalf("%v: ingress %v programmed (proxyLoadBalancerIPs %t, ipMode %q)", p.Name, ing.IP, opts.ProxyLoadBalancerIPs, ing.IPMode)
		}
	}
}

func seedSlices(f *testing.F) {
	ready, notReady := true, false
	tcp, udp := v1.ProtocolTCP, v1.ProtocolUDP
	node, zone := "node-1", "zone-a"
	web := newSlice("svc-abc", discovery.AddressTypeIPv4,
		[]discovery.EndpointPort{ePort("http", tcp, 8080), ePort("dns", udp, 5353)},
		[]discovery.Endpoint{
			withConds(ep("10.0.0.1", "node-1"), &ready, &ready, &notReady),
			withConds(ep("10.0.0.2", "node-2"), &notReady, &ready, &ready),
			{Addresses: []string{"::ffff:10.0.0.3"}, NodeName: &node, Zone: &zone,
				Hints: &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: "zone-a"}}}},
		})
	dup := newSlice("svc-def", discovery.AddressTypeIPv4,
		[]discovery.EndpointPort{ePort("http", tcp, 8080)},
		[]discovery.Endpoint{withConds(ep("10.0.0.2", "node-2"), &ready, nil, nil)})
	v6 := newSlice("svc-v6", discovery.AddressTypeIPv6,
		[]discovery.EndpointPort{ePort("http", tcp, 8080), {Name: ptr("noport")}},
		[]discovery.Endpoint{ep("fd00::1", "node-1"), ep("10.0.0.9", "node-1"), {}})
	fqdn := newSlice("svc-fqdn", discovery.AddressTypeFQDN,
		[]discovery.EndpointPort{ePort("http", tcp, 8080)}, []discovery.Endpoint{ep("example.com", "")})
	f.Add(mustJSON(f, []*discovery.EndpointSlice{web, dup, v6, fqdn}), "node-1", true, true)
	f.Add(mustJSON(f, []*discovery.EndpointSlice{dup, nil, web}), "", true, false)
	f.Add(mustJSON(f, []*discovery.EndpointSlice{v6}), "node-2", false, true)
}

// FuzzEndpointsForService checks that the EndpointSlice conversion never panics, returns only
// valid, sorted, unique endpoints of served families with valid ports, marks exactly the
// endpoints of nodeName as local, and does not depend on the order of the slices.
func FuzzEndpointsForService(f *testing.F) {
	seedSlices(f)
	f.Fuzz(func(t *testing.T, data []byte, nodeName string, v4, v6 bool) {
		var in []*discovery.EndpointSlice
		if json.Unmarshal(data, &in) != nil {
			return
		}
		svc := types.NamespacedName{}
		for _, s := range in {
			if s != nil {
				svc = types.NamespacedName{Namespace: s.Namespace, Name: s.Labels[discovery.LabelServiceName]}
				break
			}
		}
		served := Families{IPv4: v4, IPv6: v6}
		got := endpointsForService(in, svc, nodeName, served)
		for spn, eps := range got {
			checkEndpoints(t, spn, svc, eps, nodeName, served)
		}
		if !uniqueSliceNames(in) {
			return // the tie-break by slice name is only defined for distinct names
		}
		reversed := append([]*discovery.EndpointSlice(nil), in...)
		for i, j := 0, len(reversed)-1; i < j; i, j = i+1, j-1 {
			reversed[i], reversed[j] = reversed[j], reversed[i]
		}
		if again := endpointsForService(reversed, svc, nodeName, served); !reflect.DeepEqual(got, again) {
			t.Fatalf("result depends on slice order:\n%+v\n%+v", got, again)
		}
	})
}

func checkEndpoints(t *testing.T, spn ServicePortName, svc types.NamespacedName, eps []Endpoint, nodeName string, served Families) {
	t.Helper()
	if spn.NamespacedName != svc || !slices.Contains([]Protocol{TCP, UDP, SCTP}, spn.Protocol) {
		t.Fatalf("unexpected port %v", spn)
	}
	if len(eps) == 0 {
		t.Fatalf("%v: present with no endpoints", spn)
	}
	for i, e := range eps {
		checkAddr(t, spn.String(), e.IP, served)
		if e.Port == 0 {
			t.Fatalf("%v: endpoint %v has port 0", spn, e.IP)
		}
		if e.Local != (nodeName != "" && e.NodeName == nodeName) {
			t.Fatalf("%v: endpoint %v on node %q has Local=%t (this node %q)", spn, e.IP, e.NodeName, e.Local, nodeName)
		}
		if i > 0 {
			prev := netip.AddrPortFrom(eps[i-1].IP, eps[i-1].Port)
			if cur := netip.AddrPortFrom(e.IP, e.Port); prev.Compare(cur) >= 0 {
				t.Fatalf("%v: endpoints not sorted and unique: %v then %v", spn, prev, cur)
			}
		}
	}
}

func uniqueSliceNames(in []*discovery.EndpointSlice) bool {
	seen := map[string]bool{}
	for _, s := range in {
		if s == nil {
			continue
		}
		if seen[s.Name] {
			return false
		}
		seen[s.Name] = true
	}
	return true
}

// FuzzDecideLBIngress checks DecideLBIngress against its documented table: deterministic,
// programs only a parseable IP of a served family with ipMode unset or VIP, never anything
// when proxyLoadBalancerIPs is false, never a Proxy-mode ingress; and LBIngressFromAPI agrees.
func FuzzDecideLBIngress(f *testing.F) {
	for _, s := range []struct {
		ip, mode string
		hasMode  bool
	}{
		{"198.51.100.1", "", false}, {"198.51.100.1", "VIP", true}, {"198.51.100.1", "Proxy", true},
		{"2001:db8::1", "", true}, {" 010.001.0.1 ", "vip", true}, {"fe80::1%eth0", "", false},
		{"::ffff:192.0.2.1", "VIP", true}, {"", "", false},
	} {
		f.Add(true, s.ip, "lb.example.com", s.hasMode, s.mode, true, false)
		f.Add(false, s.ip, "", s.hasMode, s.mode, true, true)
	}
	f.Fuzz(func(t *testing.T, proxyLB bool, ip, hostname string, hasMode bool, mode string, v4, v6 bool) {
		ing := v1.LoadBalancerIngress{IP: ip, Hostname: hostname}
		if hasMode {
			ing.IPMode = ptr(v1.LoadBalancerIPMode(mode))
		}
		served := Families{IPv4: v4, IPv6: v6}
		d := DecideLBIngress(proxyLB, ing, served)
		if again := DecideLBIngress(proxyLB, ing, served); again != d {
			t.Fatalf("not deterministic: %+v then %+v", d, again)
		}
		addr, parsed := parseAddr(ip)
		modeOK := !hasMode || mode == "" || mode == string(v1.LoadBalancerIPModeVIP)
		if want := parsed && served.Serves(addr) && proxyLB && modeOK; d.Program != want {
			t.Fatalf("ip %q mode %q (set %t) proxyLB %t served %v: Program=%t (%s), want %t",
				ip, mode, hasMode, proxyLB, served, d.Program, d.Reason, want)
		}
		programmedReason := d.Reason == ReasonProgrammedVIP || d.Reason == ReasonProgrammedUnset
		if d.Program != programmedReason {
			t.Fatalf("Program=%t with reason %q", d.Program, d.Reason)
		}
		got := LBIngressFromAPI(proxyLB, ing, served)
		if got.Decision != d || got.IP != addr || got.Hostname != hostname {
			t.Fatalf("LBIngressFromAPI %+v disagrees with DecideLBIngress %+v (addr %v)", got, d, addr)
		}
	})
}
