package conformance

import (
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestGenerateIsDeterministic(t *testing.T) {
	a, b := Generate(7, 50), Generate(7, 50)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed gave different shapes")
	}
	if reflect.DeepEqual(a, Generate(8, 50)) {
		t.Fatal("different seeds gave the same shapes")
	}
	// A longer run starts with the same shapes: CI's 40 are the first 40 of make's 200.
	if !reflect.DeepEqual(a[:40], Generate(7, 40)) {
		t.Fatal("the first shapes depend on how many are generated")
	}
}

// TestGenerateAddressesAreUnique: every ClusterIP, NodePort, healthCheckNodePort and ingress IP
// is used once, and inside its range.
func TestGenerateAddressesAreUnique(t *testing.T) {
	shapes := Generate(1, 700)
	seen := map[string]string{}
	use := func(what, shape string) {
		if prev, ok := seen[what]; ok {
			t.Errorf("%s is used by %s and %s", what, prev, shape)
		}
		seen[what] = shape
	}
	vip, proxy := netip.MustParsePrefix("172.18.0.0/24"), netip.MustParsePrefix("172.18.1.0/24")
	for _, s := range shapes {
		use("ip "+s.ClusterIP.String(), s.Name)
		for _, p := range s.Ports {
			if p.NodePort != 0 {
				use(fmt.Sprint("port ", p.NodePort), s.Name)
				if p.NodePort < 30000 || p.NodePort > 32767 {
					t.Errorf("%s: NodePort %d outside the default range", s.Name, p.NodePort)
				}
			}
		}
		if s.HealthCheckNodePort != 0 {
			use(fmt.Sprint("port ", s.HealthCheckNodePort), s.Name)
		}
		if s.ExternalIP.IsValid() {
			use("ip "+s.ExternalIP.String(), s.Name)
		}
		if s.Type == "LoadBalancer" {
			use("ip "+s.LBIP.String(), s.Name)
			want := vip
			if s.LBMode == LBProxy {
				want = proxy
			}
			if !want.Contains(s.LBIP) {
				t.Errorf("%s: %s ingress %s outside %s", s.Name, s.LBMode, s.LBIP, want)
			}
		}
	}
}

// TestGenerateCoversTheFeatures: 200 shapes (make test-conformance) have every Service feature
// the suite compares (docs/conformance.md), and 40 (CI) the most important ones.
func TestGenerateCoversTheFeatures(t *testing.T) {
	for _, n := range []int{40, 200} {
		got := map[string]bool{}
		for _, s := range Generate(1, n) {
			got[s.Type] = true
			got["lb-"+string(s.LBMode)] = s.Type == "LoadBalancer" || got["lb-"+string(s.LBMode)]
			got["etp-local"] = got["etp-local"] || s.ETPLocal
			got["itp-local"] = got["itp-local"] || s.ITPLocal
			got["affinity"] = got["affinity"] || s.Affinity
			got["ranges"] = got["ranges"] || len(s.SourceRanges) > 0
			got["externalIP"] = got["externalIP"] || s.ExternalIP.IsValid()
			got[s.TrafficDistribution] = true
			got["no-endpoints"] = got["no-endpoints"] || len(s.Endpoints) == 0
			for _, p := range s.Ports {
				got[p.Protocol] = true
			}
			got["multi-port"] = got["multi-port"] || len(s.Ports) > 1
			for _, ep := range s.Endpoints {
				got[string(ep.State)] = true
			}
		}
		want := []string{"ClusterIP", "NodePort", "LoadBalancer", "lb-VIP", "lb-Proxy", "etp-local", "itp-local",
			"affinity", "ranges", "externalIP", "PreferClose", "no-endpoints", "TCP", "UDP", "multi-port",
			string(Ready), string(ServingTerminating)}
		if n == 200 {
			want = append(want, "SCTP", string(Terminating), string(NotReady), "PreferSameZone", "PreferSameNode")
		}
		for _, w := range want {
			if !got[w] {
				t.Errorf("%d shapes of seed 1 have no %s", n, w)
			}
		}
	}
}

