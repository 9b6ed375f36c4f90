package proxy

import (
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

// lbFlows returns the ServiceLB flows whose destination is ip.
func lbFlows(t *testing.T, h *harness, ip string) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(h.bridge.Dump(), "\n") {
		if strings.Contains(line, fmt.Sprintf("table=%d,", pipeline.TableServiceLB)) && strings.Contains(line, "nw_dst="+ip+",") {
			out = append(out, line)
		}
	}
	return out
}

func hasFlowTo(t *testing.T, h *harness, ip string) bool { return len(lbFlows(t, h, ip)) > 0 }

func lbService(ingress ...v1.LoadBalancerIngress) *v1.Service {
	return makeService("ns1", "lb", "10.96.0.20", withLB(30100, ingress...))
}

// TestOption1Matrix drives the KEP-1860 Option 1 rule through the real path: tracker, model
// conversion, pipeline, then flows on the fake bridge.
func TestOption1Matrix(t *testing.T) {
	unset := v1.LoadBalancerIngress{IP: "172.18.0.30"}
	cases := []struct {
		name        string
		proxyLBIPs  bool
		ingress     []v1.LoadBalancerIngress
		programmed  []string
		notProgrmd  []string
		wantReasons []model.Reason
	}{
		{"true/VIP", true, []v1.LoadBalancerIngress{vip("172.18.0.10")}, []string{"172.18.0.10"}, nil,
			[]model.Reason{model.ReasonProgrammedVIP}},
		{"true/Proxy", true, []v1.LoadBalancerIngress{proxyMode("172.18.0.11")}, nil, []string{"172.18.0.11"},
			[]model.Reason{model.ReasonSkippedProxy}},
		{"false/VIP", false, []v1.LoadBalancerIngress{vip("172.18.0.12")}, nil, []string{"172.18.0.12"},
			[]model.Reason{model.ReasonSkippedDisabled}},
		{"false/Proxy", false, []v1.LoadBalancerIngress{proxyMode("172.18.0.13")}, nil, []string{"172.18.0.13"},
			[]model.Reason{model.ReasonSkippedDisabled}},
		{"true/unset", true, []v1.LoadBalancerIngress{unset}, []string{"172.18.0.30"}, nil,
			[]model.Reason{model.ReasonProgrammedUnset}},
		{"true/hostname-only", true, []v1.LoadBalancerIngress{{Hostname: "lb.example.com"}}, nil, nil,
			[]model.Reason{model.ReasonSkippedHostname}},
		{"true/VIP+Proxy on one Service", true, []v1.LoadBalancerIngress{vip("172.18.0.14"), proxyMode("172.18.0.15")},
			[]string{"172.18.0.14"}, []string{"172.18.0.15"},
			[]model.Reason{model.ReasonProgrammedVIP, model.ReasonSkippedProxy}},
		{"true/IPv6 ingress on an IPv4-only proxier", true, []v1.LoadBalancerIngress{vip("fd00:18::1")}, nil, nil,
			[]model.Reason{model.ReasonSkippedFamily}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := testOptions()
			opts.ProxyLoadBalancerIPs = tc.proxyLBIPs
			h := newHarness(t, opts)
			svc := lbService(tc.ingress...)
			h.addService(svc)
			h.addSlice(makeSlice("ns1", "lb", "lb-1", 8080, v1.ProtocolTCP, "http", ep{ip: "10.10.1.5", node: testNode, ready: true}))
			h.sync()
			for _, ip := range tc.programmed {
				if !hasFlowTo(t, h, ip) {
					t.Errorf("LB IP %s: want a ServiceLB flow, got none:\n%s", ip, h.bridge.Dump())
				}
			}
			for _, ip := range tc.notProgrmd {
				if hasFlowTo(t, h, ip) {
					t.Errorf("LB IP %s: want no flow, got %v", ip, lbFlows(t, h, ip))
				}
			}
			// ClusterIP and NodePort flows never depend on Option 1.
			if !hasFlowTo(t, h, "10.96.0.20") {
				t.Errorf("ClusterIP flow missing")
			}
			if !strings.Contains(h.bridge.Dump(), "tp_dst=30100") {
				t.Errorf("NodePort flow missing")
			}
			// The status antctl shows carries the same decisions.
			st := h.p.Services()
			if len(st) != 1 || len(st[0].Ports) != 1 {
				t.Fatalf("status: want one Service port, got %+v", st)
			}
			var got []model.Reason
			for _, ing := range st[0].Ports[0].Port.LoadBalancerIngress {
				got = append(got, ing.Decision.Reason)
			}
			if strings.Join(reasons(got), "|") != strings.Join(reasons(tc.wantReasons), "|") {
				t.Errorf("reasons: got %v, want %v", got, tc.wantReasons)
			}
		})
	}
}

func reasons(r []model.Reason) []string {
	out := make([]string, len(r))
	for i, x := range r {
		out[i] = string(x)
	}
	return out
}

