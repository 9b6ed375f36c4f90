package reconciler

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/openflowtest"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

const testRound = 7

var (
	gwOwner  = Owner{Kind: KindGateway}
	nodeOwn  = Owner{Kind: KindNode}
	svcA     = Owner{Kind: KindServicePort, Key: "ns/a:80/TCP/v4"}
	svcB     = Owner{Kind: KindServicePort, Key: "ns/b:80/TCP/v4"}
	testPods = []Writer{
		{Kind: KindNode, Categories: []pipeline.Category{pipeline.CategoryBase}},
		{Kind: KindServicePort, Categories: []pipeline.Category{pipeline.CategoryService, pipeline.CategoryEndpoint}},
		{Kind: KindGateway, Categories: []pipeline.Category{pipeline.CategoryGateway}},
		{Kind: KindPod, Categories: []pipeline.Category{pipeline.CategoryPod}},
	}
)

func podOwner(port int) Owner { return Owner{Kind: KindPod, Key: fmt.Sprint(port)} }

// flow returns a flow of category cat in table 20 matching dst, whose action is output:port.
func flow(round uint16, cat pipeline.Category, obj uint64, dst string, port uint32) of.Flow {
	return of.Flow{Table: 20, Priority: 100, Cookie: pipeline.Cookie(round, cat, obj),
		Match:   of.Match{EthType: of.EthTypeIP, Dst: netip.MustParsePrefix(dst + "/32")},
		Actions: []of.Action{of.Output{Port: port}}}
}

func newTest(t *testing.T) (*Reconciler, *openflowtest.FakeBridge) {
	t.Helper()
	b := openflowtest.NewFakeBridge()
	r, err := New(Options{Bridge: b, Round: testRound, Writers: testPods})
	if err != nil {
		t.Fatal(err)
	}
	return r, b
}

func commit(t *testing.T, r *Reconciler, stage func(b *Batch)) error {
	t.Helper()
	b := r.Begin()
	stage(b)
	return b.Commit(context.Background())
}

func opKinds(ops []of.Op) string {
	var s []string
	for _, op := range ops {
		s = append(s, fmt.Sprint(op.Kind))
	}
	return strings.Join(s, ",")
}

func TestOptionsValidateReportsEveryProblem(t *testing.T) {
	err := Options{Writers: []Writer{{Kind: KindPod}, {Kind: KindPod, Categories: []pipeline.Category{pipeline.CategoryPod}},
		{Kind: KindGateway, Categories: []pipeline.Category{pipeline.CategoryPod}}}}.Validate()
	for _, want := range []string{"no bridge", "given twice", "has no cookie category", "belongs to writers"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to say %q", err, want)
		}
	}
}

// TestNetDiff checks that a commit sends only the difference with the installed state.
func TestNetDiff(t *testing.T) {
	f1 := flow(testRound, pipeline.CategoryPod, 1, "10.0.0.1", 1)
	f2 := flow(testRound, pipeline.CategoryPod, 1, "10.0.0.2", 1)
	f2b := flow(testRound, pipeline.CategoryPod, 1, "10.0.0.2", 9)
	cases := []struct {
		name      string
		before    []of.Flow
		after     []of.Flow
		wantKinds string
	}{
		{"unchanged", []of.Flow{f1, f2}, []of.Flow{f1, f2}, ""},
		{"one added", []of.Flow{f1}, []of.Flow{f1, f2}, fmt.Sprint(of.AddFlow)},
		{"one removed", []of.Flow{f1, f2}, []of.Flow{f1}, fmt.Sprint(of.DeleteFlowStrict)},
		{"one modified", []of.Flow{f1, f2}, []of.Flow{f1, f2b}, fmt.Sprint(of.AddFlow)},
		{"owner deleted", []of.Flow{f1, f2}, nil, fmt.Sprint(of.DeleteFlowStrict) + "," + fmt.Sprint(of.DeleteFlowStrict)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, b := newTest(t)
			if err := commit(t, r, func(bt *Batch) { bt.Set(podOwner(1), nil, slices.Clone(c.before)) }); err != nil {
				t.Fatal(err)
			}
			calls := b.ApplyCount()
			if err := commit(t, r, func(bt *Batch) { bt.Set(podOwner(1), nil, slices.Clone(c.after)) }); err != nil {
				t.Fatal(err)
			}
			var got string
			if b.ApplyCount() > calls {
				got = opKinds(b.LastOps())
			}
			if got != c.wantKinds {
				t.Errorf("ops %q, want %q", got, c.wantKinds)
			}
			if n := b.FlowCount(); n != len(c.after) {
				t.Errorf("OVS holds %d flows, want %d", n, len(c.after))
			}
		})
	}
}

