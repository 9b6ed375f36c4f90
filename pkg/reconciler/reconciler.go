package reconciler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

// Writer is one writer of the bridge: the kind of its owners and the cookie categories of its
// flows (what Verify counts, Replay and its first bundle delete).
type Writer struct {
	Kind       Kind
	Categories []pipeline.Category
	// Learned are the tables where OVS learns flows beside the writer's own (session
	// affinity): the healer's table check only needs them to hold at least the writer's flows.
	Learned []uint8
	// Rank orders two owners of this kind for a contested flow key; nil means Compare. Owners
	// of different kinds rank by Compare (a lower kind wins). It runs with the reconciler's
	// lock held and must not call the reconciler.
	Rank RankFunc
	// Unstarted, when set, is what Replay does for the writer before its first bundle
	// committed (for example, install the node-level flows every packet needs).
	Unstarted func(ctx context.Context) error
}

func (w Writer) validate() []error {
	var errs []error
	if w.Kind == 0 {
		errs = append(errs, errors.New("reconciler: a writer has no kind"))
	}
	if len(w.Categories) == 0 {
		errs = append(errs, fmt.Errorf("reconciler: writer %s has no cookie category", w.Kind))
	}
	return errs
}

// Options configures a Reconciler.
type Options struct {
	// Bridge receives the bundles.
	Bridge of.Bridge
	// Round is this run's flow round (the writers' cookies carry it).
	Round uint16
	// Writers are the writers of the bridge known at creation; AddWriter adds others.
	Writers []Writer
}

// Validate reports every problem of o.
func (o Options) Validate() error {
	var errs []error
	if o.Bridge == nil {
		errs = append(errs, errors.New("reconciler: no bridge"))
	}
	if o.Round == 0 {
		errs = append(errs, errors.New("reconciler: no round"))
	}
	errs = append(errs, checkWriters(nil, o.Writers)...)
	return errors.Join(errs...)
}

// checkWriters reports the problems of adding ws to have.
func checkWriters(have map[Kind]Writer, ws []Writer) []error {
	var errs []error
	kinds := map[Kind]bool{}
	cats := map[pipeline.Category]Kind{}
	for k, w := range have {
		kinds[k] = true
		for _, c := range w.Categories {
			cats[c] = k
		}
	}
	for _, w := range ws {
		errs = append(errs, w.validate()...)
		if kinds[w.Kind] {
			errs = append(errs, fmt.Errorf("reconciler: writer kind %s given twice", w.Kind))
		}
		kinds[w.Kind] = true
		for _, c := range w.Categories {
			if k, ok := cats[c]; ok {
				errs = append(errs, fmt.Errorf("reconciler: cookie category %s belongs to writers %s and %s", c, k, w.Kind))
			}
			cats[c] = w.Kind
		}
	}
	return errs
}

// Reconciler owns the installed state of one bridge for its writers. It is safe for concurrent
// use: one batch (or replay) is applied at a time.
type Reconciler struct {
	bridge of.Bridge
	round  uint16
	// sem serializes batches and replays (capacity 1): it is held from Begin to Commit or
	// Abort, and by Replay.
	sem chan struct{}
	// mu guards what follows; it is never held during an Apply. The state and writers change
	// only with sem held too, so a batch reads them without mu.
	mu      sync.Mutex
	writers map[Kind]Writer
	// units are the writers' kinds by replay bundle, in replay order: one per writer of
	// Options, then one per AddWriter call.
	units [][]Kind
	state *State
	// seq is odd while a bundle is in flight: Verify then cannot tell.
	seq uint64
	// started holds the writers whose first bundle committed (Batch.First, Batch.Start).
	started map[Kind]bool
	// owed is set when a replay failed or OweReplay was called: the next batch replays first.
	owed bool
}

// New returns a reconciler with nothing installed.
func New(opts Options) (*Reconciler, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	r := &Reconciler{bridge: opts.Bridge, round: opts.Round, sem: make(chan struct{}, 1), writers: map[Kind]Writer{},
		started: map[Kind]bool{}}
	r.state = NewState(r.rank)
	for _, w := range opts.Writers {
		r.writers[w.Kind] = w
		r.units = append(r.units, []Kind{w.Kind})
	}
	return r, nil
}

// AddWriter adds writers, for example the proxier, created after the reconciler; Replay
// reinstalls their flows and groups together in one bundle, after those of the writers added
// before. It waits for a batch in flight.
func (r *Reconciler) AddWriter(ws ...Writer) error {
	r.sem <- struct{}{}
	defer func() { <-r.sem }()
	r.mu.Lock()
	defer r.mu.Unlock()
	if errs := checkWriters(r.writers, ws); len(errs) > 0 {
		return errors.Join(errs...)
	}
	unit := make([]Kind, 0, len(ws))
	for _, w := range ws {
		r.writers[w.Kind] = w
		unit = append(unit, w.Kind)
	}
	r.units = append(r.units, unit)
	return nil
}

// rank is the state's RankFunc: the writer's own within a kind, Compare across kinds. The state
// calls it with sem held, which AddWriter, the only writer of writers, takes too.
func (r *Reconciler) rank(a, b Owner) int {
	if a.Kind == b.Kind {
		if f := r.writers[a.Kind].Rank; f != nil {
			return f(a, b)
		}
	}
	return Compare(a, b)
}

// KeysOf returns the key and the digest of every flow of flows (State.KeysOf); any goroutine
// may call it, without the lock.
func (r *Reconciler) KeysOf(flows []of.Flow) ([]string, []Sum) { return r.state.KeysOf(flows) }

// Round returns this run's flow round.
func (r *Reconciler) Round() uint16 { return r.round }

// Started reports whether kind's first bundle committed.
func (r *Reconciler) Started(kind Kind) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.started[kind]
}

// Read calls f with the installed state, which f must not keep or change, under the
// reconciler's lock (f must not call the reconciler).
func (r *Reconciler) Read(f func(*State)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(r.state)
}

// Flows returns copies of the installed flows of every owner of kind.
func (r *Reconciler) Flows(kind Kind) []of.Flow {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []of.Flow
	for o := range r.state.owners {
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
	os := r.state.owners[o]
	return len(os.keys) > 0 || len(os.groups) > 0
}

// startedCategories returns the categories of the started writers, sorted; call with mu held.
func (r *Reconciler) startedCategories() []pipeline.Category {
	var kinds []Kind
	for k := range r.writers {
		kinds = append(kinds, k)
	}
	return r.startedCategoriesOf(kinds)
}

// startedCategoriesOf returns the categories of the started writers of kinds, sorted; call
// with mu held.
func (r *Reconciler) startedCategoriesOf(kinds []Kind) []pipeline.Category {
	var cats []pipeline.Category
	for _, k := range kinds {
		if r.started[k] {
			cats = append(cats, r.writers[k].Categories...)
		}
	}
	slices.Sort(cats)
	return cats
}

// apply sends ops with seq odd; call with sem held.
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
