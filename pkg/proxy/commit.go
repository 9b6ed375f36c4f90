package proxy

import (
	"context"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/observe"
)

// commit records what OVS accepted (under p.mu) and returns the after-commit work: whether
// what a UDP Service port serves changed (the conntrack reconciler runs) and the events to
// raise.
func (p *Proxier) commit(in *syncInput, pl *plan, rejected map[types.NamespacedName]string) (bool, []serviceEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	udp := p.collectSelected(in, pl)
	for _, o := range pl.released {
		info := p.ownerMeta[o]
		p.groups.freeID(info.gid)
		p.groups.freeID(info.localGID)
		p.groups.releaseSubs(subGroupsOf{o: o}, 0)
		p.groups.releaseSubs(subGroupsOf{o: o, local: true}, 0)
		delete(p.ownerMeta, o)
	}
	// Second-level group IDs a committed Service needs no longer: the bundle deleted their
	// groups.
	for _, nn := range pl.included {
		for _, d := range in.computed[nn] {
			p.groups.releaseSubs(subGroupsOf{o: d.owner}, len(d.subGIDs))
			p.groups.releaseSubs(subGroupsOf{o: d.owner, local: true}, len(d.localSubGIDs))
		}
	}
	p.commitInputs(in, pl.included)
	now := p.opts.Clock.Now()
	// One copy of the commit time, shared by the statuses made now.
	committed := new(time.Time)
	*committed = now
	for _, nn := range pl.included {
		p.dirty.Delete(nn)
		delete(p.quarantine, nn)
		if is := in.issues[nn]; len(is) > 0 {
			p.addrIssues[nn] = is
		} else {
			delete(p.addrIssues, nn)
		}
		old := p.statusOf(nn)
		if len(pl.newOwners[nn]) == 0 {
			if r := p.svcs[nn]; r != nil {
				r.status = nil
				p.dropUnused(nn, r)
			}
			if old != nil {
				p.portsGen++
			}
			continue
		}
		st := p.makeStatus(nn, in.computed[nn], committed)
		if old == nil || !samePorts(nn, old.ports, st.ports) {
			p.portsGen++
		}
		r := p.svcs[nn]
		if r == nil {
			r = &svcRecord{}
			p.svcs[nn] = r
		}
		r.status = st
	}
	// A map keeps its table when emptied: after a large sync, a new set lets the old one go.
	if len(p.dirty) == 0 {
		p.dirty = sets.New[types.NamespacedName]()
	}
	p.quarantineRejected(rejected, now)
	events := p.updateProblems(now)
	if in.first {
		p.stale, p.staleCurrent, p.staleGroups = nil, nil, nil
	}
	if in.setBase {
		if !slices.Equal(p.nodePortAddrs, in.nodePortAddrs) {
			p.portsGen++
		}
		p.nodePortAddrs = in.nodePortAddrs
		if !slices.Equal(p.committedCIDRs, in.cidrs) {
			p.portsGen++
		}
		p.committedCIDRs = in.cidrs
	}
	if p.nodeGen == in.nodeGen {
		p.baseDirty = false
	}
	p.syncErr = nil
	p.lastSync = now
	p.syncs++
	return udp, events
}

// collectSelected records what each planned owner's groups now select and reports whether a
// UDP owner's endpoints or frontends changed, or a UDP owner went away.
func (p *Proxier) collectSelected(in *syncInput, pl *plan) bool {
	changed := false
	for _, o := range pl.released {
		changed = changed || p.ownerEndpoints[o].udp
		delete(p.ownerEndpoints, o)
	}
	npAddrs := p.nodeConfig().NodePortAddresses
	for _, nn := range pl.included {
		for _, d := range in.computed[nn] {
			before, had := p.ownerEndpoints[d.owner]
			changed = changed || udpChanged(before, had, d, npAddrs)
			// Only UDP owners are kept: nothing else is ever read back.
			if s := selectedOf(d); s.udp {
				p.ownerEndpoints[d.owner] = s
			} else {
				delete(p.ownerEndpoints, d.owner)
			}
		}
	}
	return changed
}

// afterCommit runs, without p.mu, what a committed sync owes: the UDP conntrack reconciler
// (when reconcile is set), events and the timer of the next quarantine retry.
func (p *Proxier) afterCommit(ctx context.Context, reconcile bool, events []serviceEvent) observe.ConntrackResult {
	var ct observe.ConntrackResult
	if reconcile {
		ct = p.reconcileConntrack(ctx)
	}
	for _, e := range events {
		klog.InfoS("Service problem", "service", e.svc, "reason", e.reason, "message", e.message)
		if p.opts.Events != nil {
			p.opts.Events.Warning(e.svc, e.reason, e.message)
		}
	}
	var next time.Time
	for _, q := range p.quarantine {
		if next.IsZero() || q.next.Before(next) {
			next = q.next
		}
	}
	if !next.IsZero() {
		p.retry.arm(next)
	}
	return ct
}
