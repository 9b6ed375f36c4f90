package proxy

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
)

// ProblemTooManyFlows: the Service would need more OpenFlow entries (flows and group buckets,
// estimated from its counts before anything is built) than the per-Service budget, or than
// what the node's budget has left after the older Services; it gets no flow, no claim and no
// host capture at all, and every other Service keeps syncing.
const ProblemTooManyFlows = "TooManyFlows"

// budgetEntry is one Service's estimated cost and its rank (creation time, then name).
type budgetEntry struct {
	cost    int
	created time.Time
}

// budgetEntries holds the flow budget's entries, one per Service that is present and not
// skipped. The proxier keeps them in its Service records (recordEntries), so that the budget
// costs no map of its own; a nameMap holds them on their own (tests).
type budgetEntries interface {
	get(nn types.NamespacedName) (budgetEntry, bool)
	put(nn types.NamespacedName, e budgetEntry)
	remove(nn types.NamespacedName)
	each(f func(types.NamespacedName, budgetEntry))
	len() int
}

// refusal is why a Service is refused; global is set when the node's budget refused it.
type refusal struct {
	msg    string
	global bool
}

// flowBudget decides which Services may be programmed: a Service whose estimated cost
// (estimateCost) exceeds perService is refused; the others are admitted in the order claims use
// (older creationTimestamp first, then namespace/name) while the sum of the admitted costs
// stays within total, so a new Service can never push out older ones. Recomputed when a
// Service's cost changes or it goes away. Owned by the sync goroutine.
type flowBudget struct {
	perService, total int
	entries           budgetEntries
	refused           map[types.NamespacedName]refusal
	// admitted is the sum of the admitted Services' costs; globals counts the refusals of the
	// node's budget (while there are none, a change is decided without walking every Service).
	admitted, globals int
	// walk is set when the next settle must rank every Service.
	walk bool
}

// newFlowBudget returns a budget keeping its entries in entries.
func newFlowBudget(perService, total int, entries budgetEntries) *flowBudget {
	return &flowBudget{perService: perService, total: total, entries: entries,
		refused: map[types.NamespacedName]refusal{}}
}

// isRefused reports whether nn gets no flow.
func (b *flowBudget) isRefused(nn types.NamespacedName) bool {
	_, ok := b.refused[nn]
	return ok
}

// set records nn's cost (present false: the Service is gone or skipped) and decides at once
// what can be decided without ranking every Service; it reports whether nn's admission
// changed (when it returns false, settle may still change it).
func (b *flowBudget) set(nn types.NamespacedName, e budgetEntry, present bool) bool {
	old, had := b.entries.get(nn)
	was, wasRefused := b.refused[nn]
	if had && !wasRefused {
		b.admitted -= old.cost
	}
	if was.global {
		b.globals--
	}
	delete(b.refused, nn)
	if !present {
		if had {
			b.entries.remove(nn)
		}
		// Leaving frees room for the Services the node's budget refused.
		b.walk = b.walk || b.globals > 0
		return wasRefused
	}
	b.entries.put(nn, e)
	switch {
	case b.globals > 0 || b.walk:
		// Room may have changed hands: settle ranks every Service.
		b.walk = true
		if wasRefused { // kept until settle decides
			b.refused[nn] = was
			if was.global {
				b.globals++
			}
		} else {
			b.admitted += e.cost
		}
		return false
	case e.cost > b.perService:
		b.refused[nn] = refusal{msg: b.perServiceMsg(e.cost)}
	case b.admitted+e.cost > b.total:
		b.walk = true
		b.admitted += e.cost
		return false
	default:
		b.admitted += e.cost
	}
	return b.isRefused(nn) != wasRefused
}

// settle ranks every Service when set asked for it, and returns the Services whose admission
// changed, sorted.
func (b *flowBudget) settle() []types.NamespacedName {
	if !b.walk {
		return nil
	}
	b.walk = false
	type ranked struct {
		nn types.NamespacedName
		budgetEntry
	}
	all := make([]ranked, 0, b.entries.len())
	b.entries.each(func(nn types.NamespacedName, e budgetEntry) { all = append(all, ranked{nn, e}) })
	slices.SortFunc(all, func(x, y ranked) int {
		if c := x.created.Compare(y.created); c != 0 {
			return c
		}
		return compareNames(x.nn, y.nn)
	})
	old := b.refused
	b.refused, b.admitted, b.globals = map[types.NamespacedName]refusal{}, 0, 0
	for _, r := range all {
		nn, cost := r.nn, r.cost
		switch {
		case cost > b.perService:
			b.refused[nn] = refusal{msg: b.perServiceMsg(cost)}
		case b.admitted+cost > b.total:
			b.refused[nn] = refusal{global: true, msg: fmt.Sprintf("needs an estimated %d flows and group buckets; "+
				"with the %d of older Services, more than the node's budget of %d (antreaProxy.maxFlows): no flow is built for it",
				cost, b.admitted, b.total)}
			b.globals++
		default:
			b.admitted += cost
		}
	}
	changed := sets.New[types.NamespacedName]()
	for nn := range old {
		if !b.isRefused(nn) {
			changed.Insert(nn)
		}
	}
	for nn := range b.refused {
		if _, ok := old[nn]; !ok {
			changed.Insert(nn)
		}
	}
	return sortedNames(changed)
}

func (b *flowBudget) perServiceMsg(cost int) string {
	return fmt.Sprintf("needs an estimated %d flows and group buckets, more than the per-Service budget of %d "+
		"(antreaProxy.maxFlowsPerService): no flow is built for it", cost, b.perService)
}

// noteBudget brings the flow budget up to date with the Services of changed (all: every
// Service, when the served families changed) and returns the Services whose admission changed
// (on the sync goroutine, after p.svcs took the changes).
func (p *Proxier) noteBudget(changed sets.Set[types.NamespacedName], all bool) []types.NamespacedName {
	served := p.families()
	flipped := sets.New[types.NamespacedName]()
	note := func(nn types.NamespacedName) {
		svc := p.service(nn)
		present := svc != nil
		if present {
			present, _ = model.ShouldSkipService(svc, p.opts.ServiceProxyName, p.opts.Skip)
			present = !present
		}
		var e budgetEntry
		if present {
			sh := model.ServiceShape(svc, model.ConvertOptions{ProxyLoadBalancerIPs: p.opts.ProxyLoadBalancerIPs, Served: served})
			e = budgetEntry{cost: estimateCost(sh, model.SliceEndpointCounts(p.track.Endpoints.SlicesFor(nn), p.opts.NodeName, served)),
				created: svc.CreationTimestamp.Time}
		}
		if p.budget.set(nn, e, present) {
			flipped.Insert(nn)
		}
	}
	if all {
		// The Services gone with an entry left first, then every present one (the entries live
		// in the records, see recordEntries).
		for nn, r := range p.svcs {
			if r.svc == nil && r.budgeted {
				note(nn)
			}
		}
		for nn, r := range p.svcs {
			if r.svc != nil {
				note(nn)
			}
		}
	} else {
		for nn := range changed {
			note(nn)
		}
	}
	for _, nn := range p.budget.settle() {
		flipped.Insert(nn)
	}
	return sortedNames(flipped)
}
