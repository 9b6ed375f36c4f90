package reconciler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"k8s.io/klog/v2"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

// Writer is one writer of the bridge: the kind of its owners and the cookie categories of its
// flows (what Verify counts, Replay and its first bundle delete).
type Writer struct {
	Kind       Kind
	Categories []pipeline.Category
}

// Options configures a Reconciler.
type Options struct {
	// Bridge receives the bundles.
	Bridge of.Bridge
	// Round is this run's flow round (the writers' cookies carry it).
	Round uint16
	// Writers are the writers of the bridge through this reconciler.
	Writers []Writer
	// Rank orders the owners of a contested flow key; nil means Compare.
	Rank RankFunc
}

// Validate reports every problem of o.
func (o Options) Validate() error {
	var errs []error
	if o.Bridge == nil {
		errs = append(errs, errors.New("reconciler: no bridge"))
	}
	kinds := map[Kind]bool{}
	cats := map[pipeline.Category]Kind{}
	for _, w := range o.Writers {
		if kinds[w.Kind] {
			errs = append(errs, fmt.Errorf("reconciler: writer kind %s given twice", w.Kind))
		}
		kinds[w.Kind] = true
		if len(w.Categories) == 0 {
			errs = append(errs, fmt.Errorf("reconciler: writer %s has no cookie category", w.Kind))
		}
		for _, c := range w.Categories {
			if k, ok := cats[c]; ok {
				errs = append(errs, fmt.Errorf("reconciler: cookie category %s belongs to writers %s and %s", c, k, w.Kind))
			}
			cats[c] = w.Kind
		}
	}
	return errors.Join(errs...)
}

// Reconciler owns the installed state of one bridge for its writers (Options.Writers). It is
// safe for concurrent use: one batch is applied at a time.
type Reconciler struct {
	bridge  of.Bridge
	round   uint16
	writers map[Kind][]pipeline.Category
	// applyMu serializes batches and replays: it is held from Begin to Commit or Abort.
	applyMu sync.Mutex
	// mu guards what follows; it is never held during an Apply.
	mu    sync.Mutex
	state *State
	// seq is odd while a bundle is in flight: Verify then cannot tell.
	seq uint64
	// started holds the writers whose first bundle committed (Batch.First).
	started map[Kind]bool
}

// New returns a reconciler with nothing installed.
func New(opts Options) (*Reconciler, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	r := &Reconciler{bridge: opts.Bridge, round: opts.Round, writers: map[Kind][]pipeline.Category{},
		state: NewState(opts.Rank), started: map[Kind]bool{}}
	for _, w := range opts.Writers {
		r.writers[w.Kind] = slices.Clone(w.Categories)
	}
	return r, nil
}

// Round returns this run's flow round.
func (r *Reconciler) Round() uint16 { return r.round }

// Started reports whether kind's first bundle committed.
func (r *Reconciler) Started(kind Kind) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.started[kind]
}

// Flows returns copies of the installed flows of every owner of kind.
func (r *Reconciler) Flows(kind Kind) []of.Flow {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []of.Flow
	for o := range r.state.owned {
		if o.Kind == kind {
			r.state.OwnerFlows(o, func(f *of.Flow) { out = append(out, *f) })
		}
	}
	return out
}

// Has reports whether o has flows or groups installed.
func (r *Reconciler) Has(o Owner) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state.FlowCount(o) > 0 || len(r.state.groups[o]) > 0
}

// startedCategories returns the categories of the started writers, sorted; call with mu held.
func (r *Reconciler) startedCategories() []pipeline.Category {
	var cats []pipeline.Category
	for k, cs := range r.writers {
		if r.started[k] {
			cats = append(cats, cs...)
		}
	}
	slices.Sort(cats)
	return cats
}

// apply sends ops with seq odd; call with applyMu held.
func (r *Reconciler) apply(ctx context.Context, ops []of.Op) error {
	r.mu.Lock()
	r.seq++
	r.mu.Unlock()
	err := r.bridge.Apply(ctx, ops)
	r.mu.Lock()
	r.seq++
	r.mu.Unlock()
	return err
}

// Name names the reconciler as the owner of the bridge's flows (healer.Owner).
func (r *Reconciler) Name() string { return "bridge" }

// Verify compares, per cookie category of this round of every started writer, the flows OVS
// holds (counted through c) with those installed; false means OVS lost some and a Replay is
// needed. While a bundle is in flight, or when one was applied while it counted, it reports
// true: it cannot tell.
func (r *Reconciler) Verify(ctx context.Context, c of.FlowCounter) (bool, error) {
	r.mu.Lock()
	seq, cats := r.seq, r.startedCategories()
	want := make([]int, len(cats))
	for i, cat := range cats {
		want[i] = r.state.PerCategory(cat)
	}
	r.mu.Unlock()
	if seq%2 == 1 {
		return true, nil
	}
	for i, cat := range cats {
		n, err := c.CountFlows(ctx, of.FlowFilter{Cookie: pipeline.Cookie(r.round, cat, 0), CookieMask: pipeline.RoundMask | pipeline.CategoryMask})
		if err != nil {
			return false, fmt.Errorf("counting %s flows: %w", cat, err)
		}
		if n != want[i] {
			r.mu.Lock()
			changed := r.seq != seq
			r.mu.Unlock()
			if changed {
				return true, nil
			}
			klog.InfoS("OVS holds other flows than installed", "category", cat, "installed", want[i], "inOVS", n, "round", r.round)
			return false, nil
		}
	}
	return true, nil
}

// Replay reinstalls everything the started writers installed, in one bundle, whatever OVS holds
// now: it deletes this round's flows of their categories and every group ID held, then adds
// every group and flow. It waits for a batch in flight. Before any writer started it does
// nothing.
func (r *Reconciler) Replay(ctx context.Context) error {
	r.applyMu.Lock()
	defer r.applyMu.Unlock()
	r.mu.Lock()
	cats := r.startedCategories()
	var ops []of.Op
	if len(cats) > 0 {
		ops = r.state.ReplayOps(r.round, cats)
	}
	flows, groups := r.state.Len(), r.state.GroupCount()
	r.mu.Unlock()
	if len(ops) == 0 {
		return nil
	}
	if err := r.apply(ctx, ops); err != nil {
		return fmt.Errorf("replaying %d ops: %w", len(ops), err)
	}
	klog.InfoS("Replayed the bridge's flows and groups", "ops", len(ops), "flows", flows, "groups", groups)
	return nil
}
