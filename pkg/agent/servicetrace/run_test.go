package servicetrace_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver/apiv1"
	. "github.com/antrea-proxy/antrea-proxy/pkg/agent/servicetrace"
	st "github.com/antrea-proxy/antrea-proxy/pkg/agent/servicetrace/servicetracetest"
)

func trace(t *testing.T, in *Inputs, from, to string) apiv1.Trace {
	t.Helper()
	req, err := apiv1.ParseTraceRequest(from, to)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := Run(in, req)
	if err != nil {
		t.Fatalf("trace from %s to %s: %v", from, to, err)
	}
	return tr
}

func endpoints(tr apiv1.Trace) []string {
	out := make([]string, len(tr.Candidates))
	for i, c := range tr.Candidates {
		out[i] = c.Endpoint
	}
	slices.Sort(out)
	return out
}

func expectReason(t *testing.T, tr apiv1.Trace, verdict, table, reason string) {
	t.Helper()
	if tr.Verdict != verdict || tr.Table != table || tr.Chosen != "" || len(tr.Candidates) != 0 {
		t.Errorf("want %s in %s and no endpoint, got %s in %s, chosen %q, candidates %v", verdict, table, tr.Verdict, tr.Table, tr.Chosen, tr.Candidates)
	}
	if !slices.ContainsFunc(tr.Reasons, func(r string) bool { return strings.Contains(r, reason) }) {
		t.Errorf("want a reason with %q, got %q", reason, tr.Reasons)
	}
}

// TestTraceClusterIP: a pod's connection to a ClusterIP with a local and a remote endpoint is
// DNATed to one of the group's two candidates and leaves through its port (the local pod's,
// or the gateway for the remote one); every step names its table.
func TestTraceClusterIP(t *testing.T) {
	in := st.NewNode(t, true).Add(st.Service("web", "10.96.0.10"), st.Slice("web", []string{st.Endpoint1IP}, st.RemoteEndpoint)).Inputs()
	tr := trace(t, in, "pod:ns/client", "10.96.0.10:80")
	if got, want := endpoints(tr), []string{"10.10.1.6:8080", "10.10.2.7:8080"}; !slices.Equal(got, want) {
		t.Fatalf("candidates %v, want %v", got, want)
	}
	if tr.Verdict != "output" || tr.Service != "ns/web:http" || len(tr.Reasons) != 0 {
		t.Fatalf("want an output of ns/web:http without reasons, got %+v", tr)
	}
	switch tr.Chosen {
	case "10.10.1.6:8080":
		if !strings.HasPrefix(tr.Output, "pod ns/web-1 (port 11") {
			t.Errorf("chosen local endpoint, output %q", tr.Output)
		}
	case "10.10.2.7:8080":
		if !strings.HasPrefix(tr.Output, "gateway antrea-gw0") {
			t.Errorf("chosen remote endpoint, output %q", tr.Output)
		}
	default:
		t.Fatalf("chosen %q is no candidate", tr.Chosen)
	}
	if want := "dnat 10.96.0.10:80 -> " + tr.Chosen; !slices.Contains(tr.NAT, want) {
		t.Errorf("NAT %q, want %q", tr.NAT, want)
	}
	for _, s := range tr.Steps {
		if s.Kind == "flow" && (strings.HasPrefix(s.TableName, "table") || s.Actions == "" && s.Match == "") {
			t.Errorf("step without table name or flow: %+v", s)
		}
	}
	if !slices.ContainsFunc(tr.Steps, func(s apiv1.TraceStep) bool { return s.Kind == "group" && s.TableName == "ServiceLB" }) {
		t.Errorf("no group step in ServiceLB: %+v", tr.Steps)
	}
}

