// Package ipam holds the LoadBalancer address pools and the allocator that
// hands their addresses to Services: one address per IP family, requested
// addresses, opt-in sharing between Services whose ports do not clash, and
// restoring allocations after a restart. The allocator is the single
// writer of allocation state; every operation runs under one lock, so an
// address is never handed out twice.
package ipam

import (
	"errors"
	"fmt"
	"net/netip"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/antrea-proxy/antrea-proxy/pkg/config"
)

// Pool is a configured pool of addresses.
type Pool struct {
	// Name identifies the pool.
	Name string
	// Mode is the ipMode of the pool's addresses in Service status.
	Mode v1.LoadBalancerIPMode
	// NodeSelector selects the nodes that may announce the pool's
	// addresses (VIP pools); labels.Everything() when not configured.
	NodeSelector labels.Selector
	ranges       []config.IPRange
}

// NewPools builds the pools of a validated configuration, keeping order.
func NewPools(cfgs []config.IPPool) ([]*Pool, error) {
	var out []*Pool
	var errs []error
	for _, c := range cfgs {
		p, err := NewPool(c)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, p)
	}
	return out, errors.Join(errs...)
}

// NewPool builds one pool from its configuration.
func NewPool(c config.IPPool) (*Pool, error) {
	ranges, err := c.AddressRanges()
	if err != nil {
		return nil, fmt.Errorf("pool %q: %w", c.Name, err)
	}
	if len(ranges) == 0 {
		return nil, fmt.Errorf("pool %q has no addresses", c.Name)
	}
	sel := labels.Everything()
	if c.NodeSelector != nil {
		if sel, err = metav1.LabelSelectorAsSelector(c.NodeSelector); err != nil {
			return nil, fmt.Errorf("pool %q: nodeSelector: %w", c.Name, err)
		}
	}
	mode := v1.LoadBalancerIPModeVIP
	switch c.IPMode {
	case "", config.IPModeVIP:
	case config.IPModeProxy:
		mode = v1.LoadBalancerIPModeProxy
	default:
		return nil, fmt.Errorf("pool %q: unknown ipMode %q", c.Name, c.IPMode)
	}
	return &Pool{Name: c.Name, Mode: mode, NodeSelector: sel, ranges: ranges}, nil
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
