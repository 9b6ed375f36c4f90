package ipam

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// PortKey is a Service port as far as sharing is concerned: two Services
// can share an address only if no PortKey appears in both.
type PortKey struct {
	Protocol v1.Protocol
	Port     int32
}

func (p PortKey) String() string { return fmt.Sprintf("%d/%s", p.Port, p.Protocol) }

// Request is what one Service needs from the allocator.
type Request struct {
	// Owner is the Service.
	Owner types.NamespacedName
	// Families lists the families to allocate, one address each, in order
	// (spec.ipFamilies).
	Families []v1.IPFamily
	// Pool restricts allocation to the named pool; "" means any pool, in
	// configuration order.
	Pool string
	// Wanted are the requested addresses (at most one per family).
	Wanted []netip.Addr
	// ShareKey opts in to sharing: the Service may share an address with
	// Services that have the same non-empty key and no clashing port.
	ShareKey string
	// Ports are the Service's ports.
	Ports []PortKey
	// Labels are the Service's labels and NamespaceLabels those of its
	// namespace (nil when unknown): pool scopes select on them.
	Labels, NamespaceLabels map[string]string
}

func (r Request) subject() Subject {
	return Subject{Namespace: r.Owner.Namespace, NamespaceLabels: r.NamespaceLabels, Labels: r.Labels}
}

// Assignment is an address held by a Service and its pool.
type Assignment struct {
	Addr netip.Addr
	Pool *Pool
}

// ProblemKind classifies why a family got no (or not the wanted) address.
type ProblemKind int

// Problem kinds.
const (
	// NoPoolForFamily: no pool (or not the selected pool) has addresses
	// of the family.
	NoPoolForFamily ProblemKind = iota
	// WantedNotInPool: a requested address is in no pool, not in the
	// selected pool, or of a family the Service does not use. Another
	// address was allocated instead where possible.
	WantedNotInPool
	// WantedInUse: a requested address is held by a Service it cannot be
	// shared with.
	WantedInUse
	// Exhausted: the pools have no free address of the family.
	Exhausted
	// UnknownPool: the selected pool is not configured.
	UnknownPool
	// NoPools: no pool is configured at all.
	NoPools
	// PoolNotAllowed: the selected pool, or the pool of a requested
	// address, is not for this Service (its namespaces, namespaceSelector
	// or serviceSelector).
	PoolNotAllowed
	// SharingNotAllowed: a requested address is held by Services of
	// another namespace that it could share it with, but its pool does
	// not allow sharing across namespaces.
	SharingNotAllowed
)

// Problem is one thing the allocator could not do for a request.
type Problem struct {
	Kind   ProblemKind
	Family v1.IPFamily
	// Addr is the requested address for Wanted* problems.
	Addr    netip.Addr
	Message string
}

func (p Problem) String() string { return p.Message }

// Result is the outcome of Allocator.Ensure.
type Result struct {
	// Assigned are the addresses the Service now holds, in family order.
	Assigned []Assignment
	// Added are the addresses newly assigned by this call.
	Added []Assignment
	// Retiring are the addresses the Service no longer holds but may
	// still publish: they stay blocked for every other Service until the
	// caller, once its writes that stop publishing them succeeded, calls
	// Unpublished.
	Retiring []netip.Addr
	// Wake are the Services waiting for an address that this call may
	// have unblocked (it ended the Service's own wait, lifting what was
	// reserved for it), longest waiting first.
	Wake []types.NamespacedName
	// Problems explain missing or substituted addresses.
	Problems []Problem
	// RetryAt, when set, is when the reservation of a deleted Service's
	// address that kept this Service from an address ends.
	RetryAt time.Time
}

type owner struct {
	addrs    []netip.Addr
	shareKey string
	ports    []PortKey
}

