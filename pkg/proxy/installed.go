package proxy

import (
	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// InstalledState returns copies of every flow and group the proxier has installed (its base,
// Service and endpoint flows, and every Service port's groups, second-level groups included),
// from its own state: what Replay would install, without asking OVS (a dump of large groups
// costs OVS and the agent far more). Flows learned by OVS for session affinity are not in it.
// The flows' and groups' action lists are shared with the state and must not be modified.
func (p *Proxier) InstalledState() ([]of.Flow, []of.Group) {
	p.mu.Lock()
	defer p.mu.Unlock()
	flows := make([]of.Flow, 0, p.state.Len())
	p.state.EachFlow(func(f *of.Flow) { flows = append(flows, *f) })
	groups := make([]of.Group, 0, p.state.GroupCount())
	p.state.EachGroup(func(g *of.Group) { groups = append(groups, *g) })
	return flows, groups
}
