package proxy

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

// Name names the proxier as an owner of OVS state (healer.Owner).
func (p *Proxier) Name() string { return "proxier" }

// Verify compares, per cookie category of this round (base, service, endpoint), the flows OVS
// holds (counted through c) with those the proxier installed; false means OVS lost some and a
// Replay is needed. Groups cannot be counted; a lost group shows through its lost flows (OVS
// deletes the flows of a deleted group). While a bundle is in flight, and before the first sync,
// it reports true: it cannot tell.
func (p *Proxier) Verify(ctx context.Context, c of.FlowCounter) (bool, error) {
	want, seq, synced := p.expectedFlows()
	if !synced || seq%2 == 1 {
		return true, nil
	}
	ok, err := p.countsMatch(ctx, c, want)
	if err != nil {
		return false, err
	}
	p.mu.Lock()
	changed := p.applySeq != seq
	p.mu.Unlock()
	return ok || changed, nil
}

// InstalledFlows says how many flows the proxier installed in each table (healer.TableOwner),
// so that the periodic check compares a table statistics reply instead of counting flows per
// category in OVS. It reports false while a bundle is in flight and before the first sync, as
// Verify cannot tell then. The learned session affinity flows share TableSessionAffinity with
// the proxier's own flow there: it is Learned.
func (p *Proxier) InstalledFlows() (of.InstalledFlows, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok := p.installedVersionLocked()
	if !ok {
		return of.InstalledFlows{}, false
	}
	return of.InstalledFlows{PerTable: p.state.FlowsPerTable(), Learned: []uint8{pipeline.TableSessionAffinity}, Version: v}, true
}

// InstalledVersion is InstalledFlows' version (healer.TableOwner), without counting: a
// fingerprint of the installed flow counts (in all and per category), which a sync that changes
// nothing, such as an idle full resync, leaves as it was, so that the healer does not walk the
// state again. A change that keeps every one of those counts but moves flows between tables
// keeps it too; the healer then sees table counts differ from the ones it cached, verifies
// every owner and asks InstalledFlows again.
func (p *Proxier) InstalledVersion() (uint64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.installedVersionLocked()
}

func (p *Proxier) installedVersionLocked() (uint64, bool) {
	if p.syncs == 0 || p.applySeq%2 == 1 {
		return 0, false
	}
	v := uint64(p.state.Len())
	for _, cat := range ourCategories {
		v = v*1_000_003 + uint64(p.state.PerCategory(cat))
	}
	return v, true
}

// expectedFlows returns the installed flows per category, the apply sequence number (odd while a
// bundle is in flight) and whether anything was synced yet.
func (p *Proxier) expectedFlows() (map[pipeline.Category]int, uint64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	want := make(map[pipeline.Category]int, len(ourCategories))
	for _, cat := range ourCategories {
		want[cat] = p.state.PerCategory(cat)
	}
	return want, p.applySeq, p.syncs > 0
}

// countsMatch counts this round's flows of each of our categories through c and compares them
// with want.
func (p *Proxier) countsMatch(ctx context.Context, c of.FlowCounter, want map[pipeline.Category]int) (bool, error) {
	for _, cat := range ourCategories {
		n, err := c.CountFlows(ctx, of.FlowFilter{Cookie: pipeline.Cookie(p.round, cat, 0), CookieMask: pipeline.RoundMask | pipeline.CategoryMask})
		if err != nil {
			return false, fmt.Errorf("counting %s flows: %w", cat, err)
		}
		if n != want[cat] {
			klog.InfoS("OVS holds other flows than the proxier installed", "category", cat, "installed", want[cat], "inOVS", n)
			return false, nil
		}
	}
	return true, nil
}

// Replay reinstalls everything the proxier has installed, in one bundle, whatever OVS holds
// now: it deletes this round's flows of our categories and every group ID it holds, then adds
// every group and flow. It runs serialized with the syncs (it waits for a running sync) and
// returns when the bundle is applied or ctx is done. Before the first sync it does nothing.
// When it fails, the next sync replays first.
func (p *Proxier) Replay(ctx context.Context) error {
	select {
	case p.syncSem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-p.syncSem }()
	return p.replay(ctx)
}

// replay runs with syncSem held.
func (p *Proxier) replay(ctx context.Context) error {
	p.mu.Lock()
	synced := p.syncs > 0
	p.mu.Unlock()
	if !synced {
		// Nothing of the Services is installed yet, but every packet needs the node-level
		// flows, which a restarted ovs-vswitchd lost.
		return p.InstallBaseFlows(ctx)
	}
	ops := p.state.ReplayOps(p.round, ourCategories)
	start := p.opts.Clock.Now()
	p.beginApply()
	err := p.bridge.Apply(ctx, ops)
	p.endApply()
	if err != nil {
		p.replayOwed = true
		return fmt.Errorf("replaying %d ops: %w", len(ops), err)
	}
	p.replayOwed = false
	klog.InfoS("Replayed the proxier's flows and groups", "ops", len(ops), "flows", p.state.Len(),
		"groups", p.state.GroupCount(), "duration", p.opts.Clock.Since(start))
	return nil
}

// ovsLostState reports whether OVS holds other flows of this round than the proxier installed
// (counted through the bridge): after a rejected bundle it tells a vswitchd
// restart or flush, which calls for a replay, from a Service whose ops OVS refuses.
func (p *Proxier) ovsLostState(ctx context.Context) bool {
	want, _, synced := p.expectedFlows()
	if !synced {
		return false
	}
	match, err := p.countsMatch(ctx, p.bridge, want)
	return err == nil && !match
}

// checkDrift is a full resync's check of OVS against the installed state, off the sync
// goroutine so that it never delays a sync, replaying everything when OVS lost flows (a replay
// runs serialized with the syncs). When the bridge reports table statistics it first reads
// them and counts the flows per category as Verify does only when OVS holds fewer flows in all
// than the proxier installed (a flushed bridge or table), so at rest OVS walks no flow; fewer
// lost flows are the healer's to find, which compares every table every few seconds where it is
// set up. At most one check runs at a time.
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
		ok, err := p.Verify(ctx, p.bridge)
		if err != nil || ok {
			return
		}
		klog.InfoS("OVS holds other flows than the proxier installed; replaying them after the full resync")
		if err := p.Replay(ctx); err != nil {
			klog.ErrorS(err, "Replaying after the full resync failed; the next sync replays first")
		}
	}()
}

// tablesShort reports whether OVS holds fewer flows in all than the proxier installed, from
// one table statistics request (no walk of the flows, in OVS or here); true also when it cannot
// tell (the bridge reports no table statistics, the request failed, or a bundle was in
// flight), so that the caller counts per category. The other writers' flows make up for a few
// lost ones of the proxier's: those are the healer's to find, table by table.
func (p *Proxier) tablesShort(ctx context.Context) bool {
	want, _, synced := p.expectedFlows()
	if !synced {
		return true
	}
	stats, err := p.bridge.TableStats(ctx)
	if err != nil {
		klog.V(2).InfoS("Reading OVS's table statistics failed; counting the proxier's flows instead", "err", err)
		return true
	}
	installed, held := 0, 0
	for _, n := range want {
		installed += n
	}
	for _, st := range stats {
		held += int(st.Active)
	}
	return held < installed
}