// Allocator tracks which Service holds which address. It is safe for
// concurrent use; every method runs under one lock.
//
// An address a Service stops holding is first *retiring*: still blocked
// for everybody else until the caller reports (Unpublished) that the
// Service no longer publishes it. Services that got no address because
// their pools are exhausted or their requested address is taken are
// *waiting*, in the order they started to wait; a free address that an
// older waiter could take is reserved for it, so a younger Service (or a
// new one) never overtakes it, whichever worker syncs first.
type Allocator struct {
	mu      sync.Mutex
	pools   []*Pool
	holders map[netip.Addr][]types.NamespacedName
	owners  map[types.NamespacedName]*owner
	// retiring maps an address to the Services that dropped it but may
	// still publish it.
	retiring map[netip.Addr][]types.NamespacedName
	waiters  map[types.NamespacedName]*waiter
	nextSeq  uint64
	keep     Reservations
	// kept are the reservations of deleted Services' addresses.
	kept map[netip.Addr]reservation
}

// New returns an allocator over pools (in allocation order) that keeps
// the addresses of deleted Services as keep says.
func New(pools []*Pool, keep Reservations) *Allocator {
	if keep.Clock == nil {
		keep.Clock = clock.RealClock{}
	}
	return &Allocator{
		pools:    pools,
		keep:     keep,
		kept:     make(map[netip.Addr]reservation),
		holders:  make(map[netip.Addr][]types.NamespacedName),
		owners:   make(map[types.NamespacedName]*owner),
		retiring: make(map[netip.Addr][]types.NamespacedName),
		waiters:  make(map[types.NamespacedName]*waiter),
	}
}

// Pools returns the configured pools.
func (a *Allocator) Pools() []*Pool { return a.pools }

// PoolOf returns the pool containing addr, or nil.
func (a *Allocator) PoolOf(addr netip.Addr) *Pool {
	for _, p := range a.pools {
		if p.Contains(addr) {
			return p
		}
	}
	return nil
}

func (a *Allocator) pool(name string) *Pool {
	for _, p := range a.pools {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// Holders returns the Services holding addr, sorted.
func (a *Allocator) Holders(addr netip.Addr) []types.NamespacedName {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.holders[addr])
}

// Assigned returns the addresses held by the Service.
func (a *Allocator) Assigned(svc types.NamespacedName) []Assignment {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.assignments(svc)
}

// InUse returns the number of addresses held by at least one Service or
// retiring.
func (a *Allocator) InUse() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := len(a.holders)
	for addr := range a.retiring {
		if len(a.holders[addr]) == 0 {
			n++
		}
	}
	return n
}

// PoolUsage is how many addresses of a pool are in use.
type PoolUsage struct {
	Pool *Pool
	// Used counts the pool's addresses held by a Service or retiring.
	Used int
	// Reserved counts the pool's free addresses kept for deleted Services.
	Reserved int
}

// Usage returns the use of every pool, in pool order.
func (a *Allocator) Usage() []PoolUsage {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]PoolUsage, len(a.pools))
	for i, p := range a.pools {
		out[i].Pool = p
	}
	count := func(addr netip.Addr) {
		for i, p := range a.pools {
			if p.Contains(addr) {
				out[i].Used++
				return
			}
		}
	}
	for addr := range a.holders {
		count(addr)
	}
	for addr := range a.retiring {
		if len(a.holders[addr]) == 0 {
			count(addr)
		}
	}
	for addr := range a.kept {
		if _, ok := a.keptLocked(addr); !ok || len(a.holders[addr]) > 0 || len(a.retiring[addr]) > 0 {
			continue
		}
		for i, p := range a.pools {
			if p.Contains(addr) {
				out[i].Reserved++
			}
		}
	}
	return out
}

func (a *Allocator) assignments(svc types.NamespacedName) []Assignment {
	o := a.owners[svc]
	if o == nil {
		return nil
	}
	out := make([]Assignment, 0, len(o.addrs))
	for _, addr := range o.addrs {
		out = append(out, Assignment{Addr: addr, Pool: a.PoolOf(addr)})
	}
	return out
}

