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
	done  bool
}

// Begin opens a batch. Commit or Abort it.
func (r *Reconciler) Begin() *Batch {
	r.applyMu.Lock()
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

// First makes the batch kind's first bundle: every flow of its categories of any round is
// deleted first and every flow of its owners added (Txn.ReplaceKind). Once it committed, Verify
// counts kind's flows and Replay reinstalls them.
func (b *Batch) First(kind Kind) {
	b.tx.ReplaceKind(kind, b.r.writers[kind])
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
// installed state; otherwise nothing changes and the error is a *RejectedError. It closes the
// batch.
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
	ops, by := b.tx.Ops()
	r.mu.Unlock()
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
	b.r.applyMu.Unlock()
}
