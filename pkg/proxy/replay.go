package proxy

import (
	"context"

	"k8s.io/klog/v2"
)

// The proxier's flows and groups are verified and replayed by its reconciler (Reconciler), with
// the other writers' of the bridge: reconciler.Reconciler.Verify, Replay, InstalledFlows and
// InstalledVersion. Before the first sync a replay installs the node-level flows
// (InstallBaseFlows, the KindNode writer's Unstarted hook); a failed replay, or a bundle that
// met a bridge that lost its state, makes the next sync replay first.

// ovsLostState reports whether OVS holds other flows of this round than installed (counted
// through the bridge): after a rejected bundle it tells a vswitchd restart or flush, which
// calls for a replay, from a Service whose ops OVS refuses.
func (p *Proxier) ovsLostState(ctx context.Context) bool {
	p.mu.Lock()
	synced := p.syncs > 0
	p.mu.Unlock()
	if !synced {
		return false
	}
	ok, err := p.bridgeState.Verify(ctx, p.bridge)
	return err == nil && !ok
}

// checkDrift is a full resync's check of OVS against the installed state, off the sync
// goroutine so that it never delays a sync, replaying everything when OVS lost flows (a replay
// waits for a bundle in flight). When the bridge reports table statistics it first reads them
// and counts the flows per category as Verify does only when OVS holds fewer flows in all than
// the bridge's writers installed (a flushed bridge or table), so at rest OVS walks no flow;
// fewer lost flows are the healer's to find, which compares every table every second where it
// is set up. At most one check runs at a time.
func (p *Proxier) checkDrift(ctx context.Context) {
	select {
	case p.driftCheck <- struct{}{}:
	default:
		return // one is running
	}
	go func() {
		defer func() { <-p.driftCheck }()
		if !p.tablesShort(ctx) {
			return
		}
		ok, err := p.bridgeState.Verify(ctx, p.bridge)
		if err != nil || ok {
			return
		}
		klog.InfoS("OVS holds other flows than installed; replaying them after the full resync")
		if err := p.bridgeState.Replay(ctx); err != nil {
			klog.ErrorS(err, "Replaying after the full resync failed; the next sync replays first")
		}
	}()
}

// tablesShort reports whether OVS holds fewer flows in all than the bridge's writers installed,
// from one table statistics request (no walk of the flows, in OVS or here); true also when it
// cannot tell (the bridge reports no table statistics, the request failed, or a bundle was in
// flight), so that the caller counts per category.
func (p *Proxier) tablesShort(ctx context.Context) bool {
	in, ok := p.bridgeState.InstalledFlows()
	if !ok {
		return true
	}
	stats, err := p.bridge.TableStats(ctx)
	if err != nil {
		klog.V(2).InfoS("Reading OVS's table statistics failed; counting the installed flows instead", "err", err)
		return true
	}
	installed, held := 0, 0
	for _, n := range in.PerTable {
		installed += n
	}
	for _, st := range stats {
		held += int(st.Active)
	}
	return held < installed
}