// Ensure makes the Service hold what req asks for, as far as possible. It
// is idempotent: addresses the Service holds that still fit the request
// are kept, others are released, missing ones are allocated.
func (a *Allocator) Ensure(req Request) Result {
	a.mu.Lock()
	defer a.mu.Unlock()
	o := a.owners[req.Owner]
	if o == nil {
		o = &owner{}
		a.owners[req.Owner] = o
	}
	o.shareKey, o.ports = req.ShareKey, slices.Clone(req.Ports)
	var res Result

	var selected *Pool
	if p := a.selectPool(req); p != nil {
		res.Retiring = a.retireLocked(req.Owner)
		res.Wake = a.stopWaitingLocked(req.Owner)
		res.Problems = append(res.Problems, *p)
		return res
	}
	if req.Pool != "" {
		selected = a.pool(req.Pool)
	}
	wanted := a.resolveWanted(req, selected, &res)

	keep := make([]netip.Addr, 0, len(req.Families))
	for _, fam := range req.Families {
		if addr, ok := a.ensureFamily(req, o, fam, selected, wanted[fam], &res); ok {
			keep = append(keep, addr)
		}
	}
	// Retire whatever the Service holds beyond keep (e.g. a family it
	// dropped).
	for _, addr := range o.addrs {
		if !slices.Contains(keep, addr) {
			a.dropHolder(addr, req.Owner)
			a.retiring[addr] = insertSorted(a.retiring[addr], req.Owner)
			res.Retiring = append(res.Retiring, addr)
		}
	}
	o.addrs = keep
	if len(keep) == 0 {
		delete(a.owners, req.Owner)
	}
	res.Assigned = a.assignments(req.Owner)
	res.Wake = a.updateWaitingLocked(req, selected, res.Problems)
	return res
}

// selectPool returns the problem that keeps the Service from any address
// before allocation starts: no pool configured, or the pool it names
// unknown or not for it.
func (a *Allocator) selectPool(req Request) *Problem {
	if len(a.pools) == 0 {
		return &Problem{Kind: NoPools, Message: "no address pool is configured (antrea-controller ipPools is empty)"}
	}
	if req.Pool == "" {
		return nil
	}
	p := a.pool(req.Pool)
	if p == nil {
		return &Problem{Kind: UnknownPool, Message: fmt.Sprintf("pool %q (annotation) is not configured", req.Pool)}
	}
	if why := p.refusal(req.subject()); why != "" {
		return &Problem{Kind: PoolNotAllowed, Message: why}
	}
	return nil
}

// resolveWanted maps each usable requested address to its family and
// records problems for the others.
func (a *Allocator) resolveWanted(req Request, selected *Pool, res *Result) map[v1.IPFamily]netip.Addr {
	wanted := map[v1.IPFamily]netip.Addr{}
	for _, w := range req.Wanted {
		w = w.Unmap()
		fam := FamilyOf(w)
		bad := func(format string, args ...any) {
			res.Problems = append(res.Problems, Problem{Kind: WantedNotInPool, Family: fam, Addr: w,
				Message: fmt.Sprintf("requested address %s ", w) + fmt.Sprintf(format, args...)})
		}
		switch {
		case !slices.Contains(req.Families, fam):
			bad("is %s but the Service's ipFamilies are %v", fam, req.Families)
		case selected != nil && !selected.Contains(w):
			bad("is not in pool %q", selected.Name)
		case a.PoolOf(w) == nil:
			bad("is not in any pool")
		case a.PoolOf(w).refusal(req.subject()) != "":
			res.Problems = append(res.Problems, Problem{Kind: PoolNotAllowed, Family: fam, Addr: w,
				Message: fmt.Sprintf("requested address %s: %s", w, a.PoolOf(w).refusal(req.subject()))})
		case wanted[fam].IsValid():
			bad("is a second %s address; only %s is used", fam, wanted[fam])
		default:
			wanted[fam] = w
		}
	}
	return wanted
}

