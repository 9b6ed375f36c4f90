package tracer

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/oftrace"
)

// endpointOFPort is where a packet DNATed to ep must leave: the pod's port for a local endpoint,
// the gateway for a remote one.
func endpointOFPort(ep netip.Addr) uint32 {
	for port, ip := range podIPs {
		if ip == ep {
			return port
		}
	}
	return gwPort
}

// traceAll traces p through every bucket of every group it meets, on a fresh conntrack.
func traceAll(t *testing.T, tr *oftrace.Tracer, p oftrace.Packet) []*oftrace.Trace {
	t.Helper()
	all, err := tr.TraceAll(p, nil)
	if err != nil {
		t.Fatalf("trace %v: %v", p, err)
	}
	return all
}

func dump(traces []*oftrace.Trace) string {
	var b strings.Builder
	for _, tr := range traces {
		b.WriteString(tr.String())
	}
	return b.String()
}

// expectEndpoints checks that every path of p is one output of the packet DNATed to one of want
// (port 8080), with source src, through the endpoint's port, and that every endpoint in want
// is reached by some path.
func expectEndpoints(t *testing.T, traces []*oftrace.Trace, src netip.Addr, want ...netip.Addr) {
	t.Helper()
	var got []netip.Addr
	for _, tr := range traces {
		o, ok := tr.Single()
		if !ok || o.Kind != oftrace.Output {
			t.Errorf("want one output, got:\n%s", tr)
			continue
		}
		if !slices.Contains(want, o.Packet.Dst) || o.Packet.DstPort != 8080 {
			t.Errorf("want DNAT to one of %v port 8080, got %v\n%s", want, o, tr)
			continue
		}
		if o.Port != endpointOFPort(o.Packet.Dst) || o.Packet.Src != src {
			t.Errorf("want output:%d from %s, got %v\n%s", endpointOFPort(o.Packet.Dst), src, o, tr)
		}
		got = append(got, o.Packet.Dst)
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("endpoint %s is never selected; paths:\n%s", w, dump(traces))
		}
	}
}

// expectNotDNATed checks that no path of p is DNATed or delivered to a local pod.
func expectNotDNATed(t *testing.T, traces []*oftrace.Trace, p oftrace.Packet) {
	t.Helper()
	for _, tr := range traces {
		for _, o := range tr.Outcomes {
			if o.Packet.Dst != p.Dst || o.Packet.DstPort != p.DstPort || o.Packet.CtState&of.CtDNAT != 0 {
				t.Errorf("want %v not DNATed, got %v\n%s", p, o, tr)
			}
			if o.Kind == oftrace.Output && o.Port != gwPort {
				t.Errorf("want %v not delivered to a pod, got %v\n%s", p, o, tr)
			}
		}
	}
}

// expectVerdict checks that p has a single path ending in kind in table.
func expectVerdict(t *testing.T, traces []*oftrace.Trace, kind oftrace.OutcomeKind, table uint8) oftrace.Outcome {
	t.Helper()
	if len(traces) != 1 {
		t.Fatalf("want one path, got %d:\n%s", len(traces), dump(traces))
	}
	o, ok := traces[0].Single()
	if !ok || o.Kind != kind || o.Table != table {
		t.Fatalf("want %v in table %d, got:\n%s", kind, table, traces[0])
	}
	return o
}
