package proxy

import (
	"fmt"
	"github.com/antrea-proxy/antrea-proxy/pkg/reconciler"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// Problem reasons in ServiceProblem and in the Warning events.
const (
	// ProblemOVSRejected: OVS rejected one of the Service's ops; it is quarantined (keeps what it
	// had installed) and retried with backoff while every other Service keeps syncing.
	ProblemOVSRejected = "OVSRejected"
	// ProblemFlowConflict: another Service owns a (family, address, protocol, port) the Service
	// asks for (claims.go: a ClusterIP before an ExternalIP, LB IP or NodePort, then the
	// Service created first, ties by namespace/name), or, as a last line of defence, wants the
	// same flow match with other actions.
	ProblemFlowConflict = "FlowConflict"
)

// Quarantine retry backoff: 1 s doubling to 5 min.
const (
	quarantineInitialBackoff = time.Second
	quarantineMaxBackoff     = 5 * time.Minute
)

// quarantined is a Service left out of the syncs after OVS rejected one of its ops.
type quarantined struct {
	since   time.Time
	retries int
	next    time.Time
	msg     string
}

func quarantineBackoff(retries int) time.Duration {
	d := quarantineInitialBackoff
	for i := 0; i < retries && d < quarantineMaxBackoff; i++ {
		d *= 2
	}
	return min(d, quarantineMaxBackoff)
}

// ownerInfo is what the proxier keeps of one owner (a Service port in one family, from its
// first computation until its removal is committed): the Service it belongs to and when that was
// created (contest ranking), and its cluster and local group IDs (0: none allocated). One map
// holds both, so an owner costs one entry.
type ownerInfo struct {
	name          types.NamespacedName
	created       time.Time
	gid, localGID uint32
}

// rankOwners orders owners for a contested flow key: the node-level flows first, then the
// Service created first, then by namespace/name, then by owner name. Owners of other writers
// rank by reconciler.Compare.
func (p *Proxier) rankOwners(a, b owner) int {
	if a.Kind != reconciler.KindServicePort || b.Kind != reconciler.KindServicePort {
		return reconciler.Compare(a, b)
	}
	ia, ib := p.ownerMeta[a], p.ownerMeta[b]
	switch {
	case ia.created.Before(ib.created):
		return -1
	case ib.created.Before(ia.created):
		return 1
	case ia.name.String() != ib.name.String():
		if ia.name.String() < ib.name.String() {
			return -1
		}
		return 1
	}
	return reconciler.Compare(a, b)
}

// quarantineRejected records the Services OVS rejected in this sync; call with p.mu held.
func (p *Proxier) quarantineRejected(rejected map[types.NamespacedName]string, now time.Time) {
	for nn, msg := range rejected {
		q := p.quarantine[nn]
		if q == nil {
			q = &quarantined{since: now}
			p.quarantine[nn] = q
		} else {
			q.retries++
		}
		q.msg = msg
		q.next = now.Add(quarantineBackoff(q.retries))
	}
}

// serviceEvent is a Warning event owed about a Service.
type serviceEvent struct {
	svc             types.NamespacedName
	reason, message string
}

// updateProblems recomputes every Service's problem from the quarantine and the contested
// flows, and returns an event for each problem that is new or changed; call with p.mu held.
func (p *Proxier) updateProblems(now time.Time) []serviceEvent {
	next := map[types.NamespacedName]*ServiceProblem{}
	for nn, q := range p.quarantine {
		next[nn] = &ServiceProblem{Reason: ProblemOVSRejected, Message: q.msg, Since: q.since, Retries: q.retries, NextRetry: q.next}
	}
	lost := map[types.NamespacedName][]string{}
	p.bridgeState.Read(func(st *reconciler.State) {
		st.Conflicts(func(o owner, key string, winner owner) {
			if o.Kind != reconciler.KindServicePort {
				return
			}
			nn := p.ownerMeta[o].name
			by := "the node's base flows"
			switch {
			case winner.Kind == reconciler.KindServicePort:
				by = p.ownerMeta[winner].name.String()
			case winner != baseOwner():
				by = "the " + winner.Kind.String() + "'s flows"
			}
			lost[nn] = append(lost[nn], fmt.Sprintf("%s is programmed for %s", key, by))
		})
	})
	for nn, msgs := range lost {
		if next[nn] != nil {
			continue
		}
		sort.Strings(msgs)
		next[nn] = &ServiceProblem{Reason: ProblemFlowConflict, Message: msgs[0], Since: now}
	}
	// Addresses refused or owned by another Service (decided before the flows were built)
	// name what the Service asked for; a contested flow key left over is appended.
	for nn, issues := range p.addrIssues {
		if pr := next[nn]; pr != nil && pr.Reason == ProblemOVSRejected {
			continue
		}
		reason, msg := issuesProblem(issues)
		if pr := next[nn]; pr != nil {
			reason, msg = ProblemFlowConflict, msg+"; "+pr.Message
		}
		next[nn] = &ServiceProblem{Reason: reason, Message: msg, Since: now}
	}
	// A Service the flow budget refuses has no flow at all: nothing else applies to it.
	for nn, r := range p.budget.refused {
		next[nn] = &ServiceProblem{Reason: ProblemTooManyFlows, Message: r.msg, Since: now}
	}
	var events []serviceEvent
	for nn, pr := range next {
		// A quarantined Service failing its retry again, or a refused Service whose estimate
		// moved, raises no new event.
		old := p.problems[nn]
		sticky := pr.Reason == ProblemOVSRejected || pr.Reason == ProblemTooManyFlows
		if old != nil && old.Reason == pr.Reason && (old.Message == pr.Message || sticky) {
			if pr.Reason != ProblemOVSRejected {
				pr.Since = old.Since
			}
			continue
		}
		events = append(events, serviceEvent{svc: nn, reason: pr.Reason, message: pr.Message})
	}
	sort.Slice(events, func(i, j int) bool { return events[i].svc.String() < events[j].svc.String() })
	p.problems = next
	return events
}

// retryTimer requests a sync at the earliest quarantine retry time.
type retryTimer struct {
	clock clock.WithTicker
	fire  func()
	mu    sync.Mutex
	at    time.Time
	stop  chan struct{}
}

func newRetryTimer(c clock.WithTicker, fire func()) *retryTimer {
	return &retryTimer{clock: c, fire: fire}
}

// arm makes the timer fire at at, unless it is already due to fire earlier.
func (r *retryTimer) arm(at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stop != nil && !at.Before(r.at) {
		return
	}
	if r.stop != nil {
		close(r.stop)
	}
	stop := make(chan struct{})
	r.stop, r.at = stop, at
	t := r.clock.NewTimer(at.Sub(r.clock.Now()))
	go func() {
		select {
		case <-t.C():
			r.mu.Lock()
			if r.stop == stop {
				r.stop = nil
			}
			r.mu.Unlock()
			r.fire()
		case <-stop:
			t.Stop()
		}
	}()
}