// ensureFamily keeps, or allocates, the Service's address of family fam.
func (a *Allocator) ensureFamily(req Request, o *owner, fam v1.IPFamily, selected *Pool, want netip.Addr, res *Result) (netip.Addr, bool) {
	candidates := a.candidatePools(req, fam, selected)
	if want.IsValid() {
		candidates = []*Pool{a.PoolOf(want)}
	}
	if len(candidates) == 0 {
		res.Problems = append(res.Problems, Problem{Kind: NoPoolForFamily, Family: fam, Message: a.noPoolMessage(req, fam, selected)})
		return netip.Addr{}, false
	}
	for _, cur := range o.addrs {
		if FamilyOf(cur) != fam {
			continue
		}
		fits := a.canHold(cur, req.Owner, o)
		if want.IsValid() {
			fits = fits && cur == want
		} else {
			fits = fits && slices.ContainsFunc(candidates, func(p *Pool) bool { return p.Contains(cur) })
		}
		if fits {
			return cur, true
		}
	}
	if want.IsValid() {
		if r, ok := a.keptFromOthers(want, req.Owner); ok {
			res.RetryAt = earlier(res.RetryAt, r.until)
			res.Problems = append(res.Problems, Problem{Kind: WantedInUse, Family: fam, Addr: want,
				Message: fmt.Sprintf("requested address %s is reserved for %s, deleted, until %s in case it is re-created",
					want, r.owner, r.until.UTC().Format(time.RFC3339))})
			return netip.Addr{}, false
		}
		if !a.canHold(want, req.Owner, o) {
			kind := WantedInUse
			if a.crossNamespaceOnly(want, req.Owner, o) {
				kind = SharingNotAllowed
			}
			res.Problems = append(res.Problems, Problem{Kind: kind, Family: fam, Addr: want,
				Message: fmt.Sprintf("requested address %s is in use by %s", want, a.describeHolders(want, req.Owner, o))})
			return netip.Addr{}, false
		}
		if w, ok := a.reservedFor(want, req.Owner); ok && len(a.holders[want]) == 0 {
			res.Problems = append(res.Problems, Problem{Kind: WantedInUse, Family: fam, Addr: want,
				Message: fmt.Sprintf("requested address %s is reserved for %s, which has waited longer for an address", want, w)})
			return netip.Addr{}, false
		}
		return a.take(want, req.Owner, res), true
	}
	if addr, ok := a.keptFor(req.Owner, fam, candidates); ok {
		return a.take(addr, req.Owner, res), true
	}
	if o.shareKey != "" {
		if addr, ok := a.findShareable(fam, candidates, req.Owner, o); ok {
			return a.take(addr, req.Owner, res), true
		}
	}
	busy := func(x netip.Addr) bool {
		if len(a.holders[x]) > 0 || len(a.retiring[x]) > 0 {
			return true
		}
		if _, kept := a.keptFromOthers(x, req.Owner); kept {
			return true
		}
		_, reserved := a.reservedFor(x, req.Owner)
		return reserved
	}
	for _, p := range candidates {
		if addr, ok := p.firstFree(fam, busy); ok {
			return a.take(addr, req.Owner, res), true
		}
	}
	names := make([]string, len(candidates))
	for i, p := range candidates {
		names[i] = fmt.Sprintf("%q", p.Name)
	}
	msg := fmt.Sprintf("no free %s address in pool %s", fam, strings.Join(names, ", "))
	if end := a.earliestEnd(req.Owner, fam, candidates); !end.IsZero() {
		res.RetryAt = earlier(res.RetryAt, end)
		msg += fmt.Sprintf(" (some are reserved for deleted Services until %s)", end.UTC().Format(time.RFC3339))
	}
	res.Problems = append(res.Problems, Problem{Kind: Exhausted, Family: fam, Message: msg})
	return netip.Addr{}, false
}

