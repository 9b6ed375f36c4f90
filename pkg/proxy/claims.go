package proxy

import (
	"net/netip"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
)

// claimKind is how a Service asks for a tuple: its ClusterIP (allocated to it by the API
// server), or an ExternalIP, LB ingress IP or NodePort (any of which a user or a controller
// may set to whatever they like).
type claimKind uint8

const (
	claimClusterIP claimKind = iota
	claimExternal
)

// tupleKey is one (family, address, protocol, port) a Service port may program. A NodePort
// claims every NodePort address of its family: its addr is the zero Addr.
type tupleKey struct {
	v6    bool
	addr  netip.Addr
	proto model.Protocol
	port  uint16
}

// claim is one tuple a Service asks for, and how.
type claim struct {
	key  tupleKey
	kind claimKind
}

// claimant is a Service asking for a tuple.
type claimant struct {
	svc     types.NamespacedName
	kind    claimKind
	created time.Time
}

// before orders claimants: a ClusterIP claim first, then the Service created first, then by
// namespace/name (the contested-flow tie-break, rankOwners).
func (c claimant) before(o claimant) bool {
	if c.kind != o.kind {
		return c.kind < o.kind
	}
	if !c.created.Equal(o.created) {
		return c.created.Before(o.created)
	}
	return compareNames(c.svc, o.svc) < 0
}

// claimIndex decides, before any flow is built, which Service owns each tuple: one owner per
// (family, address, protocol, port) across every flow variant of a port. A ClusterIP owns its
// address on every protocol and port against external claims (the address is allocated to its
// Service; its other ports are rejected); among external claims on one tuple the older Service
// wins. The owners are a function of the set of claims only, never of the order they came in.
// Two ClusterIP claims on one address (the API server allocates them uniquely) are left to
// the flow state's per-key handling.
type claimIndex struct {
	// cluster holds the ClusterIP claimants of each address.
	cluster map[netip.Addr][]claimant
	// external holds the external claimants of each tuple, and byAddr the tuples claimed
	// externally on each address.
	external map[tupleKey][]claimant
	byAddr   map[netip.Addr]map[tupleKey]struct{}
	// of holds each Service's claims (what set replaces).
	of map[types.NamespacedName][]claim
}

func newClaimIndex() *claimIndex {
	return &claimIndex{cluster: map[netip.Addr][]claimant{}, external: map[tupleKey][]claimant{},
		byAddr: map[netip.Addr]map[tupleKey]struct{}{}, of: map[types.NamespacedName][]claim{}}
}

// first returns the claimant that comes first in cs; ok false for none.
func first(cs []claimant) (best claimant, ok bool) {
	for i, c := range cs {
		if i == 0 || c.before(best) {
			best = c
		}
	}
	return best, len(cs) > 0
}

// owner returns the owner of an external claim on k: the ClusterIP claimant of its address if
// there is one, else the first external claimant.
func (x *claimIndex) owner(k tupleKey) (claimant, bool) {
	if k.addr.IsValid() {
		if c, ok := first(x.cluster[k.addr]); ok {
			return c, true
		}
	}
	return first(x.external[k])
}

// lost returns who owns k when it is not svc: ok false when svc owns it (or nobody claims it).
func (x *claimIndex) lost(svc types.NamespacedName, k tupleKey) (claimant, bool) {
	c, ok := x.owner(k)
	if !ok || c.svc == svc {
		return claimant{}, false
	}
	return c, true
}

// set replaces svc's claims with claims (none: svc is gone) and returns every Service whose
// outcome may have changed: the claimants of every tuple whose owner changed, svc included.
func (x *claimIndex) set(svc types.NamespacedName, created time.Time, claims []claim) []types.NamespacedName {
	old := x.of[svc]
	if slices.Equal(old, claims) && (len(claims) == 0 || x.createdOf(svc, claims[0]) == created) {
		return nil
	}
	touched := x.touched(old, claims)
	before := make(map[tupleKey]claimant, len(touched))
	for _, k := range touched {
		before[k], _ = x.owner(k)
	}
	x.remove(svc, old)
	x.add(svc, created, claims)
	affected := map[types.NamespacedName]struct{}{svc: {}}
	for _, k := range touched {
		after, _ := x.owner(k)
		if after == before[k] {
			continue
		}
		for _, c := range x.external[k] {
			affected[c.svc] = struct{}{}
		}
		for _, c := range []claimant{before[k], after} {
			if c.svc.Name != "" {
				affected[c.svc] = struct{}{}
			}
		}
	}
	out := make([]types.NamespacedName, 0, len(affected))
	for nn := range affected {
		out = append(out, nn)
	}
	slices.SortFunc(out, compareNames)
	return out
}

// createdOf returns the creation time svc's claim c was recorded with.
func (x *claimIndex) createdOf(svc types.NamespacedName, c claim) time.Time {
	list := x.external[c.key]
	if c.kind == claimClusterIP {
		list = x.cluster[c.key.addr]
	}
	for _, cl := range list {
		if cl.svc == svc {
			return cl.created
		}
	}
	return time.Time{}
}

// touched returns the external tuples whose owner claims in old or in claims can change: their
// own, and every external tuple on an address either claims as a ClusterIP.
func (x *claimIndex) touched(old, claims []claim) []tupleKey {
	seen := map[tupleKey]struct{}{}
	for _, list := range [][]claim{old, claims} {
		for _, c := range list {
			if c.kind == claimExternal {
				seen[c.key] = struct{}{}
				continue
			}
			for k := range x.byAddr[c.key.addr] {
				seen[k] = struct{}{}
			}
		}
	}
	// External claims of claims not yet indexed on a ClusterIP address are in seen already.
	out := make([]tupleKey, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	return out
}

func (x *claimIndex) remove(svc types.NamespacedName, claims []claim) {
	drop := func(cs []claimant) []claimant {
		return slices.DeleteFunc(cs, func(c claimant) bool { return c.svc == svc })
	}
	for _, c := range claims {
		if c.kind == claimClusterIP {
			if cs := drop(x.cluster[c.key.addr]); len(cs) > 0 {
				x.cluster[c.key.addr] = cs
			} else {
				delete(x.cluster, c.key.addr)
			}
			continue
		}
		if cs := drop(x.external[c.key]); len(cs) > 0 {
			x.external[c.key] = cs
			continue
		}
		delete(x.external, c.key)
		if m := x.byAddr[c.key.addr]; m != nil {
			delete(m, c.key)
			if len(m) == 0 {
				delete(x.byAddr, c.key.addr)
			}
		}
	}
	delete(x.of, svc)
}

func (x *claimIndex) add(svc types.NamespacedName, created time.Time, claims []claim) {
	if len(claims) == 0 {
		return
	}
	x.of[svc] = claims
	for _, c := range claims {
		cl := claimant{svc: svc, kind: c.kind, created: created}
		if c.kind == claimClusterIP {
			x.cluster[c.key.addr] = append(x.cluster[c.key.addr], cl)
			continue
		}
		x.external[c.key] = append(x.external[c.key], cl)
		if x.byAddr[c.key.addr] == nil {
			x.byAddr[c.key.addr] = map[tupleKey]struct{}{}
		}
		x.byAddr[c.key.addr][c.key] = struct{}{}
	}
}
