package ipam

import (
	"net/netip"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// Reservations configures how long the addresses of a deleted Service
// stay reserved for a Service of the same namespace and name. The zero
// value reserves nothing.
type Reservations struct {
	// Clock tells when a reservation ends; default the real clock.
	Clock clock.PassiveClock
	// Grace is how long an address stays reserved; 0 turns reserving off.
	Grace time.Duration
}

// reservation keeps a free address for the namespace/name of the deleted
// Service that held it, until a deadline.
type reservation struct {
	owner types.NamespacedName
	until time.Time
}

// keepLocked reserves addrs for svc, a Service being deleted.
func (a *Allocator) keepLocked(svc types.NamespacedName, addrs []netip.Addr) {
	if a.keep.Grace <= 0 {
		return
	}
	until := a.keep.Clock.Now().Add(a.keep.Grace)
	for _, addr := range addrs {
		a.kept[addr] = reservation{owner: svc, until: until}
	}
}

// keptLocked returns the reservation of addr still running; it forgets
// an ended one.
func (a *Allocator) keptLocked(addr netip.Addr) (reservation, bool) {
	r, ok := a.kept[addr]
	if !ok {
		return reservation{}, false
	}
	if !a.keep.Clock.Now().Before(r.until) {
		delete(a.kept, addr)
		return reservation{}, false
	}
	return r, true
}

// keptFromOthers reports whether addr, free of holders, is reserved for
// a Service other than svc, and until when.
func (a *Allocator) keptFromOthers(addr netip.Addr, svc types.NamespacedName) (reservation, bool) {
	if len(a.holders[addr]) > 0 {
		return reservation{}, false // sharing rules decide who joins a held address
	}
	r, ok := a.keptLocked(addr)
	if !ok || r.owner == svc {
		return reservation{}, false
	}
	return r, true
}

// keptFor returns the lowest free address of family fam in candidates
// reserved for svc: the address it held before it was deleted.
func (a *Allocator) keptFor(svc types.NamespacedName, fam v1.IPFamily, candidates []*Pool) (netip.Addr, bool) {
	var mine []netip.Addr
	for addr, r := range a.kept {
		if r.owner != svc || len(a.holders[addr]) > 0 || len(a.retiring[addr]) > 0 {
			continue
		}
		if _, ok := a.keptLocked(addr); ok {
			mine = append(mine, addr)
		}
	}
	return lowestIn(mine, fam, candidates)
}

// earliestEnd returns when the first reservation, for a Service other
// than svc, of an address of family fam in candidates ends (zero if none).
func (a *Allocator) earliestEnd(svc types.NamespacedName, fam v1.IPFamily, candidates []*Pool) time.Time {
	var first time.Time
	for addr := range a.kept {
		r, ok := a.keptFromOthers(addr, svc)
		if !ok || FamilyOf(addr) != fam || !slices.ContainsFunc(candidates, func(p *Pool) bool { return p.Contains(addr) }) {
			continue
		}
		if first.IsZero() || r.until.Before(first) {
			first = r.until
		}
	}
	return first
}

func earlier(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// ReleaseDeleted is Release for a Service that was deleted: the addresses
// it dropped and that nobody else holds stay reserved for its namespace
// and name for the grace period, so that no other Service (in particular
// one that was waiting for them) gets them before it is re-created.
func (a *Allocator) ReleaseDeleted(svc types.NamespacedName) ([]netip.Addr, []types.NamespacedName) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.releaseLocked(svc, true)
}