// candidatePools returns the pools that may give the Service an address
// of family fam: the selected pool, else every pool for automatic
// allocation (autoAssign) whose scope admits the Service.
func (a *Allocator) candidatePools(req Request, fam v1.IPFamily, selected *Pool) []*Pool {
	if selected != nil {
		if selected.HasFamily(fam) {
			return []*Pool{selected}
		}
		return nil
	}
	var out []*Pool
	for _, p := range a.pools {
		if p.HasFamily(fam) && !p.Scope.Manual && p.refusal(req.subject()) == "" {
			out = append(out, p)
		}
	}
	return out
}

// noPoolMessage explains why no pool may give the Service an address of
// family fam.
func (a *Allocator) noPoolMessage(req Request, fam v1.IPFamily, selected *Pool) string {
	if selected != nil {
		return fmt.Sprintf("pool %q has no %s addresses", selected.Name, fam)
	}
	var why []string
	for _, p := range a.pools {
		switch {
		case !p.HasFamily(fam):
		case p.Scope.Manual:
			why = append(why, fmt.Sprintf("pool %q has autoAssign false (name it or request one of its addresses)", p.Name))
		default:
			why = append(why, p.refusal(req.subject()))
		}
	}
	if len(why) == 0 {
		return fmt.Sprintf("no pool has %s addresses", fam)
	}
	return fmt.Sprintf("no pool with %s addresses is for this Service: %s", fam, strings.Join(why, "; "))
}

func (a *Allocator) take(addr netip.Addr, svc types.NamespacedName, res *Result) netip.Addr {
	a.dropRetiring(addr, svc)
	delete(a.kept, addr)
	if !slices.Contains(a.holders[addr], svc) {
		a.holders[addr] = insertSorted(a.holders[addr], svc)
		res.Added = append(res.Added, Assignment{Addr: addr, Pool: a.PoolOf(addr)})
	}
	return addr
}

func (a *Allocator) dropHolder(addr netip.Addr, svc types.NamespacedName) {
	hs := slices.DeleteFunc(a.holders[addr], func(h types.NamespacedName) bool { return h == svc })
	if len(hs) == 0 {
		delete(a.holders, addr)
	} else {
		a.holders[addr] = hs
	}
}

func (a *Allocator) dropRetiring(addr netip.Addr, svc types.NamespacedName) {
	rs := slices.DeleteFunc(a.retiring[addr], func(r types.NamespacedName) bool { return r == svc })
	if len(rs) == 0 {
		delete(a.retiring, addr)
	} else {
		a.retiring[addr] = rs
	}
}

// Release frees every address the Service holds or is retiring, for a
// Service that publishes nothing any more (deleted, or its status
// cleared), and ends its wait. It returns the addresses the Service
// dropped (shared ones may still have other holders) and the waiting
// Services to retry, longest waiting first.
func (a *Allocator) Release(svc types.NamespacedName) ([]netip.Addr, []types.NamespacedName) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.releaseLocked(svc, false)
}

// releaseLocked is Release, keeping the dropped addresses for svc when it
// was deleted (keep).
func (a *Allocator) releaseLocked(svc types.NamespacedName, keep bool) ([]netip.Addr, []types.NamespacedName) {
	a.retireLocked(svc)
	wake := a.stopWaitingLocked(svc)
	dropped, freed := a.unpublishedLocked(svc)
	if keep {
		a.keepLocked(svc, dropped)
	}
	if freed {
		wake = a.waitersLocked(0)
	}
	return dropped, wake
}

// Retire makes the Service hold nothing and ends its wait: its addresses
// become retiring (blocked until Unpublished). It returns them, and the
// waiting Services to retry.
func (a *Allocator) Retire(svc types.NamespacedName) ([]netip.Addr, []types.NamespacedName) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.retireLocked(svc), a.stopWaitingLocked(svc)
}

func (a *Allocator) retireLocked(svc types.NamespacedName) []netip.Addr {
	o := a.owners[svc]
	if o == nil {
		return nil
	}
	for _, addr := range o.addrs {
		a.dropHolder(addr, svc)
		a.retiring[addr] = insertSorted(a.retiring[addr], svc)
	}
	delete(a.owners, svc)
	return o.addrs
}

