package ipam

import (
	"net/netip"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// waiter is a Service that got no address for some families because the
// pools are exhausted or its requested address is taken.
type waiter struct {
	// seq orders waiters: lower started waiting earlier.
	seq   uint64
	needs []need
}

// need is one family a waiter lacks: the requested address, or any free
// address of pools.
type need struct {
	fam   v1.IPFamily
	want  netip.Addr
	pools []*Pool
}

func (n need) canUse(addr netip.Addr) bool {
	if FamilyOf(addr) != n.fam {
		return false
	}
	if n.want.IsValid() {
		return addr == n.want
	}
	return slices.ContainsFunc(n.pools, func(p *Pool) bool { return p.Contains(addr) })
}

// updateWaitingLocked records, after an Ensure, whether the Service waits
// (some family hit Exhausted or WantedInUse). A Service that keeps
// waiting keeps its place. When it stops waiting, the younger waiters
// are returned: what was reserved for it is free for them now.
func (a *Allocator) updateWaitingLocked(req Request, selected *Pool, problems []Problem) []types.NamespacedName {
	var needs []need
	for _, p := range problems {
		switch p.Kind {
		case WantedInUse:
			needs = append(needs, need{fam: p.Family, want: p.Addr})
		case Exhausted:
			needs = append(needs, need{fam: p.Family, pools: a.candidatePools(req, p.Family, selected)})
		}
	}
	if len(needs) == 0 {
		return a.stopWaitingLocked(req.Owner)
	}
	if w := a.waiters[req.Owner]; w != nil {
		w.needs = needs
		return nil
	}
	a.nextSeq++
	a.waiters[req.Owner] = &waiter{seq: a.nextSeq, needs: needs}
	return nil
}

// stopWaitingLocked ends the Service's wait, if any, and returns the
// Services that started waiting after it, longest waiting first.
func (a *Allocator) stopWaitingLocked(svc types.NamespacedName) []types.NamespacedName {
	w := a.waiters[svc]
	if w == nil {
		return nil
	}
	delete(a.waiters, svc)
	return a.waitersLocked(w.seq)
}

// reservedFor reports the Service, waiting longer than svc, that could
// take the free address addr.
func (a *Allocator) reservedFor(addr netip.Addr, svc types.NamespacedName) (types.NamespacedName, bool) {
	if _, kept := a.keptLocked(addr); kept {
		return types.NamespacedName{}, false // a deleted Service's reservation comes first
	}
	mine := ^uint64(0)
	if w := a.waiters[svc]; w != nil {
		mine = w.seq
	}
	var best types.NamespacedName
	bestSeq := mine
	for k, w := range a.waiters {
		if w.seq >= bestSeq || k == svc {
			continue
		}
		if slices.ContainsFunc(w.needs, func(n need) bool { return n.canUse(addr) }) {
			best, bestSeq = k, w.seq
		}
	}
	return best, bestSeq != mine
}

// Waiters returns the waiting Services, longest waiting first.
func (a *Allocator) Waiters() []types.NamespacedName {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.waitersLocked(0)
}

// waitersLocked returns the Services that started waiting after seq,
// longest waiting first.
func (a *Allocator) waitersLocked(after uint64) []types.NamespacedName {
	var out []types.NamespacedName
	for k, w := range a.waiters {
		if w.seq > after {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, func(x, y types.NamespacedName) int {
		return compareUint(a.waiters[x].seq, a.waiters[y].seq)
	})
	return out
}

func compareUint(x, y uint64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// Wait records, in call order, that the Service waits for the families of
// req it holds no address of (the requested address, or any address of
// its candidate pools), unless it already waits. A restarted controller
// calls it, oldest first, for the Services that were waiting before, so
// that they keep their place; their next Ensure settles it.
func (a *Allocator) Wait(req Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.waiters[req.Owner] != nil {
		return
	}
	var selected *Pool
	if req.Pool != "" {
		if selected = a.pool(req.Pool); selected == nil {
			return
		}
	}
	var ignored Result
	wanted := a.resolveWanted(req, selected, &ignored)
	held := a.owners[req.Owner]
	var needs []need
	for _, fam := range req.Families {
		if held != nil && slices.ContainsFunc(held.addrs, func(x netip.Addr) bool { return FamilyOf(x) == fam }) {
			continue
		}
		if w := wanted[fam]; w.IsValid() {
			needs = append(needs, need{fam: fam, want: w})
		} else if pools := a.candidatePools(req, fam, selected); len(pools) > 0 && a.selectPool(req) == nil {
			needs = append(needs, need{fam: fam, pools: pools})
		}
	}
	if len(needs) == 0 {
		return
	}
	a.nextSeq++
	a.waiters[req.Owner] = &waiter{seq: a.nextSeq, needs: needs}
}
