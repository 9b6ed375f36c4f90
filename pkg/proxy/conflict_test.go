package proxy

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// contested returns Service "a" whose ClusterIP:port is Service "b"'s ExternalIP:port; older
// is created first.
func contested(older string) (a, b *v1.Service) {
	a = makeService("ns1", "a", "10.96.0.1")
	b = makeService("ns1", "b", "10.96.0.2", withExternalIPs("10.96.0.1"))
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Hour))
	a.CreationTimestamp, b.CreationTimestamp = t1, t1
	if older == "a" {
		a.CreationTimestamp = t0
	} else {
		b.CreationTimestamp = t0
	}
	return a, b
}

// contestedFlow returns the installed flow line for 10.96.0.1:80 in the ServiceLB table.
func contestedFlow(t *testing.T, h *harness) string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(h.bridge.Dump(), "\n") {
		if strings.Contains(l, "nw_dst=10.96.0.1,tp_dst=80 ") {
			out = append(out, l)
		}
	}
	if len(out) != 1 {
		t.Fatalf("want exactly one flow for 10.96.0.1:80, got %d:\n%s", len(out), h.bridge.Dump())
	}
	return out[0]
}

func TestContestedMatch(t *testing.T) {
	for _, tc := range []struct{ older, deleted string }{
		{"a", "a"}, {"a", "b"}, {"b", "a"}, {"b", "b"},
	} {
		t.Run(fmt.Sprintf("older=%s/delete=%s", tc.older, tc.deleted), func(t *testing.T) {
			events := &eventLog{}
			opts := testOptions()
			opts.Events = events
			h := newHarness(t, opts)
			a, b := contested(tc.older)
			h.addService(a)
			h.addService(b)
			for _, n := range []string{"a", "b"} {
				h.addSlice(makeSlice("ns1", n, n+"-1", 8080, v1.ProtocolTCP, "http", ep{ip: "10.10.1.5", node: testNode, ready: true}))
			}
			h.sync()
			// A ClusterIP claim beats an ExternalIP claim on the same tuple, whichever is older.
			winner, loser := a, b
			want := map[*v1.Service]string{a: "actions=group:1", b: "actions=set_field:0x20/0x20->reg0,group:2"}
			if got := contestedFlow(t, h); !strings.HasSuffix(got, want[winner]) {
				t.Fatalf("the ClusterIP's Service should own the flow, got %s", got)
			}
			st := statusOf(h, "ns1", loser.Name)
			if st == nil || st.Problem == nil || st.Problem.Reason != ProblemFlowConflict ||
				!strings.Contains(st.Problem.Message, "externalIP 10.96.0.1:80/TCP is claimed by ns1/"+winner.Name+" (its ClusterIP)") {
				t.Fatalf("loser %s: want a FlowConflict problem naming the winner, got %+v", loser.Name, st)
			}
			if w := statusOf(h, "ns1", winner.Name); w == nil || w.Problem != nil {
				t.Errorf("winner: want no problem, got %+v", w)
			}
			if got := fmt.Sprint(events.events()); got != "[ns1/"+loser.Name+" FlowConflict]" {
				t.Errorf("events: got %s", got)
			}
			if ps := st.Ports; len(ps) != 1 || len(ps[0].Port.ExternalIPs) != 0 {
				t.Errorf("loser: the status must list only what is programmed, got %+v", ps)
			}
			h.sync() // nothing changed: no second event
			if n := len(events.events()); n != 1 {
				t.Errorf("want one event, got %d", n)
			}
			gone, stays := a, b
			if tc.deleted == "b" {
				gone, stays = b, a
			}
			h.deleteService(gone)
			h.sync()
			if got := contestedFlow(t, h); !strings.HasSuffix(got, want[stays]) {
				t.Fatalf("after deleting %s the flow %s needs must be installed, got %s", gone.Name, stays.Name, got)
			}
			if st := statusOf(h, "ns1", stays.Name); st == nil || st.Problem != nil {
				t.Errorf("%s: the conflict is over, got %+v", stays.Name, st)
			}
		})
	}
}

// TestContestedFlowKeyLastLine: two Services with the same ClusterIP (the API server allocates
// them uniquely, so only a broken or hand-made state has it) are left to the flow state's
// per-key handling: the older one's flow is installed, the other gets a FlowConflict problem.
func TestContestedFlowKeyLastLine(t *testing.T) {
	h := newHarness(t, testOptions())
	a := makeService("ns1", "a", "10.96.0.1")
	b := makeService("ns1", "b", "10.96.0.1")
	b.CreationTimestamp = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	a.CreationTimestamp = metav1.NewTime(b.CreationTimestamp.Add(time.Hour))
	h.addService(a)
	h.addService(b)
	for _, n := range []string{"a", "b"} {
		h.addSlice(makeSlice("ns1", n, n+"-1", 8080, v1.ProtocolTCP, "http", ep{ip: "10.10.1.5", node: testNode, ready: true}))
	}
	h.sync()
	if got := contestedFlow(t, h); !strings.HasSuffix(got, "actions=group:2") {
		t.Fatalf("the older Service (b) should own the flow, got %s", got)
	}
	if st := statusOf(h, "ns1", "a"); st == nil || st.Problem == nil || st.Problem.Reason != ProblemFlowConflict ||
		!strings.Contains(st.Problem.Message, "is programmed for ns1/b") {
		t.Fatalf("a: want a per-key FlowConflict naming ns1/b, got %+v", st)
	}
}