// TestOption1Transitions flips one ingress between VIP and Proxy: exactly that IP's flows go
// away and come back, and nothing else is touched.
func TestOption1Transitions(t *testing.T) {
	h := newHarness(t, testOptions())
	svcVIP := lbService(vip("172.18.0.40"), vip("172.18.0.41"))
	h.addService(svcVIP)
	h.addSlice(makeSlice("ns1", "lb", "lb-1", 8080, v1.ProtocolTCP, "http", ep{ip: "10.10.1.5", node: testNode, ready: true}))
	h.sync()
	if !hasFlowTo(t, h, "172.18.0.40") || !hasFlowTo(t, h, "172.18.0.41") {
		t.Fatalf("both VIPs should be programmed:\n%s", h.bridge.Dump())
	}
	removed := lbFlows(t, h, "172.18.0.40")

	svcProxy := lbService(proxyMode("172.18.0.40"), vip("172.18.0.41"))
	h.bridge.Reset()
	h.updateService(svcVIP, svcProxy)
	h.sync()
	ops := h.bridge.LastOps()
	if len(ops) != len(removed) {
		t.Fatalf("VIP→Proxy: want exactly %d op(s) deleting 172.18.0.40's flows, got %d: %v", len(removed), len(ops), opTexts(ops))
	}
	for _, op := range ops {
		if op.Kind != of.DeleteFlowStrict || !strings.Contains(of.FormatFlowKey(op.Flow), "nw_dst=172.18.0.40,") {
			t.Errorf("VIP→Proxy: unexpected op %s", opTexts([]of.Op{op}))
		}
	}
	if hasFlowTo(t, h, "172.18.0.40") || !hasFlowTo(t, h, "172.18.0.41") {
		t.Fatalf("after VIP→Proxy: want only 172.18.0.41 programmed:\n%s", h.bridge.Dump())
	}

	h.bridge.Reset()
	h.updateService(svcProxy, svcVIP)
	h.sync()
	ops = h.bridge.LastOps()
	if len(ops) != len(removed) || ops[0].Kind != of.AddFlow || !strings.Contains(of.FormatFlowKey(ops[0].Flow), "nw_dst=172.18.0.40,") {
		t.Fatalf("Proxy→VIP: want one add of 172.18.0.40's flow, got %v", opTexts(ops))
	}
	if !hasFlowTo(t, h, "172.18.0.40") {
		t.Fatal("Proxy→VIP: flow missing")
	}
}

func opTexts(ops []of.Op) []string {
	var out []string
	for _, op := range ops {
		s := op.Kind.String()
		if op.Flow != nil {
			s += " " + of.FormatFlow(op.Flow)
		}
		if op.Group != nil {
			s += " " + of.FormatGroup(op.Group)
		}
		out = append(out, s)
	}
	return out
}

// TestRestartWithOptionFlipped restarts the agent on the same bridge with
// proxyLoadBalancerIPs=false: the new round replaces the old one in one bundle, the LB IP flow
// is gone, ClusterIP/NodePort flows stay, and no flow of the old round is left.
func TestRestartWithOptionFlipped(t *testing.T) {
	h := newHarness(t, testOptions())
	svc := lbService(vip("172.18.0.50"))
	slice := makeSlice("ns1", "lb", "lb-1", 8080, v1.ProtocolTCP, "http", ep{ip: "10.10.1.5", node: testNode, ready: true})
	h.addService(svc)
	h.addSlice(slice)
	h.sync()
	if !hasFlowTo(t, h, "172.18.0.50") {
		t.Fatal("VIP should be programmed before the restart")
	}
	oldRound := h.p.Round()

	opts := testOptions()
	opts.ProxyLoadBalancerIPs = false
	opts.Round = oldRound + 1 // the agent saved the next round before starting the proxier
	h2 := newHarnessOn(t, opts, h.bridge)
	h2.addService(svc)
	h2.addSlice(slice)
	h.bridge.Reset()
	h2.sync()
	if got := h.bridge.ApplyCount(); got != 1 {
		t.Fatalf("restart: want the new round installed in one bundle, got %d Apply calls", got)
	}
	if h2.p.Round() != oldRound+1 {
		t.Fatalf("round: got %d, want %d", h2.p.Round(), oldRound+1)
	}
	if hasFlowTo(t, h2, "172.18.0.50") {
		t.Fatal("LB IP flow should be gone with proxyLoadBalancerIPs=false")
	}
	if !hasFlowTo(t, h2, "10.96.0.20") || !strings.Contains(h.bridge.Dump(), "tp_dst=30100") {
		t.Fatal("ClusterIP and NodePort flows must survive the restart")
	}
	flows, _ := h.bridge.DumpFlows(t.Context(), of.FlowFilter{})
	for _, f := range flows {
		if pipeline.CookieRound(f.Cookie) != oldRound+1 {
			t.Errorf("flow of round %d left after restart: %s", pipeline.CookieRound(f.Cookie), of.FormatFlow(&f))
		}
	}
	if h.bridge.GroupCount() != 1 {
		t.Errorf("groups: want 1 after restart, got %d:\n%s", h.bridge.GroupCount(), h.bridge.Dump())
	}
}