// TestTraceWhy: for each way a connection gets no endpoint, the verdict, the table and the
// reason the proxier's status gives.
func TestTraceWhy(t *testing.T) {
	proxyMode := v1.LoadBalancerIPModeProxy
	lbOn := st.NewNode(t, true).Add(
		st.Service("empty", "10.96.0.20"),
		st.Service("proxied", "10.96.0.21", st.LoadBalancer("172.18.0.21", &proxyMode)), st.Slice("proxied", nil, st.RemoteEndpoint),
		st.Service("local", "10.96.0.22", st.NodePort(30022), st.ExternalLocal), st.Slice("local", nil, st.RemoteEndpoint),
		st.Service("ranged", "10.96.0.23", st.LoadBalancer("172.18.0.23", nil), st.SourceRanges("203.0.113.0/24")), st.Slice("ranged", nil, st.RemoteEndpoint),
		st.Service("web", "10.96.0.10"), st.Slice("web", []string{st.Endpoint1IP}),
	).Inputs()
	lbOff := st.NewNode(t, false).Add(
		st.Service("lb", "10.96.0.24", st.LoadBalancer("172.18.0.24", nil)), st.Slice("lb", nil, st.RemoteEndpoint),
	).Inputs()
	for _, c := range []struct {
		name, from, to         string
		in                     *Inputs
		verdict, table, reason string
	}{
		{"no endpoints", "pod:ns/client", "10.96.0.20:80", lbOn, "reject", "RejectMeter", "ns/empty:http has no endpoint"},
		{"ipMode Proxy", "external", "172.18.0.21:80", lbOn, "drop", "L3Forwarding", "skipped: ipMode=Proxy"},
		{"eTP Local without local endpoints", "external:198.51.100.7", "192.168.77.10:30022", lbOn, "drop", "ServiceLB", "externalTrafficPolicy=Local"},
		{"source range", "external:198.51.100.7", "172.18.0.23:80", lbOn, "drop", "ServiceLB", "not in loadBalancerSourceRanges"},
		{"undefined port", "pod:ns/client", "10.96.0.10:81", lbOn, "reject", "RejectMeter", "undefined port"},
		{"no Service", "pod:ns/client", "10.96.5.5:80", lbOn, "output", "L3Forwarding", "no Service programmed on this node serves 10.96.5.5:80/TCP"},
		{"proxyLoadBalancerIPs=false", "external", "172.18.0.24:80", lbOff, "drop", "L3Forwarding", "skipped: proxyLoadBalancerIPs=false"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := trace(t, c.in, c.from, c.to)
			expectReason(t, tr, c.verdict, c.table, c.reason)
		})
	}
}

// TestTraceLargeGroup: a Service with more endpoints than one group holds lists every endpoint
// of its second-level groups as candidates.
func TestTraceLargeGroup(t *testing.T) {
	eps := st.ManyRemote(1200)
	in := st.NewNode(t, true).Add(st.Service("big", "10.96.0.30"), st.Slice("big", nil, eps...)).Inputs()
	tr := trace(t, in, "node", "10.96.0.30:80")
	if len(tr.Candidates) != len(eps) {
		t.Fatalf("%d candidates, want %d", len(tr.Candidates), len(eps))
	}
	groups := map[uint32]bool{}
	for _, c := range tr.Candidates {
		groups[c.Group] = true
	}
	if len(groups) != 3 {
		t.Errorf("candidates come from %d groups, want 3 second-level groups", len(groups))
	}
	if !slices.Contains(endpoints(tr), tr.Chosen) || tr.Verdict != "output" {
		t.Errorf("chosen %q (%s) is no candidate", tr.Chosen, tr.Verdict)
	}
}

// TestTraceSources: an unknown pod is ErrNotFound; the node's own connections come from the
// gateway's address, external ones from the documentation address by default.
func TestTraceSources(t *testing.T) {
	in := st.NewNode(t, true).Add(st.Service("web", "10.96.0.10"), st.Slice("web", []string{st.Endpoint1IP})).Inputs()
	req, err := apiv1.ParseTraceRequest("pod:ns/nobody", "10.96.0.10:80")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(in, req); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown pod: %v, want ErrNotFound", err)
	}
	tr := trace(t, in, "pod:ns/client", "10.96.0.10:80/udp")
	if tr.Packet.Protocol != "UDP" || tr.Verdict != "reject" {
		t.Errorf("UDP to a port defined for TCP only: %s %s, want a UDP packet rejected", tr.Packet.Protocol, tr.Verdict)
	}
	expectReasonText(t, tr, "undefined port: 10.96.0.10 is served by ns/web (ClusterIP 80/TCP), which defines no port 80/UDP")
	for from, src := range map[string]string{"node": "10.10.1.1:40000", "external": "192.0.2.10:40000", "pod:ns/client": "10.10.1.5:40000"} {
		tr := trace(t, in, from, "10.96.0.10:80/tcp")
		if tr.Packet.Src != src || tr.Chosen != "10.10.1.6:8080" {
			t.Errorf("from %s: source %s chosen %q, want %s to 10.10.1.6:8080", from, tr.Packet.Src, tr.Chosen, src)
		}
	}
}

