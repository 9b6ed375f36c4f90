package proxy

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

// rejectDst makes the fake reject every flow op matching dst, as OVS rejects an op it cannot
// take.
func rejectDst(h *harness, dst string) {
	pfx := netip.MustParsePrefix(dst + "/32")
	h.bridge.RejectOps(func(op of.Op) error {
		if op.Flow != nil && op.Flow.Match.Dst == pfx {
			return errors.New("OFPBAC_BAD_ARGUMENT")
		}
		return nil
	})
}

func statusOf(h *harness, ns, name string) *ServiceStatus {
	for _, st := range h.p.Services() {
		if st.Name == (types.NamespacedName{Namespace: ns, Name: name}) {
			return &st
		}
	}
	return nil
}

// quarantineScenario: "a" installed, then in one sync "a" changes and "zbad" and "c" arrive;
// OVS rejects zbad's ClusterIP flow. zbad sorts last, so the others get the group IDs they get
// without it and their dump can be compared with a fresh install.
type quarantineScenario struct {
	a, a2, bad, c *v1.Service
}

func newQuarantineScenario() quarantineScenario {
	return quarantineScenario{
		a:   makeService("ns1", "a", "10.96.0.1"),
		a2:  makeService("ns1", "a", "10.96.0.1", withNodePort(30001)),
		bad: makeService("ns1", "zbad", "10.96.0.66"),
		c:   makeService("ns1", "c", "10.96.0.3"),
	}
}

// freshDump installs services (with one endpoint each) on a new fake and returns its dump.
func freshDump(t *testing.T, svcs ...*v1.Service) string {
	h := newHarness(t, testOptions())
	for _, svc := range svcs {
		h.addService(svc)
		h.addSlice(makeSlice(svc.Namespace, svc.Name, svc.Name+"-1", 8080, v1.ProtocolTCP, "http", ep{ip: "10.10.1.5", node: testNode, ready: true}))
	}
	h.sync()
	return h.bridge.Dump()
}

func TestQuarantineRejectedService(t *testing.T) {
	events := &eventLog{}
	opts := testOptions()
	opts.Events = events
	clk := opts.Clock.(*clocktesting.FakeClock)
	h := newHarness(t, opts)
	s := newQuarantineScenario()
	h.addService(s.a)
	for _, n := range []string{"a", "zbad", "c"} {
		h.addSlice(makeSlice("ns1", n, n+"-1", 8080, v1.ProtocolTCP, "http", ep{ip: "10.10.1.5", node: testNode, ready: true}))
	}
	h.sync()
	rejectDst(h, "10.96.0.66")
	h.updateService(s.a, s.a2)
	h.addService(s.bad)
	h.addService(s.c)
	h.sync()
	if got, want := h.bridge.Dump(), freshDump(t, s.a2, s.c); got != want {
		t.Fatalf("the healthy Services are not installed as without the bad one:\n got:\n%s\nwant:\n%s", got, want)
	}
	st := statusOf(h, "ns1", "zbad")
	if st == nil || st.Problem == nil || st.Problem.Reason != ProblemOVSRejected || !strings.Contains(st.Problem.Message, "OFPBAC_BAD_ARGUMENT") {
		t.Fatalf("bad: want an OVSRejected problem with OVS's error, got %+v", st)
	}
	if want := clk.Now().Add(time.Second); !st.Problem.NextRetry.Equal(want) || st.Problem.Retries != 0 {
		t.Errorf("first retry: got %v (retries %d), want %v", st.Problem.NextRetry, st.Problem.Retries, want)
	}
	for _, n := range []string{"a", "c"} {
		if st := statusOf(h, "ns1", n); st == nil || st.Problem != nil || len(st.Ports) != 1 {
			t.Errorf("%s: want installed without problem, got %+v", n, st)
		}
	}
	if got := fmt.Sprint(events.events()); got != "[ns1/zbad OVSRejected]" {
		t.Errorf("events: got %s, want one OVSRejected for ns1/zbad", got)
	}
	if n := len(h.bridge.ApplyCalls()); n != 3 {
		t.Errorf("want the rejected bundle then the re-planned one (3 Apply calls in all), got %d", n)
	}
	// Not due yet: a sync leaves it alone; due and still rejected: the backoff doubles.
	h.sync()
	clk.Step(time.Second)
	h.sync()
	if st := statusOf(h, "ns1", "zbad"); st.Problem == nil || st.Problem.Retries != 1 || !st.Problem.NextRetry.Equal(clk.Now().Add(2*time.Second)) {
		t.Errorf("second failure: want retries 1, next retry in 2s, got %+v", st.Problem)
	}
	if len(events.events()) != 1 {
		t.Errorf("a repeated failure raised another event: %v", events.events())
	}
	h.bridge.RejectOps(nil)
	clk.Step(2 * time.Second)
	h.sync()
	if st := statusOf(h, "ns1", "zbad"); st == nil || st.Problem != nil || len(st.Ports) != 1 {
		t.Fatalf("after the fault is gone the retry should install it, got %+v", st)
	}
	if got, want := h.bridge.Dump(), freshDump(t, s.a2, s.bad, s.c); got != want {
		t.Fatalf("after the retry the bridge differs from a fresh install:\n got:\n%s\nwant:\n%s", got, want)
	}
}

func TestQuarantineBackoff(t *testing.T) {
	for retries, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		if got := quarantineBackoff(retries); got != want {
			t.Errorf("retries %d: got %v, want %v", retries, got, want)
		}
	}
	if got := quarantineBackoff(30); got != 5*time.Minute {
		t.Errorf("cap: got %v, want 5m", got)
	}
}

// TestRejectedBaseOpFailsTheSync: a rejected node-level op fails the whole sync, as before.
func TestRejectedBaseOpFailsTheSync(t *testing.T) {
	h := newHarness(t, testOptions())
	h.addService(makeService("ns1", "web", "10.96.0.10"))
	h.bridge.RejectOps(func(op of.Op) error {
		if op.Flow != nil && pipeline.CookieCategory(op.Flow.Cookie) == pipeline.CategoryBase {
			return errors.New("OFPBAC_BAD_ARGUMENT")
		}
		return nil
	})
	if err := h.p.SyncNow(t.Context(), false); err == nil {
		t.Fatal("want the sync to fail")
	}
	if h.bridge.FlowCount() != 0 || len(h.p.Services()) != 0 {
		t.Fatalf("a failed sync installed or recorded something:\n%s", h.bridge.Dump())
	}
	if _, _, err := h.p.SyncState(); err == nil {
		t.Error("SyncState should report the error")
	}
}