// TestSharedKeys checks a key wanted by several owners: installed once, deleted with its last
// owner, and the winner's content installed when they disagree.
func TestSharedKeys(t *testing.T) {
	shared := flow(testRound, pipeline.CategoryEndpoint, 0, "10.1.0.1", 3)
	other := flow(testRound, pipeline.CategoryEndpoint, 0, "10.1.0.1", 4) // same key, other content
	r, b := newTest(t)
	steps := []struct {
		name     string
		stage    func(*Batch)
		wantOVS  int
		wantPort uint32
	}{
		{"two owners want one key", func(bt *Batch) {
			bt.Set(svcA, nil, []of.Flow{shared})
			bt.Set(svcB, nil, []of.Flow{shared})
		}, 1, 3},
		{"the first lets go", func(bt *Batch) { bt.Delete(svcA) }, 1, 3},
		{"a node-level owner wants other content: it wins", func(bt *Batch) { bt.Set(nodeOwn, nil, []of.Flow{other}) }, 1, 4},
		{"the winner lets go: the other's content comes back", func(bt *Batch) { bt.Delete(nodeOwn) }, 1, 3},
		{"the last lets go", func(bt *Batch) { bt.Delete(svcB) }, 0, 0},
	}
	for _, s := range steps {
		if err := commit(t, r, s.stage); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		flows, _ := b.DumpFlows(context.Background(), of.FlowFilter{})
		if len(flows) != s.wantOVS {
			t.Fatalf("%s: OVS holds %d flows, want %d", s.name, len(flows), s.wantOVS)
		}
		if s.wantOVS > 0 {
			if got := flows[0].Actions[0].(of.Output).Port; got != s.wantPort {
				t.Errorf("%s: installed output:%d, want output:%d", s.name, got, s.wantPort)
			}
		}
	}
}

// TestRejectedOpAttributedToOwner checks that an op OVS refuses names its owner and that
// nothing of the batch is committed.
func TestRejectedOpAttributedToOwner(t *testing.T) {
	bad := flow(testRound, pipeline.CategoryPod, 2, "10.0.0.66", 2)
	cases := []struct {
		name   string
		reject func(of.Op) error
		want   []Owner
	}{
		{"the bad pod's flow", func(op of.Op) error {
			if op.Kind == of.AddFlow && op.Flow.Match.Dst == bad.Match.Dst {
				return errors.New("refused")
			}
			return nil
		}, []Owner{podOwner(2)}},
		{"the gateway's flow", func(op of.Op) error {
			if op.Kind == of.AddFlow && pipeline.CookieCategory(op.Flow.Cookie) == pipeline.CategoryGateway {
				return errors.New("refused")
			}
			return nil
		}, []Owner{gwOwner}},
		{"a clean-up of no owner", func(op of.Op) error {
			if op.Kind == of.DeleteFlows {
				return errors.New("refused")
			}
			return nil
		}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, b := newTest(t)
			b.RejectOps(c.reject)
			err := commit(t, r, func(bt *Batch) {
				bt.First(KindGateway)
				bt.Set(gwOwner, nil, []of.Flow{flow(testRound, pipeline.CategoryGateway, 0, "10.0.0.254", 5)})
				bt.Set(podOwner(1), nil, []of.Flow{flow(testRound, pipeline.CategoryPod, 1, "10.0.0.1", 1)})
				bt.Set(podOwner(2), nil, []of.Flow{bad})
			})
			var rej *RejectedError
			if !errors.As(err, &rej) {
				t.Fatalf("Commit() = %v, want a *RejectedError", err)
			}
			if !slices.Equal(rej.Owners, c.want) {
				t.Errorf("rejected owners %v, want %v", rej.Owners, c.want)
			}
			if r.Has(podOwner(1)) || r.Has(gwOwner) || r.Started(KindGateway) || r.state.Len() != 0 {
				t.Error("a rejected batch changed the installed state")
			}
			b.RejectOps(nil)
			if err := commit(t, r, func(bt *Batch) {
				bt.Set(podOwner(1), nil, []of.Flow{flow(testRound, pipeline.CategoryPod, 1, "10.0.0.1", 1)})
			}); err != nil {
				t.Fatal(err)
			}
			if got := opKinds(b.LastOps()); got != fmt.Sprint(of.AddFlow) {
				t.Errorf("after the rejection the next batch sent %q, want one add (nothing was committed)", got)
			}
		})
	}
}