func TestRows(t *testing.T) {
	s := Shape{Name: "s", Type: "LoadBalancer", LBMode: LBVIP, ExternalIP: netip.MustParseAddr("172.18.0.128"),
		Ports: []Port{{Name: "a", Protocol: "TCP", Port: 80, NodePort: 30100}, {Name: "b", Protocol: "SCTP", Port: 81, NodePort: 30101}}}
	rows := Rows([]Shape{s})
	// TCP only (SCTP is not probed): ClusterIP from 4 clients, 2 NodePorts, the LB IP and the
	// externalIP from 5; the ClusterIP on OtherPort over TCP and UDP from 4, the LB IP and the
	// externalIP on OtherPort over TCP and UDP from 5; and the unallocated ClusterIP over TCP
	// and UDP from 4.
	if len(rows) != 4+2*5+5+5+2*4+2*2*5+2*4 {
		t.Fatalf("%d rows, want 60", len(rows))
	}
	targets := map[string]int{}
	keys := map[string]bool{}
	for _, r := range rows {
		if keys[r.Key()] {
			t.Errorf("row %s twice", r.Key())
		}
		keys[r.Key()] = true
		if r.Port.Protocol == "SCTP" {
			t.Errorf("SCTP row %s", r.Key())
		}
		targets[r.Target]++
		if strings.HasPrefix(r.Target, "clusterIP") && r.Client == "external" {
			t.Errorf("ClusterIP probed from the external client")
		}
		if strings.HasSuffix(r.Target, "-other") && slices.ContainsFunc(s.Ports, func(p Port) bool { return p.Port == r.Port.Port }) {
			t.Errorf("row %s probes a port the shape defines", r.Key())
		}
		if r.Target == "clusterIP-unallocated" && (r.Shape.ClusterIP != UnallocatedClusterIP || r.Port.Port != OtherPort) {
			t.Errorf("row %s: want %s:%d", r.Key(), UnallocatedClusterIP, OtherPort)
		}
	}
	want := map[string]int{"clusterIP": 4, "nodePort@node1": 5, "nodePort@node2": 5, "lb": 5, "externalIP": 5,
		"clusterIP-other": 8, "lb-other": 10, "externalIP-other": 10, "clusterIP-unallocated": 8}
	if !maps.Equal(targets, want) {
		t.Errorf("rows by target %v, want %v", targets, want)
	}
	if a := (Row{Shape: &s, Port: Port{Name: otherPortName, Protocol: "UDP", Port: OtherPort}, Target: "lb-other", TargetNode: -1, Client: "pod@node1"}).Attrs(); a["addr"] != "lb-VIP-other" {
		t.Errorf("attrs %v", a)
	}
	a := Row{Shape: &s, Port: s.Ports[0], Target: "nodePort@node2", TargetNode: 1, Client: "host@node1"}.Attrs()
	if a["own"] != "false" || a["targeteps"] != "none" || a["addr"] != "nodePort@node2" {
		t.Errorf("attrs %v", a)
	}
	if a := (Row{Shape: &s, Port: s.Ports[0], Target: "lb", TargetNode: -1, Client: "host@node1"}).Attrs(); a["addr"] != "lb-VIP" || a["own"] != "true" {
		t.Errorf("attrs %v", a)
	}
}

func TestOutsideAddresses(t *testing.T) {
	s := Shape{Name: "s", Type: "LoadBalancer", LBMode: LBProxy, LBIP: netip.MustParseAddr("172.18.1.10"), ExternalIP: netip.MustParseAddr("172.18.0.128")}
	got := outsideAddresses([]Shape{s, {Name: "c", Type: "ClusterIP"}})
	want := []netip.Addr{UnallocatedClusterIP, s.LBIP, s.ExternalIP}
	if !slices.Equal(got, want) {
		t.Errorf("outside addresses %v, want %v", got, want)
	}
}

func TestContainsToken(t *testing.T) {
	text := "ip daddr 10.96.100.10 tcp dport 30100 goto x"
	for tok, want := range map[string]bool{"10.96.100.10": true, "10.96.100.1": false, "30100": true, "3010": false, "0.96.100.10": false} {
		if got := containsToken(text, tok); got != want {
			t.Errorf("containsToken(%q) = %v, want %v", tok, got, want)
		}
	}
}
