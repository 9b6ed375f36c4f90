package proxy

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/tracker"
)

// svcInputs identifies everything one Service's desired state is computed from, so that a full
// resync recomputes only the Services whose inputs changed since their last committed
// computation. The options are fixed for the proxier's life and group IDs are stable while
// their owner exists, so neither is part of it.
type svcInputs struct {
	// svc is the object the Service was computed from (the tracker hands out a new object for
	// every change it reports; nil: the Service is gone).
	svc *v1.Service
	// slices is the endpoints tracker's generation of the Service's EndpointSlices.
	slices uint64
	// node is the generation of the node-level inputs of Service flows (svcNodeInputs).
	node uint64
	// claims is the generation of the Service's claims outcome (which of its tuples it owns,
	// which addresses are refused): it moves when another Service or the ServiceCIDRs change it.
	claims uint64
	// refused is set when the flow budget refuses the Service (budget.go).
	refused bool
}

// svcRecord is what the proxier keeps of one Service, in one record: its latest object, its
// claims and claims generation, its flow budget entry, the inputs of its last committed
// computation and what that installed. It exists while the Service does, while it has claims or
// a budget entry and while a computation of it is committed. The sync goroutine
// alone writes records and the map, the map and status under p.mu (Services reads them under
// it); it reads them without.
type svcRecord struct {
	// svc is the Service's latest object (nil: gone, its removal not committed yet).
	svc *v1.Service
	// claimGen is the Service's claims generation (svcInputs.claims; 0 once it is gone).
	claimGen uint64
	// committed are the inputs its committed computation was made from (committed.svc nil:
	// none).
	committed svcInputs
	// status is what the committed computation installed (nil: nothing; guarded by p.mu).
	status *serviceStatus
	// budgetCost is the Service's estimated cost in the flow budget when budgeted is set
	// (recordEntries).
	budgetCost int
	budgeted   bool
	// claims are the Service's claims in the claims index (recordClaims; none: it claims
	// nothing).
	claims svcClaims
}

// recordClaims keeps the claims index's per-Service claims in the Service records. Only a
// Service that exists claims anything (reclaim), so its record is there. Owned by the sync
// goroutine.
type recordClaims struct{ p *Proxier }

func (rc recordClaims) get(nn types.NamespacedName) (svcClaims, bool) {
	if r := rc.p.svcs[nn]; r != nil && len(r.claims.claims) > 0 {
		return r.claims, true
	}
	return svcClaims{}, false
}

func (rc recordClaims) put(nn types.NamespacedName, sc svcClaims) { rc.p.svcs[nn].claims = sc }

func (rc recordClaims) remove(nn types.NamespacedName) {
	p := rc.p
	if r := p.svcs[nn]; r != nil && len(r.claims.claims) > 0 {
		r.claims = svcClaims{}
		p.mu.Lock()
		p.dropUnused(nn, r)
		p.mu.Unlock()
	}
}

// recordEntries keeps the flow budget's entries in the Service records: an entry's cost in
// budgetCost, its creation time that of the record's object. The budget notes every Service
// whose object changed before it ranks (noteBudget), so an entry's creation time is always that
// of the object it was estimated from. Owned by the sync goroutine.
type recordEntries struct{ p *Proxier }

func (re recordEntries) get(nn types.NamespacedName) (budgetEntry, bool) {
	r := re.p.svcs[nn]
	if r == nil || !r.budgeted {
		return budgetEntry{}, false
	}
	return budgetEntry{cost: r.budgetCost, created: createdOf(r.svc)}, true
}

// put records nn's entry; nn's record exists (the budget has entries for present Services
// only).
func (re recordEntries) put(nn types.NamespacedName, e budgetEntry) {
	r := re.p.svcs[nn]
	r.budgetCost, r.budgeted = e.cost, true
}

func (re recordEntries) remove(nn types.NamespacedName) {
	p := re.p
	if r := p.svcs[nn]; r != nil && r.budgeted {
		r.budgetCost, r.budgeted = 0, false
		p.mu.Lock()
		p.dropUnused(nn, r)
		p.mu.Unlock()
	}
}

func (re recordEntries) each(f func(types.NamespacedName, budgetEntry)) {
	for nn, r := range re.p.svcs {
		if r.budgeted {
			f(nn, budgetEntry{cost: r.budgetCost, created: createdOf(r.svc)})
		}
	}
}

func (re recordEntries) len() int {
	n := 0
	for _, r := range re.p.svcs {
		if r.budgeted {
			n++
		}
	}
	return n
}

// createdOf returns svc's creation time (zero for nil).
func createdOf(svc *v1.Service) time.Time {
	if svc == nil {
		return time.Time{}
	}
	return svc.CreationTimestamp.Time
}

// statusOf returns what nn has installed, nil when nothing.
func (p *Proxier) statusOf(nn types.NamespacedName) *serviceStatus {
	if r := p.svcs[nn]; r != nil {
		return r.status
	}
	return nil
}

// service returns nn's latest object, nil when it is gone.
func (p *Proxier) service(nn types.NamespacedName) *v1.Service {
	if r := p.svcs[nn]; r != nil {
		return r.svc
	}
	return nil
}

// setService records nn's latest object (nil: the Service is gone); p.mu held.
func (p *Proxier) setService(nn types.NamespacedName, svc *v1.Service) {
	r := p.svcs[nn]
	switch {
	case r != nil:
		r.svc = svc
		p.dropUnused(nn, r)
	case svc != nil:
		p.svcs[nn] = &svcRecord{svc: svc}
	}
}

