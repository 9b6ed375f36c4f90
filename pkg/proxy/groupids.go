package proxy

// groupIDs hands out OpenFlow group IDs to owners. An ID is stable for as long as its owner
// exists and is reused only after the owner's removal was committed to OVS.
type groupIDs struct {
	// byOwner holds the IDs of the second-level groups' owners (subOwner); a Service port's
	// cluster and local group IDs are in its ownerInfo.
	byOwner map[owner]uint32
	free    []uint32
	next    uint32
	// subs counts the second-level group IDs allocated per group (subgroups.go), from the
	// first on without gaps.
	subs map[subGroupsOf]int
}

func newGroupIDs() *groupIDs {
	return &groupIDs{byOwner: map[owner]uint32{}, next: 1, subs: map[subGroupsOf]int{}}
}

// get returns the owner's ID, allocating one if needed.
func (g *groupIDs) get(o owner) uint32 {
	if id, ok := g.byOwner[o]; ok {
		return id
	}
	id := g.alloc()
	g.byOwner[o] = id
	return id
}

// alloc returns an unused ID, the last one freed first. A Service port's own group IDs are kept
// in its ownerInfo (p.ownerMeta) and allocated and freed here; byOwner holds the others.
func (g *groupIDs) alloc() uint32 {
	if n := len(g.free); n > 0 {
		id := g.free[n-1]
		g.free = g.free[:n-1]
		return id
	}
	id := g.next
	g.next++
	return id
}

// freeID makes id available again (0: none).
func (g *groupIDs) freeID(id uint32) {
	if id != 0 {
		g.free = append(g.free, id)
	}
}

// lookup returns the owner's ID without allocating.
func (g *groupIDs) lookup(o owner) (uint32, bool) {
	id, ok := g.byOwner[o]
	return id, ok
}

// release frees the owner's ID.
func (g *groupIDs) release(o owner) {
	if id, ok := g.byOwner[o]; ok {
		delete(g.byOwner, o)
		g.freeID(id)
	}
}
