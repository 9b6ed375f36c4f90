package ipam

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// This file holds who may hold an address next to its current holders:
// the same allow-shared-ip key, no clashing port, one namespace unless the
// pool allows sharing across namespaces, and no reservation or retiring
// Service in the way.

// findShareable returns the lowest address of family fam in candidates
// that is held by other Services and can be shared with svc.
func (a *Allocator) findShareable(fam v1.IPFamily, candidates []*Pool, svc types.NamespacedName, o *owner) (netip.Addr, bool) {
	var held []netip.Addr
	for addr, hs := range a.holders {
		if !slices.Contains(hs, svc) && a.canHold(addr, svc, o) {
			held = append(held, addr)
		}
	}
	return lowestIn(held, fam, candidates)
}

// lowestIn returns the lowest of addrs of family fam that lies in one of
// candidates.
func lowestIn(addrs []netip.Addr, fam v1.IPFamily, candidates []*Pool) (netip.Addr, bool) {
	var best netip.Addr
	for _, addr := range addrs {
		if FamilyOf(addr) != fam || !slices.ContainsFunc(candidates, func(p *Pool) bool { return p.Contains(addr) }) {
			continue
		}
		if !best.IsValid() || addr.Less(best) {
			best = addr
		}
	}
	return best, best.IsValid()
}

// canHold reports whether svc (described by o) may hold addr next to its
// current holders.
func (a *Allocator) canHold(addr netip.Addr, svc types.NamespacedName, o *owner) bool {
	if !slices.Contains(a.holders[addr], svc) && slices.ContainsFunc(a.retiring[addr], func(r types.NamespacedName) bool { return r != svc }) {
		return false // still published by a Service that dropped it
	}
	if _, kept := a.keptFromOthers(addr, svc); kept {
		return false
	}
	pool := a.PoolOf(addr)
	for _, h := range a.holders[addr] {
		if h == svc {
			continue
		}
		other := a.owners[h]
		if o.shareKey == "" || other.shareKey != o.shareKey || portsClash(o.ports, other.ports) {
			return false
		}
		if pool == nil || !pool.shareable(h.Namespace, svc.Namespace) {
			return false
		}
	}
	return true
}

// crossNamespaceOnly reports whether the only thing that keeps svc from
// sharing addr is that its pool does not allow sharing across namespaces.
func (a *Allocator) crossNamespaceOnly(addr netip.Addr, svc types.NamespacedName, o *owner) bool {
	if slices.ContainsFunc(a.retiring[addr], func(r types.NamespacedName) bool { return r != svc }) || o.shareKey == "" {
		return false
	}
	foreign := false
	for _, h := range a.holders[addr] {
		if h == svc {
			continue
		}
		other := a.owners[h]
		if other.shareKey != o.shareKey || portsClash(o.ports, other.ports) {
			return false
		}
		foreign = foreign || h.Namespace != svc.Namespace
	}
	return foreign
}

func (a *Allocator) describeHolders(addr netip.Addr, svc types.NamespacedName, o *owner) string {
	var parts []string
	for _, r := range a.retiring[addr] {
		if r != svc {
			parts = append(parts, r.String()+", which still publishes it until its status is updated")
		}
	}
	pool := a.PoolOf(addr)
	for _, h := range a.holders[addr] {
		if h == svc {
			continue
		}
		other := a.owners[h]
		sameKey := o.shareKey != "" && other.shareKey == o.shareKey && !portsClash(o.ports, other.ports)
		if sameKey && pool != nil && pool.shareable(h.Namespace, svc.Namespace) {
			continue // not the one in the way
		}
		if sameKey && pool != nil {
			parts = append(parts, fmt.Sprintf("%s of another namespace: pool %q does not allow sharing across namespaces (allowCrossNamespaceSharing)", h, pool.Name))
			continue
		}
		why := "which does not allow sharing"
		switch {
		case o.shareKey == "":
			why = "and this Service does not allow sharing"
		case other.shareKey == "":
		case other.shareKey != o.shareKey:
			why = fmt.Sprintf("with a different sharing key (%q)", other.shareKey)
		default:
			why = "with clashing ports " + clashing(o.ports, other.ports)
		}
		parts = append(parts, h.String()+" "+why)
	}
	return strings.Join(parts, ", ")
}

func portsClash(a, b []PortKey) bool { return clashing(a, b) != "" }

func clashing(a, b []PortKey) string {
	var out []string
	for _, p := range a {
		if slices.Contains(b, p) {
			out = append(out, p.String())
		}
	}
	return strings.Join(out, ",")
}