// Unpublished reports that the Service no longer publishes the addresses
// it is retiring (the writes that removed them succeeded): they are
// freed. It returns those addresses (shared ones may still have other
// holders) and, when one of them is now free, the waiting Services to
// retry, longest waiting first.
func (a *Allocator) Unpublished(svc types.NamespacedName) ([]netip.Addr, []types.NamespacedName) {
	a.mu.Lock()
	defer a.mu.Unlock()
	dropped, freed := a.unpublishedLocked(svc)
	if !freed {
		return dropped, nil
	}
	return dropped, a.waitersLocked(0)
}

// Retiring returns the addresses the Service dropped but may still
// publish, sorted.
func (a *Allocator) Retiring(svc types.NamespacedName) []netip.Addr {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []netip.Addr
	for addr, rs := range a.retiring {
		if slices.Contains(rs, svc) {
			out = append(out, addr)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// unpublishedLocked ends the Service's retiring of its addresses and
// returns them, and whether any of them is now free of every holder.
func (a *Allocator) unpublishedLocked(svc types.NamespacedName) ([]netip.Addr, bool) {
	var dropped []netip.Addr
	freed := false
	for addr, rs := range a.retiring {
		if !slices.Contains(rs, svc) {
			continue
		}
		a.dropRetiring(addr, svc)
		dropped = append(dropped, addr)
		freed = freed || len(a.holders[addr]) == 0 && len(a.retiring[addr]) == 0
	}
	slices.SortFunc(dropped, netip.Addr.Compare)
	return dropped, freed
}

// Restore records that the Service already holds addrs (read back from
// its status after a restart). Addresses outside every pool, a second
// address of one family, and addresses that another Service holds and
// cannot share are skipped and reported. Restore adds to what the Service
// holds; the next Ensure reconciles it with the Service's request.
func (a *Allocator) Restore(svc types.NamespacedName, addrs []netip.Addr, shareKey string, ports []PortKey) []Problem {
	a.mu.Lock()
	defer a.mu.Unlock()
	o := a.owners[svc]
	if o == nil {
		o = &owner{}
	}
	o.shareKey, o.ports = shareKey, slices.Clone(ports)
	var problems []Problem
	for _, addr := range addrs {
		addr = addr.Unmap()
		fam := FamilyOf(addr)
		switch {
		case slices.Contains(o.addrs, addr):
			continue
		case a.PoolOf(addr) == nil:
			problems = append(problems, Problem{Kind: WantedNotInPool, Family: fam, Addr: addr,
				Message: fmt.Sprintf("address %s is not in any pool", addr)})
			continue
		case slices.ContainsFunc(o.addrs, func(x netip.Addr) bool { return FamilyOf(x) == fam }):
			problems = append(problems, Problem{Kind: WantedNotInPool, Family: fam, Addr: addr,
				Message: fmt.Sprintf("address %s is a second %s address", addr, fam)})
			continue
		}
		a.owners[svc] = o // canHold reads the owners of current holders only
		if !a.canHold(addr, svc, o) {
			problems = append(problems, Problem{Kind: WantedInUse, Family: fam, Addr: addr,
				Message: fmt.Sprintf("address %s is in use by %s", addr, a.describeHolders(addr, svc, o))})
			continue
		}
		a.dropRetiring(addr, svc)
		a.holders[addr] = insertSorted(a.holders[addr], svc)
		o.addrs = append(o.addrs, addr)
	}
	if len(o.addrs) == 0 {
		delete(a.owners, svc)
	} else {
		a.owners[svc] = o
	}
	return problems
}

func insertSorted(hs []types.NamespacedName, svc types.NamespacedName) []types.NamespacedName {
	i, _ := slices.BinarySearchFunc(hs, svc, func(x, y types.NamespacedName) int {
		return strings.Compare(x.String(), y.String())
	})
	return slices.Insert(hs, i, svc)
}
