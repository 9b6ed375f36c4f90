package proxy

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// otherPortFlows returns the installed flows that reject new connections to ip on ports no
// Service port defines.
func otherPortFlows(h *harness, ip string) []string {
	var out []string
	for _, line := range strings.Split(h.bridge.Dump(), "\n") {
		if strings.Contains(line, "priority=100,") && strings.Contains(line, "nw_dst="+ip+" ") {
			out = append(out, line)
		}
	}
	return out
}

// TestOtherPortsFlowFollowsTheService: a Service's ClusterIP gets exactly one flow rejecting its
// other ports, carried by its first port; when that port goes, the next one carries it, without
// a FlowConflict, and it goes with the Service.
func TestOtherPortsFlowFollowsTheService(t *testing.T) {
	h := newHarness(t, testOptions())
	both := makeService("ns1", "web", "10.96.0.10", withPorts(
		v1.ServicePort{Name: "http", Port: 80, Protocol: v1.ProtocolTCP},
		v1.ServicePort{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP}))
	h.addService(both)
	for _, s := range twoEndpointSlices(both) {
		h.addSlice(s)
	}
	h.sync()
	flows := otherPortFlows(h, "10.96.0.10")
	if len(flows) != 1 || !strings.HasSuffix(flows[0], "actions=CONTROLLER:128") {
		t.Fatalf("want one reject flow for the ClusterIP's other ports, got %q", flows)
	}
	first := flows[0]

	dnsOnly := makeService("ns1", "web", "10.96.0.10", withPorts(v1.ServicePort{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP}))
	h.updateService(both, dnsOnly)
	h.sync()
	flows = otherPortFlows(h, "10.96.0.10")
	if len(flows) != 1 || flows[0] == first {
		t.Fatalf("after the first port went, want one reject flow with the remaining port's cookie, got %q (was %q)", flows, first)
	}
	if st := statusOf(h, "ns1", "web"); st == nil || st.Problem != nil {
		t.Fatalf("status after the port change: %+v", st)
	}
	if !strings.Contains(h.bridge.Dump(), "udp,nw_dst=10.96.0.10,tp_dst=53") || strings.Contains(h.bridge.Dump(), "tp_dst=80 ") {
		t.Fatalf("the port flows did not follow the change:\n%s", h.bridge.Dump())
	}

	h.deleteService(dnsOnly)
	h.sync()
	if flows := otherPortFlows(h, "10.96.0.10"); len(flows) != 0 {
		t.Fatalf("the reject flow outlived its Service: %q", flows)
	}
}
