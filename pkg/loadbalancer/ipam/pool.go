// Package ipam holds the LoadBalancer address pools and the allocator that
// hands their addresses to Services: one address per IP family, requested
// addresses, opt-in sharing between Services whose ports do not clash, and
// restoring allocations after a restart. The allocator is the single
// writer of allocation state; every operation runs under one lock, so an
// address is never handed out twice.
package ipam

import (
	"fmt"
	"net/netip"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Range is an inclusive range of addresses of one family.
type Range struct {
	First, Last netip.Addr
}

// Contains reports whether a lies in r.
func (r Range) Contains(a netip.Addr) bool {
	a = a.Unmap()
	return r.First.BitLen() == a.BitLen() && r.First.Compare(a) <= 0 && a.Compare(r.Last) <= 0
}

// PoolSpec describes one pool: what NewPool needs, parsed and checked by the caller
// (antrea-controller converts its configuration's ipPools into PoolSpecs).
type PoolSpec struct {
	// Name identifies the pool.
	Name string
	// Mode is the ipMode of the pool's addresses: VIP or Proxy.
	Mode v1.LoadBalancerIPMode
	// Ranges are the pool's addresses, in the order they are handed out.
	Ranges []Range
	// NodeSelector selects the nodes that may announce the pool's addresses (VIP pools);
	// nil means every node.
	NodeSelector labels.Selector
	// Scope restricts the Services that may use the pool.
	Scope Scope
	// ProxyEnforcesSourceRanges (Proxy pools): the external proxy enforces
	// loadBalancerSourceRanges.
	ProxyEnforcesSourceRanges bool
}

// Pool is a configured pool of addresses.
type Pool struct {
	// Name identifies the pool.
	Name string
	// Mode is the ipMode of the pool's addresses in Service status.
	Mode v1.LoadBalancerIPMode
	// NodeSelector selects the nodes that may announce the pool's
	// addresses (VIP pools); labels.Everything() when not configured.
	NodeSelector labels.Selector
	// Scope restricts the Services that may use the pool.
	Scope Scope
	// ProxyEnforcesSourceRanges (Proxy pools): the external proxy enforces
	// loadBalancerSourceRanges.
	ProxyEnforcesSourceRanges bool
	ranges                    []Range
}

// NewPool builds one pool from its spec.
func NewPool(s PoolSpec) (*Pool, error) {
	if len(s.Ranges) == 0 {
		return nil, fmt.Errorf("pool %q has no addresses", s.Name)
	}
	switch s.Mode {
	case v1.LoadBalancerIPModeVIP, v1.LoadBalancerIPModeProxy:
	default:
		return nil, fmt.Errorf("pool %q: unknown ipMode %q", s.Name, s.Mode)
	}
	sel := s.NodeSelector
	if sel == nil {
		sel = labels.Everything()
	}
	return &Pool{Name: s.Name, Mode: s.Mode, NodeSelector: sel, Scope: s.Scope,
		ProxyEnforcesSourceRanges: s.ProxyEnforcesSourceRanges, ranges: s.Ranges}, nil
}

// Contains reports whether a belongs to the pool.
func (p *Pool) Contains(a netip.Addr) bool {
	for _, r := range p.ranges {
		if r.Contains(a) {
			return true
		}
	}
	return false
}

// HasFamily reports whether the pool has addresses of family f.
func (p *Pool) HasFamily(f v1.IPFamily) bool {
	for _, r := range p.ranges {
		if FamilyOf(r.First) == f {
			return true
		}
	}
	return false
}

// Size returns the number of addresses in the pool (as a float: an IPv6
// range can hold more than 2^64).
func (p *Pool) Size() float64 {
	var n float64
	for _, r := range p.ranges {
		n += rangeSize(r)
	}
	return n
}

func rangeSize(r Range) float64 {
	first, last := r.First.As16(), r.Last.As16()
	var n float64
	borrow := 0
	// last - first, byte by byte from the lowest.
	diff := make([]byte, 16)
	for i := 15; i >= 0; i-- {
		d := int(last[i]) - int(first[i]) - borrow
		borrow = 0
		if d < 0 {
			d += 256
			borrow = 1
		}
		diff[i] = byte(d)
	}
	for _, b := range diff {
		n = n*256 + float64(b)
	}
	return n + 1
}

// firstFree returns the lowest address of family f in the pool for which
// used is false.
func (p *Pool) firstFree(f v1.IPFamily, used func(netip.Addr) bool) (netip.Addr, bool) {
	for _, r := range p.ranges {
		if FamilyOf(r.First) != f {
			continue
		}
		for a := r.First; a.IsValid() && a.Compare(r.Last) <= 0; a = a.Next() {
			if !used(a) {
				return a, true
			}
		}
	}
	return netip.Addr{}, false
}

// FamilyOf returns the IP family of a.
func FamilyOf(a netip.Addr) v1.IPFamily {
	if a.Unmap().Is4() {
		return v1.IPv4Protocol
	}
	return v1.IPv6Protocol
}
