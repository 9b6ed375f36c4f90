package proxy

import (
	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/reconciler"
)

// InstalledState returns copies of every flow and group the proxier has installed (its base,
// Service and endpoint flows, and every Service port's groups, second-level groups included),
// from its own state: what Replay would install, without asking OVS (a dump of large groups
// costs OVS and the agent far more). Flows learned by OVS for session affinity are not in it.
// The flows' and groups' action lists are shared with the state and must not be modified.
func (p *Proxier) InstalledState() ([]of.Flow, []of.Group) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var flows []of.Flow
	var groups []of.Group
	p.bridgeState.Read(func(st *reconciler.State) {
		flows = make([]of.Flow, 0, proxierFlows(st))
		st.EachFlow(func(o reconciler.Owner, f *of.Flow) {
			if isProxierOwner(o) {
				flows = append(flows, *f)
			}
		})
		groups = make([]of.Group, 0, st.GroupCount())
		st.EachGroup(func(o reconciler.Owner, g *of.Group) {
			if isProxierOwner(o) {
				groups = append(groups, *g)
			}
		})
	})
	return flows, groups
}

// installedCounts returns how many flows and groups the proxier has installed.
func (p *Proxier) installedCounts() (flows, groups int) {
	p.bridgeState.Read(func(st *reconciler.State) {
		flows = proxierFlows(st)
		groups = st.GroupCountOf(reconciler.KindNode) + st.GroupCountOf(reconciler.KindServicePort)
	})
	return flows, groups
}

// proxierFlows counts the proxier's installed flows, by their categories.
func proxierFlows(st *reconciler.State) int {
	n := 0
	for _, c := range ourCategories {
		n += st.PerCategory(c)
	}
	return n
}