// TestVerifyDuringApply checks that Verify reports no mismatch while a bundle is in flight
// (OVS holds the old flows then), finds a loss once it is not, and ignores writers that have
// not started.
func TestVerifyDuringApply(t *testing.T) {
	r, b := newTest(t)
	ctx := context.Background()
	if err := commit(t, r, func(bt *Batch) {
		bt.First(KindPod)
		bt.Set(podOwner(1), nil, []of.Flow{flow(testRound, pipeline.CategoryPod, 1, "10.0.0.1", 1)})
	}); err != nil {
		t.Fatal(err)
	}
	var during []bool
	b.SetApplyHook(func([]of.Op) error {
		ok, err := r.Verify(ctx, b)
		if err != nil {
			return err
		}
		during = append(during, ok)
		return nil
	})
	if err := commit(t, r, func(bt *Batch) {
		bt.Set(podOwner(2), nil, []of.Flow{flow(testRound, pipeline.CategoryPod, 2, "10.0.0.2", 2)})
		// The gateway has not started: its flows are not verified.
		bt.Set(gwOwner, nil, []of.Flow{flow(testRound, pipeline.CategoryGateway, 0, "10.0.0.254", 5)})
	}); err != nil {
		t.Fatal(err)
	}
	b.SetApplyHook(nil)
	if !slices.Equal(during, []bool{true}) {
		t.Errorf("Verify during the apply = %v, want [true]", during)
	}
	if ok, err := r.Verify(ctx, b); err != nil || !ok {
		t.Fatalf("Verify at rest = %v, %v, want true", ok, err)
	}
	b.ClearFlows(of.FlowFilter{Cookie: pipeline.Cookie(0, pipeline.CategoryGateway, 0), CookieMask: pipeline.CategoryMask})
	if ok, err := r.Verify(ctx, b); err != nil || !ok {
		t.Fatalf("Verify after losing a flow of a writer that did not start = %v, %v, want true", ok, err)
	}
	b.ClearFlows(of.FlowFilter{Cookie: pipeline.PodCookie(testRound, 2), CookieMask: pipeline.PodCookieMask})
	if ok, err := r.Verify(ctx, b); err != nil || ok {
		t.Fatalf("Verify after losing a pod flow = %v, %v, want false", ok, err)
	}
}

// TestReplayAfterWipe checks that Replay reinstalls every started writer's flows and groups
// after OVS lost them, one bundle per writer in the writers' order, and is a no-op before any
// writer started.
func TestReplayAfterWipe(t *testing.T) {
	r, b := newTest(t)
	ctx := context.Background()
	if err := r.Replay(ctx); err != nil || b.ApplyCount() != 0 {
		t.Fatalf("Replay before any start: %v, %d applies, want none", err, b.ApplyCount())
	}
	g := &of.Group{ID: 1, Type: of.GroupTypeSelect, Buckets: []of.Bucket{{Weight: 1, Actions: []of.Action{of.Output{Port: 3}}}}}
	svc := flow(testRound, pipeline.CategoryService, 1, "10.96.0.1", 0)
	svc.Actions = []of.Action{of.GroupAction{ID: 1}}
	if err := commit(t, r, func(bt *Batch) {
		bt.First(KindServicePort)
		bt.First(KindPod)
		bt.First(KindGateway)
		bt.Set(svcA, []*of.Group{g}, []of.Flow{svc})
		bt.Set(podOwner(1), nil, []of.Flow{flow(testRound, pipeline.CategoryPod, 1, "10.0.0.1", 1)})
		bt.Set(gwOwner, nil, []of.Flow{flow(testRound, pipeline.CategoryGateway, 0, "10.0.0.254", 5)})
	}); err != nil {
		t.Fatal(err)
	}
	r.Read(func(st *State) {
		if st.GroupCount() != 1 || st.GroupCountOf(KindServicePort) != 1 || st.GroupCountOf(KindPod) != 0 {
			t.Errorf("group counts %d, %d service-port, %d pod; want 1, 1, 0", st.GroupCount(), st.GroupCountOf(KindServicePort), st.GroupCountOf(KindPod))
		}
	})
	want := b.Dump()
	b.Wipe()
	if ok, _ := r.Verify(ctx, b); ok {
		t.Fatal("Verify after a wipe = true, want false")
	}
	calls := b.ApplyCount()
	if err := r.Replay(ctx); err != nil {
		t.Fatal(err)
	}
	var order []pipeline.Category
	for _, ops := range b.ApplyCalls()[calls:] {
		order = append(order, pipeline.CookieCategory(ops[0].Flow.Cookie))
	}
	// The writers' order (testPods): service ports (service and endpoint), gateway, pods.
	if want := []pipeline.Category{pipeline.CategoryService, pipeline.CategoryGateway, pipeline.CategoryPod}; !slices.Equal(order, want) {
		t.Errorf("Replay's bundles delete first %v, want one bundle per started writer: %v", order, want)
	}
	if got := b.Dump(); got != want {
		t.Errorf("after Replay OVS holds\n%s\nwant\n%s", got, want)
	}
	if ok, err := r.Verify(ctx, b); err != nil || !ok {
		t.Errorf("Verify after Replay = %v, %v, want true", ok, err)
	}
}

