package proxy

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/openflowtest"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

// eventLog is an EventSink that records "ns/name Reason" lines.
type eventLog struct {
	mu   sync.Mutex
	list []string
}

func (e *eventLog) Warning(svc types.NamespacedName, reason, message string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, svc.String()+" "+reason)
}

func (e *eventLog) events() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.list...)
}

// within fails the test when fn does not return within d.
func within(t *testing.T, d time.Duration, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s blocked for more than %v", what, d)
	}
}

// TestApplyDoesNotHoldTheLock: while a bundle is stuck in OVS, the readers (Services,
// SyncState, ServiceFlows, Verify) answer.
func TestApplyDoesNotHoldTheLock(t *testing.T) {
	h := newHarness(t, testOptions())
	h.addService(makeService("ns1", "web", "10.96.0.10"))
	h.addSlice(makeSlice("ns1", "web", "web-1", 8080, v1.ProtocolTCP, "http", twoEndpoints()...))
	h.sync()
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	h.bridge.SetApplyHook(func([]of.Op) error {
		once.Do(func() { close(entered) })
		<-release
		return nil
	})
	h.updateService(makeService("ns1", "web", "10.96.0.10"), makeService("ns1", "web", "10.96.0.10", withNodePort(30080)))
	syncDone := make(chan error, 1)
	go func() { syncDone <- h.p.SyncNow(context.Background(), false) }()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the sync never reached Apply")
	}
	within(t, 5*time.Second, "Services()", func() { _ = h.p.Services() })
	within(t, 5*time.Second, "SyncState()", func() { _, _, _ = h.p.SyncState() })
	within(t, 5*time.Second, "ServiceFlows()", func() { h.p.ServiceFlows(types.NamespacedName{Namespace: "ns1", Name: "web"}) })
	within(t, 5*time.Second, "Verify()", func() {
		if ok, err := h.p.Reconciler().Verify(context.Background(), h.bridge); err != nil || !ok {
			t.Errorf("Verify during an Apply: got %v, %v; want true (it cannot tell)", ok, err)
		}
	})
	close(release)
	if err := <-syncDone; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(h.bridge.Dump(), "tp_dst=30080") {
		t.Fatal("the NodePort was not installed once Apply returned")
	}
}

// TestFirstBundleNeverDependsOnOVSGroups: a restart deletes the group IDs the earlier run's
// flows use and those it adds before adding, so a group left in OVS without any flow (after a
// del-flows) does not make the add fail; the order is group deletes, group adds, flow adds, flow
// deletes, stale-round deletes.
func TestFirstBundleNeverDependsOnOVSGroups(t *testing.T) {
	h := newHarness(t, testOptions())
	svc := makeService("ns1", "web", "10.96.0.10")
	slice := makeSlice("ns1", "web", "web-1", 8080, v1.ProtocolTCP, "http", twoEndpoints()...)
	h.addService(svc)
	h.addSlice(slice)
	h.sync()
	// An orphan group with the ID the next run allocates second, and an old-run flow using
	// group 1.
	if err := h.bridge.Apply(context.Background(), []of.Op{{Kind: of.AddGroup, Group: &of.Group{ID: 2, Type: of.GroupTypeSelect}}}); err != nil {
		t.Fatal(err)
	}
	opts := testOptions()
	opts.Round = 2
	h2 := newHarnessOn(t, opts, h.bridge)
	h2.addService(svc)
	h2.addService(makeService("ns1", "api", "10.96.0.11"))
	h2.addSlice(slice)
	h2.addSlice(makeSlice("ns1", "api", "api-1", 8080, v1.ProtocolTCP, "http", twoEndpoints()...))
	h.bridge.Reset()
	h2.sync()
	ops := h.bridge.LastOps()
	var kinds []string
	for _, op := range ops {
		k := op.Kind.String()
		if n := len(kinds); n == 0 || kinds[n-1] != k {
			kinds = append(kinds, k)
		}
	}
	if got, want := strings.Join(kinds, ","), "delete-group,add-group,add-flow,delete-flows"; got != want {
		t.Fatalf("first bundle op order: got %s, want %s", got, want)
	}
	var deleted []uint32
	for _, op := range ops {
		if op.Kind == of.DeleteGroup {
			deleted = append(deleted, op.Group.ID)
		}
	}
	if fmt.Sprint(deleted) != "[1 2]" {
		t.Errorf("group deletes: got %v, want [1 2]", deleted)
	}
	fresh := newHarness(t, opts)
	fresh.addService(svc)
	fresh.addService(makeService("ns1", "api", "10.96.0.11"))
	fresh.addSlice(slice)
	fresh.addSlice(makeSlice("ns1", "api", "api-1", 8080, v1.ProtocolTCP, "http", twoEndpoints()...))
	fresh.sync()
	if got, want := h.bridge.Dump(), fresh.bridge.Dump(); got != want {
		t.Errorf("after the restart the bridge differs from a fresh install:\n got:\n%s\nwant:\n%s", got, want)
	}
}

// TestStartUpReadsOnlyOurCookies: flows of other writers (pod flows) are neither dumped into
// the proxier's view nor deleted, whatever their round.
func TestStartUpReadsOnlyOurCookies(t *testing.T) {
	b := openflowtest.NewFakeBridge()
	pod := of.Flow{Table: 0, Priority: 190, Cookie: pipeline.Cookie(7, pipeline.CategoryPod, 3),
		Match: of.Match{InPort: 9}, Actions: []of.Action{of.Normal{}}}
	if err := b.Apply(context.Background(), []of.Op{{Kind: of.AddFlow, Flow: &pod}}); err != nil {
		t.Fatal(err)
	}
	h := newHarnessOn(t, testOptions(), b)
	h.sync()
	if !strings.Contains(b.DumpCookie(pipeline.Cookie(0, pipeline.CategoryPod, 0), pipeline.CategoryMask), "in_port=9") {
		t.Fatal("the proxier deleted another writer's flow")
	}
}
