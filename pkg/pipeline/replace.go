package pipeline

import of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"

// ReplaceCategory returns one bundle that replaces every flow of category cat, of any round,
// with the given flows: what a writer that reads nothing back from OVS (the gateway, the CNI
// server) sends at start-up and when it replays. Its outcome does not depend on what OVS holds.
func ReplaceCategory(cat Category, flowSets ...[]of.Flow) []of.Op {
	n := 1
	for _, fs := range flowSets {
		n += len(fs)
	}
	ops := make([]of.Op, 0, n)
	ops = append(ops, of.Op{Kind: of.DeleteFlows, Flow: &of.Flow{Cookie: Cookie(0, cat, 0), CookieMask: CategoryMask}})
	for _, fs := range flowSets {
		for i := range fs {
			ops = append(ops, of.Op{Kind: of.AddFlow, Flow: &fs[i]})
		}
	}
	return ops
}