// TestFirstBundleDeletesStaleFlows checks that the first bundle of each writer in a new round
// deletes that writer's flows of earlier rounds (and its flows of this round OVS held without
// the state knowing them) and leaves the other writers' alone.
func TestFirstBundleDeletesStaleFlows(t *testing.T) {
	stale := map[Kind]of.Flow{
		KindGateway: flow(testRound-1, pipeline.CategoryGateway, 0, "10.0.0.254", 5),
		KindPod:     flow(testRound-1, pipeline.CategoryPod, 1, "10.0.0.1", 1),
	}
	orphan := flow(testRound, pipeline.CategoryPod, 9, "10.0.0.9", 9)
	fresh := map[Kind][]of.Flow{
		KindGateway: {flow(testRound, pipeline.CategoryGateway, 0, "10.0.0.254", 6)},
		KindPod:     {flow(testRound, pipeline.CategoryPod, 1, "10.0.0.1", 1)},
	}
	owners := map[Kind]Owner{KindGateway: gwOwner, KindPod: podOwner(1)}
	for _, first := range []Kind{KindGateway, KindPod} {
		t.Run(first.String(), func(t *testing.T) {
			r, b := newTest(t)
			var seed []of.Op
			for _, f := range []of.Flow{stale[KindGateway], stale[KindPod], orphan} {
				seed = append(seed, of.Op{Kind: of.AddFlow, Flow: &f})
			}
			if err := b.Apply(context.Background(), seed); err != nil {
				t.Fatal(err)
			}
			if err := commit(t, r, func(bt *Batch) {
				bt.First(first)
				bt.Set(owners[first], nil, slices.Clone(fresh[first]))
			}); err != nil {
				t.Fatal(err)
			}
			for k, f := range stale {
				n, _ := b.CountFlows(context.Background(), of.FlowFilter{Cookie: f.Cookie, CookieMask: pipeline.RoundMask | pipeline.CategoryMask})
				if want := map[bool]int{true: 0, false: 1}[k == first]; n != want {
					t.Errorf("%s's flows of the earlier round: %d left, want %d", k, n, want)
				}
			}
			n, _ := b.CountFlows(context.Background(), of.FlowFilter{Cookie: orphan.Cookie, CookieMask: pipeline.PodCookieMask})
			if want := map[bool]int{true: 0, false: 1}[first == KindPod]; n != want {
				t.Errorf("an orphan pod flow of this round: %d left, want %d", n, want)
			}
			if !r.Started(first) {
				t.Errorf("%s not started after its first bundle", first)
			}
		})
	}
}

// TestReplaceAddsUnchangedFlows checks Replace: its clean-up ops come first, attributed to the
// owner, its flows are added again even when unchanged, and those it lets go of are left to
// the clean-up.
func TestReplaceAddsUnchangedFlows(t *testing.T) {
	r, b := newTest(t)
	f := flow(testRound, pipeline.CategoryPod, 1, "10.0.0.1", 1)
	f2 := flow(testRound, pipeline.CategoryPod, 1, "10.0.0.11", 1)
	clean := of.Op{Kind: of.DeleteFlows, Flow: &of.Flow{Cookie: pipeline.PodCookie(0, 1), CookieMask: pipeline.PodCookieMask}}
	for i := 0; i < 2; i++ {
		if err := commit(t, r, func(bt *Batch) { bt.Replace(podOwner(1), []of.Flow{f}, clean) }); err != nil {
			t.Fatal(err)
		}
		if got, want := opKinds(b.LastOps()), fmt.Sprint(of.DeleteFlows)+","+fmt.Sprint(of.AddFlow); got != want {
			t.Errorf("replace %d: ops %q, want %q", i, got, want)
		}
	}
	if err := commit(t, r, func(bt *Batch) { bt.Replace(podOwner(1), []of.Flow{f, f2}, clean) }); err != nil {
		t.Fatal(err)
	}
	if err := commit(t, r, func(bt *Batch) { bt.Replace(podOwner(1), nil, clean) }); err != nil {
		t.Fatal(err)
	}
	if got, want := opKinds(b.LastOps()), fmt.Sprint(of.DeleteFlows); got != want || b.FlowCount() != 0 {
		t.Errorf("replace by nothing: ops %q, want %q (the clean-up deletes the flows); %d flows left", got, want, b.FlowCount())
	}
	b.RejectOps(func(op of.Op) error {
		if op.Kind == of.DeleteFlows {
			return errors.New("refused")
		}
		return nil
	})
	err := commit(t, r, func(bt *Batch) { bt.Replace(podOwner(1), nil, clean) })
	var rej *RejectedError
	if !errors.As(err, &rej) || !slices.Equal(rej.Owners, []Owner{podOwner(1)}) {
		t.Errorf("a refused clean-up op: %v, want it attributed to %v", err, podOwner(1))
	}
}
