package proxy

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
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

// TestGoldenDumps installs one Service of each shape and compares the whole bridge (groups and
// flows, canonical text) with a golden file.
func TestGoldenDumps(t *testing.T) {
	tcp, udp, sctp := v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP
	cases := []struct {
		name string
		svc  *v1.Service
	}{
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
		{name: "no-endpoints", svc: makeService("ns1", "empty", "10.96.0.99")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, testOptions())
			h.addService(tc.svc)
			if tc.name != "no-endpoints" {
				for _, p := range tc.svc.Spec.Ports {
					h.addSlice(makeSlice(tc.svc.Namespace, tc.svc.Name, tc.svc.Name+"-"+p.Name, 8000+p.Port, p.Protocol, p.Name,
						twoEndpoints()...))
				}
			}
			h.sync()
			checkGolden(t, tc.name, h.bridge.Dump())
		})
	}
}
