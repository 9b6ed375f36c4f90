package proxy

import (
	"context"
	"fmt"
	"sort"

	"k8s.io/klog/v2"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

// ourCategories are the cookie categories this proxier owns and cleans up across rounds.
var ourCategories = []pipeline.Category{pipeline.CategoryBase, pipeline.CategoryService, pipeline.CategoryEndpoint}

// earlierRuns is what earlier runs left in OVS, as far as our own flows tell.
type earlierRuns struct {
	// deletes removes the flows of other rounds, by round and category.
	deletes []of.Op
	// current removes flows already carrying this round (a reused round), before anything is
	// added.
	current []of.Op
	// groups are the group IDs our flows of any round send to.
	groups []uint32
}

// scanEarlierRuns reads only our own categories' flows (a cookie filter per category) and never
// dumps groups: ovs-vswitchd 3.1 aborts on a dump-groups reply over 64 KiB.
func scanEarlierRuns(ctx context.Context, b of.Bridge, round uint16) (earlierRuns, error) {
	type rc struct {
		round uint16
		cat   pipeline.Category
	}
	rounds := map[rc]bool{}
	groups := map[uint32]bool{}
	for _, cat := range ourCategories {
		flows, err := b.DumpFlows(ctx, of.FlowFilter{Cookie: pipeline.Cookie(0, cat, 0), CookieMask: pipeline.CategoryMask})
		if err != nil {
			return earlierRuns{}, fmt.Errorf("dumping existing %s flows: %w", cat, err)
		}
		for _, f := range flows {
			rounds[rc{pipeline.CookieRound(f.Cookie), cat}] = true
			for _, a := range f.Actions {
				if g, ok := a.(of.GroupAction); ok {
					groups[g.ID] = true
				}
			}
		}
	}
	keys := make([]rc, 0, len(rounds))
	for k := range rounds {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].round != keys[j].round {
			return keys[i].round < keys[j].round
		}
		return keys[i].cat < keys[j].cat
	})
	var out earlierRuns
	for _, k := range keys {
		op := of.Op{Kind: of.DeleteFlows, Flow: &of.Flow{
			Cookie: pipeline.Cookie(k.round, k.cat, 0), CookieMask: pipeline.RoundMask | pipeline.CategoryMask}}
		if k.round == round {
			out.current = append(out.current, op)
		} else {
			out.deletes = append(out.deletes, op)
		}
	}
	for id := range groups {
		out.groups = append(out.groups, id)
	}
	sort.Slice(out.groups, func(i, j int) bool { return out.groups[i] < out.groups[j] })
	return out, nil
}

// start prepares the clean-up of what earlier runs left in OVS; the first bundle carries it.
func (p *Proxier) start(ctx context.Context) error {
	e, err := scanEarlierRuns(ctx, p.bridge, p.round)
	if err != nil {
		return err
	}
	p.staleCurrent, p.stale, p.staleGroups = e.current, e.deletes, e.groups
	klog.InfoS("Starting flow round", "round", p.round, "staleRounds", len(e.deletes), "earlierGroups", len(e.groups))
	return nil
}
