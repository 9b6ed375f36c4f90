package reconciler

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/openflowtest"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

// TestAddWriterRejectsOverlaps checks that a writer added later may not reuse a kind or a
// category.
func TestAddWriterRejectsOverlaps(t *testing.T) {
	r, _ := newTest(t)
	err := r.AddWriter(Writer{Kind: KindPod, Categories: []pipeline.Category{pipeline.CategoryAffinity}},
		Writer{Kind: 9, Categories: []pipeline.Category{pipeline.CategoryGateway}})
	for _, want := range []string{"given twice", "belongs to writers"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("AddWriter() = %v, want it to say %q", err, want)
		}
	}
}

// TestWriterRankDecidesWithinItsKind checks that a writer's Rank picks the winner between two
// of its owners, and that kinds rank by Compare.
func TestWriterRankDecidesWithinItsKind(t *testing.T) {
	b := openflowtest.NewFakeBridge()
	r, err := New(Options{Bridge: b, Round: testRound})
	if err != nil {
		t.Fatal(err)
	}
	// The later key wins: the reverse of Compare.
	if err := r.AddWriter(Writer{Kind: KindServicePort, Categories: []pipeline.Category{pipeline.CategoryEndpoint},
		Rank: func(a, b Owner) int { return -Compare(a, b) }}); err != nil {
		t.Fatal(err)
	}
	f3 := flow(testRound, pipeline.CategoryEndpoint, 0, "10.1.0.1", 3)
	f4 := flow(testRound, pipeline.CategoryEndpoint, 0, "10.1.0.1", 4)
	if err := commit(t, r, func(bt *Batch) {
		bt.Set(svcA, nil, []of.Flow{f3})
		bt.Set(svcB, nil, []of.Flow{f4})
	}); err != nil {
		t.Fatal(err)
	}
	flows, _ := b.DumpFlows(context.Background(), of.FlowFilter{})
	if len(flows) != 1 || flows[0].Actions[0].(of.Output).Port != 4 {
		t.Fatalf("installed %v, want svcB's output:4 (its writer ranks it first)", flows)
	}
	var lost []string
	r.Read(func(st *State) {
		st.Conflicts(func(o Owner, _ string, w Owner) { lost = append(lost, o.Key+" to "+w.Key) })
	})
	if want := []string{svcA.Key + " to " + svcB.Key}; !slicesEqual(lost, want) {
		t.Errorf("conflicts %v, want %v", lost, want)
	}
}

func slicesEqual(a, b []string) bool { return strings.Join(a, "|") == strings.Join(b, "|") }

// TestReplayRunsUnstartedHooksAndOwesFailures checks that Replay runs the hook of a writer not
// started yet (and not once it started), and that a failed replay is done first by the next
// batch.
func TestReplayRunsUnstartedHooksAndOwesFailures(t *testing.T) {
	r, b := newTest(t)
	ctx := context.Background()
	hooked := 0
	if err := r.AddWriter(Writer{Kind: 9, Categories: []pipeline.Category{pipeline.CategoryAffinity},
		Unstarted: func(context.Context) error { hooked++; return nil }}); err != nil {
		t.Fatal(err)
	}
	if err := r.Replay(ctx); err != nil || hooked != 1 {
		t.Fatalf("Replay before the start: %v, hook ran %d times, want once", err, hooked)
	}
	pod := flow(testRound, pipeline.CategoryPod, 1, "10.0.0.1", 1)
	if err := commit(t, r, func(bt *Batch) {
		bt.First(KindPod)
		bt.Start(9)
		bt.Set(podOwner(1), nil, []of.Flow{pod})
	}); err != nil {
		t.Fatal(err)
	}
	want := b.Dump()
	b.Wipe()
	b.FailNextApply(errors.New("connection reset"))
	if err := r.Replay(ctx); err == nil {
		t.Fatal("Replay() = nil, want the injected error")
	}
	if hooked != 1 {
		t.Errorf("the hook of a started writer ran")
	}
	calls := b.ApplyCount()
	if err := commit(t, r, func(bt *Batch) {}); err != nil {
		t.Fatal(err)
	}
	// The replay: one bundle per started writer (pods, then 9); the batch itself sends nothing.
	if got := b.Dump(); got != want || b.ApplyCount() != calls+2 {
		t.Errorf("the next batch after a failed replay: %d bundles, OVS holds\n%s\nwant a replay of two writers and\n%s", b.ApplyCount()-calls, got, want)
	}
	r.OweReplay()
	b.Wipe()
	if err := commit(t, r, func(bt *Batch) {}); err != nil || b.Dump() != want {
		t.Errorf("after OweReplay the next batch did not replay: %v\n%s", err, b.Dump())
	}
}

// TestInstalledFlowsPerTable checks the healer's view: flows per table as committed, the
// started writers' learned tables, and a version that moves with the counts and not without.
func TestInstalledFlowsPerTable(t *testing.T) {
	r, _ := newTest(t)
	if _, ok := r.InstalledFlows(); ok {
		t.Fatal("InstalledFlows before any start: ok, want not")
	}
	if err := r.AddWriter(Writer{Kind: 9, Categories: []pipeline.Category{pipeline.CategoryAffinity}, Learned: []uint8{13}}); err != nil {
		t.Fatal(err)
	}
	gw := flow(testRound, pipeline.CategoryGateway, 0, "10.0.0.254", 5)
	gw.Table = 0
	if err := commit(t, r, func(bt *Batch) {
		bt.First(KindGateway)
		bt.Start(9)
		bt.Set(gwOwner, nil, []of.Flow{gw})
		bt.Set(podOwner(1), nil, []of.Flow{flow(testRound, pipeline.CategoryPod, 1, "10.0.0.1", 1), flow(testRound, pipeline.CategoryPod, 1, "10.0.0.2", 1)})
	}); err != nil {
		t.Fatal(err)
	}
	in, ok := r.InstalledFlows()
	if !ok || !maps.Equal(in.PerTable, map[uint8]int{0: 1, 20: 2}) || len(in.Learned) != 1 || in.Learned[0] != 13 {
		t.Fatalf("InstalledFlows() = %+v, %v; want tables 0:1 20:2, learned [13]", in, ok)
	}
	v, _ := r.InstalledVersion()
	if err := commit(t, r, func(bt *Batch) { bt.Set(gwOwner, nil, []of.Flow{gw}) }); err != nil {
		t.Fatal(err)
	}
	if v2, _ := r.InstalledVersion(); v2 != v {
		t.Errorf("a batch that changed nothing moved the version")
	}
	if err := commit(t, r, func(bt *Batch) { bt.Delete(podOwner(1)) }); err != nil {
		t.Fatal(err)
	}
	if v2, _ := r.InstalledVersion(); v2 == v {
		t.Errorf("deleting flows kept the version")
	}
	if in, _ := r.InstalledFlows(); !maps.Equal(in.PerTable, map[uint8]int{0: 1}) {
		t.Errorf("after the delete PerTable = %v, want 0:1", in.PerTable)
	}
}
