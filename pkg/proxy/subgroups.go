package proxy

import (
	"strconv"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

// subOwner owns the i-th second-level group of o's group (o is a port's owner or its
// localOwner). Its group ID is allocated, kept and released like o's.
func subOwner(o owner, i int) owner {
	return owner{Kind: o.Kind, Key: o.Key + "/sub" + strconv.Itoa(i)}
}

// maxSlicesEndpoints bounds the endpoints any port of a Service has in either family: every
// endpoint of its EndpointSlices at most once (model.EndpointsForServicePort).
func maxSlicesEndpoints(sl []*model.EndpointSlice) int {
	n := 0
	for _, s := range sl {
		n += len(s.Endpoints)
	}
	return n
}

// subGroupsOf names the second-level groups of one port's cluster (local false) or local group.
type subGroupsOf struct {
	o     owner
	local bool
}

// owner returns the owner of the group whose second-level groups these are.
func (k subGroupsOf) owner() owner {
	if k.local {
		return localOwner(k.o)
	}
	return k.o
}

// allocSubGroups gives each of want's groups the IDs of the second-level groups its endpoints
// may need (pipeline.SubGroups of the Service's endpoint count, an upper bound the computation
// does not exceed): none for a Service that one group holds. Call it where group IDs are
// allocated (computation.prepare, on the sync goroutine, in name order).
func (g *groupIDs) allocSubGroups(want []desired, sl []*model.EndpointSlice) {
	k := pipeline.SubGroups(maxSlicesEndpoints(sl))
	if k == 0 {
		return
	}
	for i := range want {
		d := &want[i]
		d.subGIDs = g.getSubs(subGroupsOf{o: d.owner}, k)
		if d.localGID != 0 {
			d.localSubGIDs = g.getSubs(subGroupsOf{o: d.owner, local: true}, k)
		}
	}
}

// getSubs returns the IDs of the first k second-level groups of sg, allocating those missing.
func (g *groupIDs) getSubs(sg subGroupsOf, k int) []uint32 {
	out := make([]uint32, k)
	for i := range out {
		out[i] = g.get(subOwner(sg.owner(), i))
	}
	g.subs[sg] = max(g.subs[sg], k)
	return out
}

// releaseSubs frees the IDs of sg's second-level groups from the from-th on. Call it once the
// bundle that no longer uses them committed. It costs nothing for a group without any.
func (g *groupIDs) releaseSubs(sg subGroupsOf, from int) {
	n := g.subs[sg]
	if n <= from {
		return
	}
	for i := from; i < n; i++ {
		g.release(subOwner(sg.owner(), i))
	}
	if from == 0 {
		delete(g.subs, sg)
	} else {
		g.subs[sg] = from
	}
}
