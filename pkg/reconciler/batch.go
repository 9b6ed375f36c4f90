package reconciler

import (
	"context"
	"fmt"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// Batch is one change of the installed state, committed as one bundle. Only one batch is open
// at a time: Begin waits for the one open to be committed or aborted.
type Batch struct {
	r     *Reconciler
	tx    *Txn
	first []Kind
	// ops and by are the bundle, once computed (Ops).
	ops  []of.Op
	by   [][]Owner
	done bool
}

// Begin opens a batch. Commit or Abort it.
func (r *Reconciler) Begin() *Batch {
	r.sem <- struct{}{}
	r.mu.Lock()
	defer r.mu.Unlock()
	return &Batch{r: r, tx: r.state.Begin()}
}

// Set stages o's groups and flows (Txn.Set: the slices are handed over).
func (b *Batch) Set(o Owner, groups []*of.Group, flows []of.Flow) { b.tx.Set(o, groups, flows) }

// Delete stages o's removal.
func (b *Batch) Delete(o Owner) { b.tx.Delete(o) }

// Replace stages o's flows where OVS may hold others of o (Txn.Replace).
func (b *Batch) Replace(o Owner, flows []of.Flow, clean ...of.Op) { b.tx.Replace(o, flows, clean...) }

// Txn returns the batch's transaction, to stage through it directly (for example with keys and
// digests computed ahead, Txn.SetKeyed). The installed state it reads does not change while the
// batch is open.
func (b *Batch) Txn() *Txn { return b.tx }

// Start marks kind started once the batch committed, without First's clean-up: the writer's
// first bundle brings its own (Txn.PreDeletes, Txn.ExtraDeletes).
func (b *Batch) Start(kind Kind) { b.first = append(b.first, kind) }

// Ops returns the batch's bundle and, per op, its owners (Txn.Ops); stage nothing after it. It
// reads the installed state without the lock: only batches change it, one at a time.
func (b *Batch) Ops() ([]of.Op, [][]Owner) {
	if b.ops == nil {
		b.ops, b.by = b.tx.Ops()
		if b.ops == nil {
			b.ops = []of.Op{}
		}
	}
	return b.ops, b.by
}

// First makes the batch kind's first bundle: every flow of its categories of any round is
// deleted first and every flow of its owners added (Txn.ReplaceKind). Once it committed, Verify
// counts kind's flows and Replay reinstalls them.
func (b *Batch) First(kind Kind) {
	b.r.mu.Lock()
	cats := b.r.writers[kind].Categories
	b.r.mu.Unlock()
	b.tx.ReplaceKind(kind, cats)
	b.first = append(b.first, kind)
}

// RejectedError is a batch OVS refused, with the owners of the op it named (none when it named
// no op, or a clean-up op of no owner).
type RejectedError struct {
	Owners []Owner
	Err    error
}

func (e *RejectedError) Error() string {
	if len(e.Owners) == 0 {
		return e.Err.Error()
	}
	return fmt.Sprintf("OVS rejected an op of %v: %v", e.Owners, e.Err)
}

func (e *RejectedError) Unwrap() error { return e.Err }

// Commit sends the net difference as one bundle and, when OVS accepted it, makes it the
// installed state; otherwise nothing changes and the error is a *RejectedError. When a replay
// is owed (OweReplay, a failed Replay) it replays first and, if that fails, returns its error.
// It closes the batch.
func (b *Batch) Commit(ctx context.Context) error {
	if b.done {
		return fmt.Errorf("reconciler: batch already closed")
	}
	defer b.Abort()
	r := b.r
	r.mu.Lock()
	for _, k := range b.first {
		if _, ok := r.writers[k]; !ok {
			r.mu.Unlock()
			return fmt.Errorf("reconciler: no writer of kind %s", k)
		}
	}
	owed := r.owed
	r.mu.Unlock()
	if owed {
		if err := r.replayHeld(ctx); err != nil {
			return err
		}
	}
	ops, by := b.Ops()
	if len(ops) > 0 {
		if err := r.apply(ctx, ops); err != nil {
			return &RejectedError{Owners: RejectedOwners(by, err), Err: err}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	b.tx.Commit()
	for _, k := range b.first {
		r.started[k] = true
	}
	return nil
}

// Abort closes the batch without changing anything; it does nothing after Commit.
func (b *Batch) Abort() {
	if b.done {
		return
	}
	b.done = true
	<-b.r.sem
}