// TestTraceProblems: the problems of other Services that want the destination are reported:
// an ExternalIP lost to a ClusterIP, a NodePort lost to another Service (FlowConflict) and a
// refused address (AddressRefused), whether or not an endpoint was chosen.
func TestTraceProblems(t *testing.T) {
	in := st.NewNode(t, true).Add(
		st.Service("ok", "10.96.0.40"), st.Slice("ok", []string{st.Endpoint1IP}),
		st.Service("loser", "10.96.0.41", st.ExternalIPs("10.96.0.40")), st.Slice("loser", []string{st.Endpoint2IP}),
		st.Service("np-a", "10.96.0.42", st.NodePort(30050)), st.Slice("np-a", []string{st.Endpoint1IP}),
		st.Service("np-b", "10.96.0.43", st.NodePort(30050)), st.Slice("np-b", []string{st.Endpoint2IP}),
		st.Service("refused", "10.96.0.44", st.ExternalIPs("127.0.0.1")), st.Slice("refused", []string{st.Endpoint2IP}),
	).Inputs()
	tr := trace(t, in, "pod:ns/client", "10.96.0.40:80")
	if tr.Chosen != st.Endpoint1IP+":8080" || tr.Service != "ns/ok:http" {
		t.Errorf("the ClusterIP wins: chosen %q of %q", tr.Chosen, tr.Service)
	}
	expectReasonText(t, tr, "Service ns/loser has a problem: FlowConflict: externalIP 10.96.0.40:80/TCP is claimed by ns/ok")
	tr = trace(t, in, "external", st.NodeIP+":30050")
	if tr.Chosen != st.Endpoint1IP+":8080" {
		t.Errorf("np-a (first by name) wins the NodePort: chosen %q", tr.Chosen)
	}
	expectReasonText(t, tr, "Service ns/np-b has a problem: FlowConflict: NodePort 30050/TCP is claimed by ns/np-a")
	tr = trace(t, in, "pod:ns/client", "127.0.0.1:80")
	expectReasonText(t, tr, "no Service programmed on this node serves 127.0.0.1:80/TCP")
	expectReasonText(t, tr, "Service ns/refused has a problem: AddressRefused: externalIP 127.0.0.1 is refused: a loopback address")
}

func expectReasonText(t *testing.T, tr apiv1.Trace, want string) {
	t.Helper()
	if !slices.ContainsFunc(tr.Reasons, func(r string) bool { return strings.HasPrefix(r, want) }) {
		t.Errorf("want a reason starting with %q, got %q", want, tr.Reasons)
	}
}

// TestTraceSessionAffinity: with ClientIP affinity the buckets load the endpoint into registers
// (no DNAT in the group): the candidates are still every endpoint, the DNAT is the learned
// endpoint's, and the trace notes that earlier learned flows are not traced.
func TestTraceSessionAffinity(t *testing.T) {
	in := st.NewNode(t, true).Add(st.Service("sticky", "10.96.0.50", st.ClientIPAffinity(60)),
		st.Slice("sticky", []string{st.Endpoint1IP, st.Endpoint2IP}, st.RemoteEndpoint)).Inputs()
	tr := trace(t, in, "pod:ns/client", "10.96.0.50:80")
	want := []string{st.Endpoint1IP + ":8080", st.Endpoint2IP + ":8080", st.RemoteEndpoint + ":8080"}
	if got := endpoints(tr); !slices.Equal(got, want) {
		t.Fatalf("candidates %v, want %v", got, want)
	}
	if !slices.Contains(want, tr.Chosen) || tr.Verdict != "output" {
		t.Fatalf("chosen %q (%s)", tr.Chosen, tr.Verdict)
	}
	if !slices.ContainsFunc(tr.Steps, func(s apiv1.TraceStep) bool { return s.Kind == "learn" }) {
		t.Errorf("no learn step: %+v", tr.Steps)
	}
	if !slices.ContainsFunc(tr.Notes, func(n string) bool { return strings.HasPrefix(n, "sessionAffinity=ClientIP") }) {
		t.Errorf("notes %q", tr.Notes)
	}
}