// dropUnused forgets r, nn's record, once it holds nothing: the Service is gone, it has no
// flow budget entry and no claim, and no computation of it is committed or installed; p.mu
// held. A gone Service's claims generation
// is 0.
func (p *Proxier) dropUnused(nn types.NamespacedName, r *svcRecord) {
	if r.svc == nil {
		r.claimGen = 0
		if r.committed.svc == nil && r.status == nil && !r.budgeted && len(r.claims.claims) == 0 {
			delete(p.svcs, nn)
		}
	}
}

// bumpClaimGen moves nn's claims generation when the Service exists (a gone one has 0).
func (p *Proxier) bumpClaimGen(nn types.NamespacedName) {
	if r := p.svcs[nn]; r != nil {
		if r.svc != nil {
			r.claimGen++
		} else {
			r.claimGen = 0
		}
	}
}

// svcNodeInputs are the node-level inputs of every Service's flows: the IP families served,
// the Node's zone (topology hints) and its InternalIPs (loadBalancerSourceRanges of the node's
// own connections). The NodePort addresses only shape the base flows.
type svcNodeInputs struct {
	families model.Families
	zone     string
	nodeIPs  string
}

// inputsOf returns nn's inputs as of now (on the sync goroutine).
func (p *Proxier) inputsOf(nn types.NamespacedName) svcInputs {
	in := svcInputs{slices: p.track.Endpoints.Generation(nn), node: p.svcNodeGen, refused: p.budget.isRefused(nn)}
	if r := p.svcs[nn]; r != nil {
		in.svc, in.claims = r.svc, r.claimGen
	}
	return in
}

// noteNodeInputs takes this sync's node-level Service inputs and reports whether they differ from
// the previous sync's (then every Service is recomputed).
func (p *Proxier) noteNodeInputs() bool {
	cur := svcNodeInputs{families: p.families(), zone: nodeZone(p.syncNode),
		nodeIPs: fmt.Sprint(nodeIPs(p.syncNode, p.families()))}
	if p.svcNodeGen != 0 && cur == p.svcNode {
		return false
	}
	p.svcNode = cur
	p.svcNodeGen++
	return true
}

// resyncWalk is what the last walk of every Service's inputs (markChanged) saw: a full resync
// walks again only when due, that is when a sync since then drained a Service change, flipped a
// budget refusal, or saw other ServiceCIDRs or other EndpointSlices (gather).
type resyncWalk struct {
	due       bool
	slicesGen uint64 // the endpoints tracker's LastGeneration before the walk
	cidrGen   uint64
	count     uint64 // walks so far (tests)
}

// markChanged marks dirty every Service, installed or known, whose inputs differ from those of
// its last committed computation, or every one of them when all is set.
func (p *Proxier) markChanged(all bool) {
	mark := func(nn types.NamespacedName) {
		if p.dirty.Has(nn) {
			return
		}
		if committed := p.committedOf(nn); all || committed.svc == nil || committed != p.inputsOf(nn) {
			p.dirty.Insert(nn)
		}
	}
	for nn := range p.svcs {
		mark(nn)
	}
}

// commitInputs records the inputs the committed Services were computed from; p.mu held.
func (p *Proxier) commitInputs(in *syncInput, included []types.NamespacedName) {
	for _, nn := range included {
		ci := in.inputs[nn]
		r := p.svcs[nn]
		switch {
		case r != nil:
			r.committed = ci
			p.dropUnused(nn, r)
		case ci.svc != nil:
			p.svcs[nn] = &svcRecord{committed: ci}
		}
	}
}

// committedOf returns the inputs of nn's committed computation (svc nil: none).
func (p *Proxier) committedOf(nn types.NamespacedName) svcInputs {
	if r := p.svcs[nn]; r != nil {
		return r.committed
	}
	return svcInputs{}
}

// dirtyDrained marks dirty the Services of a drain: each with a Service change, and each whose
// EndpointSlices changed unless its inputs equal those of its committed computation. A slice
// that reached the tracker after a sync's drain but before that sync read the Service's inputs
// was computed by that sync; its mark, drained by the next one, would only compute the Service
// again with the same result. Call it after the node, budget and claims inputs were noted.
func (p *Proxier) dirtyDrained(d tracker.Drained) {
	for nn := range d.ServiceChanges {
		p.dirty.Insert(nn)
	}
	for nn := range d.DirtyEndpoints {
		if c := p.committedOf(nn); c.svc == nil || c != p.inputsOf(nn) {
			p.dirty.Insert(nn)
		}
	}
}

// nameMap keeps values by Service name in a map of its own: the budget's entries and the
// claims of a proxier-less index (tests), which the proxier keeps in its svcRecords instead.
type nameMap[V any] map[types.NamespacedName]V

func (m nameMap[V]) get(nn types.NamespacedName) (V, bool) {
	v, ok := m[nn]
	return v, ok
}

func (m nameMap[V]) put(nn types.NamespacedName, v V) { m[nn] = v }
func (m nameMap[V]) remove(nn types.NamespacedName)   { delete(m, nn) }
func (m nameMap[V]) len() int                         { return len(m) }

func (m nameMap[V]) each(f func(types.NamespacedName, V)) {
	for nn, v := range m {
		f(nn, v)
	}
}
