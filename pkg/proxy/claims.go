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
//
// It keeps a Service's name per claim and its creation time once, with its claims (of): a
// claimant's rank is read from there.
type claimIndex struct {
	// cluster holds the first ClusterIP claimant of each address, clusterMore the others of an
	// address claimed more than once (almost never: ClusterIPs are allocated uniquely).
	cluster     map[netip.Addr]types.NamespacedName
	clusterMore map[netip.Addr][]types.NamespacedName
	// external holds the external claimants of each tuple, and byAddr the tuples claimed
	// externally on each address.
	external map[tupleKey][]types.NamespacedName
	byAddr   map[netip.Addr]map[tupleKey]struct{}
	// of holds each Service's claims and creation time (what set replaces, what ranks it).
	of claimStore
}

// svcClaims are a Service's claims (never empty) and the creation time they were set with.
type svcClaims struct {
	created time.Time
	claims  []claim
}

// claimStore keeps each claiming Service's svcClaims. The proxier keeps them in its Service
// records (recordClaims), so that the index has no per-Service map of its own; a nameMap keeps
// them on their own (tests).
type claimStore interface {
	get(svc types.NamespacedName) (svcClaims, bool)
	put(svc types.NamespacedName, sc svcClaims)
	remove(svc types.NamespacedName)
}

// newClaimIndex returns an empty index keeping the Services' claims in of.
func newClaimIndex(of claimStore) *claimIndex {
	return &claimIndex{cluster: map[netip.Addr]types.NamespacedName{}, clusterMore: map[netip.Addr][]types.NamespacedName{},
		external: map[tupleKey][]types.NamespacedName{}, byAddr: map[netip.Addr]map[tupleKey]struct{}{}, of: of}
}

// claimed returns svc's claims (none: it claims nothing).
func (x *claimIndex) claimed(svc types.NamespacedName) []claim {
	sc, _ := x.of.get(svc)
	return sc.claims
}

// claimant returns svc as a claimant of kind, with its creation time.
func (x *claimIndex) claimant(svc types.NamespacedName, kind claimKind) claimant {
	sc, _ := x.of.get(svc)
	return claimant{svc: svc, kind: kind, created: sc.created}
}

// first returns the claimant that comes first among the Services of kind in lists; ok false
// for none.
func (x *claimIndex) first(kind claimKind, lists ...[]types.NamespacedName) (best claimant, ok bool) {
	for _, l := range lists {
		for _, svc := range l {
			if c := x.claimant(svc, kind); !ok || c.before(best) {
				best, ok = c, true
			}
		}
	}
	return best, ok
}

// owner returns the owner of an external claim on k: the ClusterIP claimant of its address if
// there is one, else the first external claimant.
func (x *claimIndex) owner(k tupleKey) (claimant, bool) {
	if k.addr.IsValid() {
		if svc, ok := x.cluster[k.addr]; ok {
			return x.first(claimClusterIP, []types.NamespacedName{svc}, x.clusterMore[k.addr])
		}
	}
	return x.first(claimExternal, x.external[k])
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
	prev, _ := x.of.get(svc)
	old := prev.claims
	if slices.Equal(old, claims) && (len(claims) == 0 || prev.created == created) {
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
			affected[c] = struct{}{}
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

// remove forgets svc's claims, claims.
func (x *claimIndex) remove(svc types.NamespacedName, claims []claim) {
	drop := func(l []types.NamespacedName) []types.NamespacedName {
		return slices.DeleteFunc(l, func(c types.NamespacedName) bool { return c == svc })
	}
	for _, c := range claims {
		if c.kind == claimClusterIP {
			x.removeCluster(svc, c.key.addr)
			continue
		}
		if l := drop(x.external[c.key]); len(l) > 0 {
			x.external[c.key] = l
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
	if len(claims) > 0 {
		x.of.remove(svc)
	}
}

// removeCluster forgets svc's ClusterIP claim on addr.
func (x *claimIndex) removeCluster(svc types.NamespacedName, addr netip.Addr) {
	more := x.clusterMore[addr]
	if x.cluster[addr] == svc {
		if len(more) == 0 {
			delete(x.cluster, addr)
			return
		}
		// Another claimant takes the first place; which one does not matter (first ranks).
		x.cluster[addr], more = more[len(more)-1], more[:len(more)-1]
	} else {
		more = slices.DeleteFunc(more, func(c types.NamespacedName) bool { return c == svc })
	}
	if len(more) == 0 {
		delete(x.clusterMore, addr)
	} else {
		x.clusterMore[addr] = more
	}
}

func (x *claimIndex) add(svc types.NamespacedName, created time.Time, claims []claim) {
	if len(claims) == 0 {
		return
	}
	x.of.put(svc, svcClaims{created: created, claims: claims})
	for _, c := range claims {
		if c.kind == claimClusterIP {
			if _, taken := x.cluster[c.key.addr]; taken {
				x.clusterMore[c.key.addr] = append(x.clusterMore[c.key.addr], svc)
			} else {
				x.cluster[c.key.addr] = svc
			}
			continue
		}
		x.external[c.key] = append(x.external[c.key], svc)
		if x.byAddr[c.key.addr] == nil {
			x.byAddr[c.key.addr] = map[tupleKey]struct{}{}
		}
		x.byAddr[c.key.addr][c.key] = struct{}{}
	}
}
