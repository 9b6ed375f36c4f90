package proxy

import (
	"strconv"

	discovery "k8s.io/api/discovery/v1"

	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

// subOwner owns the i-th second-level group of o's group (o is a port's owner or its
// localOwner). Its group ID is allocated, kept and released like o's.
func subOwner(o owner, i int) owner { return o + "/sub" + owner(strconv.Itoa(i)) }

// maxSlicesEndpoints bounds the endpoints any port of a Service has in either family: every
// endpoint of its EndpointSlices at most once (model.EndpointsForServicePort).
func maxSlicesEndpoints(sl []*discovery.EndpointSlice) int {
	n := 0
	for _, s := range sl {
		n += len(s.Endpoints)
	}
	return n
}

// allocSubGroups gives each of want's groups the IDs of the second-level groups its endpoints
// may need (pipeline.SubGroups of the Service's endpoint count, an upper bound the computation
// does not exceed): none for a Service that one group holds. Call it where group IDs are
// allocated (computation.prepare, on the sync goroutine, in name order).
func (g *groupIDs) allocSubGroups(want []desired, sl []*discovery.EndpointSlice) {
	k := pipeline.SubGroups(maxSlicesEndpoints(sl))
	if k == 0 {
		return
	}
	for i := range want {
		d := &want[i]
		d.subGIDs = g.getSubs(d.owner, k)
		if d.localGID != 0 {
			d.localSubGIDs = g.getSubs(localOwner(d.owner), k)
		}
	}
}

// getSubs returns the IDs of o's first k second-level groups, allocating those missing.
func (g *groupIDs) getSubs(o owner, k int) []uint32 {
	out := make([]uint32, k)
	for i := range out {
		out[i] = g.get(subOwner(o, i))
	}
	return out
}

// releaseSubs frees the IDs of o's second-level groups from the from-th on (they are allocated
// from the first on, without gaps). Call it once the bundle that no longer uses them committed.
func (g *groupIDs) releaseSubs(o owner, from int) {
	for i := from; ; i++ {
		so := subOwner(o, i)
		if _, ok := g.lookup(so); !ok {
			return
		}
		g.release(so)
	}
}
