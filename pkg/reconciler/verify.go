package reconciler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"k8s.io/klog/v2"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

// Name names the reconciler as the owner of the bridge's flows and groups (healer.Owner).
func (r *Reconciler) Name() string { return "bridge" }

// Verify compares, per cookie category of this round of every started writer, the flows OVS
// holds (counted through c) with those installed; false means OVS lost some and a Replay is
// needed. Groups cannot be counted; a lost group shows through its lost flows (OVS deletes the
// flows of a deleted group). While a bundle is in flight, or when one was applied while it
// counted, it reports true: it cannot tell.
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

// InstalledVersion is a fingerprint of the installed flow counts, in all and per category of
// every started writer (healer.TableCounts), which a batch that changes nothing leaves as it
// was; false while a bundle is in flight or before any writer started. A change that keeps
// every one of those counts but moves flows between tables keeps it too; the healer then sees
// table counts differ from the ones it cached, verifies and asks InstalledFlows again.
func (r *Reconciler) InstalledVersion() (uint64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.installedVersionLocked()
}

func (r *Reconciler) installedVersionLocked() (uint64, bool) {
	cats := r.startedCategories()
	if len(cats) == 0 || r.seq%2 == 1 {
		return 0, false
	}
	v := uint64(r.state.Len())
	for _, cat := range cats {
		v = v*1_000_003 + uint64(r.state.PerCategory(cat))
	}
	return v, true
}

// InstalledFlows says how many flows are installed in each table (healer.TableCounts), so that
// the periodic check compares a table statistics reply instead of counting flows per category
// in OVS; false as InstalledVersion. Learned lists the started writers' Learned tables.
func (r *Reconciler) InstalledFlows() (of.InstalledFlows, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.installedVersionLocked()
	if !ok {
		return of.InstalledFlows{}, false
	}
	var learned []uint8
	for k, w := range r.writers {
		if r.started[k] {
			learned = append(learned, w.Learned...)
		}
	}
	slices.Sort(learned)
	return of.InstalledFlows{PerTable: r.state.FlowsPerTable(), Learned: slices.Compact(learned), Version: v}, true
}

// Replay reinstalls everything the started writers installed whatever OVS holds now, one bundle
// per unit of writers (one per writer of Options, then one per AddWriter call: the gateway,
// the pods, then the proxier's), in that order: each deletes this round's flows of its
// writers' categories and every group ID they hold, then adds every group and flow of theirs.
// For a writer not started it runs its Unstarted hook instead, in its place. It waits for a
// batch in flight, or until ctx is done. When it fails, the next batch replays first.
func (r *Reconciler) Replay(ctx context.Context) error {
	select {
	case r.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-r.sem }()
	return r.replayHeld(ctx)
}

// OweReplay makes the next batch replay first (a writer found that OVS lost its state).
func (r *Reconciler) OweReplay() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.owed = true
}

// replayHeld is Replay with sem held.
func (r *Reconciler) replayHeld(ctx context.Context) error {
	err := r.replayOps(ctx)
	r.mu.Lock()
	r.owed = err != nil
	r.mu.Unlock()
	return err
}

func (r *Reconciler) replayOps(ctx context.Context) error {
	steps := r.replaySteps()
	var errs []error
	for _, st := range steps {
		if st.hook != nil {
			errs = append(errs, st.hook(ctx))
			continue
		}
		start := time.Now()
		if err := r.apply(ctx, st.ops); err != nil {
			return errors.Join(append(errs, fmt.Errorf("replaying %d ops of %v: %w", len(st.ops), kindNames(st.kinds), err))...)
		}
		klog.InfoS("Replayed flows and groups", "writers", kindNames(st.kinds), "ops", len(st.ops), "duration", time.Since(start))
	}
	return errors.Join(errs...)
}

// replayStep is one bundle of a replay (the flows and groups of the started writers of one
// unit) or the Unstarted hook of a writer not started.
type replayStep struct {
	kinds []Kind
	ops   []of.Op
	hook  func(context.Context) error
}

// replaySteps returns a replay's steps, unit by unit in order (sem held: the state does not
// change meanwhile).
func (r *Reconciler) replaySteps() []replayStep {
	r.mu.Lock()
	defer r.mu.Unlock()
	var steps []replayStep
	for _, unit := range r.units {
		if cats := r.startedCategoriesOf(unit); len(cats) > 0 {
			var started []Kind
			for _, k := range unit {
				if r.started[k] {
					started = append(started, k)
				}
			}
			mine := func(o Owner) bool { return slices.Contains(started, o.Kind) }
			steps = append(steps, replayStep{kinds: started, ops: r.state.ReplayOps(r.round, cats, mine)})
		}
		for _, k := range unit {
			if w := r.writers[k]; !r.started[k] && w.Unstarted != nil {
				steps = append(steps, replayStep{kinds: []Kind{k}, hook: w.Unstarted})
			}
		}
	}
	return steps
}

func kindNames(kinds []Kind) []string {
	out := make([]string, len(kinds))
	for i, k := range kinds {
		out[i] = k.String()
	}
	return out
}
