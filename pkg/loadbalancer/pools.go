package loadbalancer

import (
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/antrea-proxy/antrea-proxy/pkg/config"
	"github.com/antrea-proxy/antrea-proxy/pkg/loadbalancer/ipam"
)

// NewPools builds the pools of a validated configuration, keeping order; the errors of every
// pool that cannot be built are reported together.
func NewPools(cfgs []config.IPPool) ([]*ipam.Pool, error) {
	var out []*ipam.Pool
	var errs []error
	for _, c := range cfgs {
		spec, err := poolSpec(c)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		p, err := ipam.NewPool(spec)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, p)
	}
	return out, errors.Join(errs...)
}

// poolSpec converts one configured pool into ipam's spec: its CIDRs and ranges parsed (CIDRs
// first, in file order), an empty ipMode read as VIP, its selectors compiled and its scope
// (namespaces, selectors, autoAssign, cross-namespace sharing) set.
func poolSpec(c config.IPPool) (ipam.PoolSpec, error) {
	ranges, err := c.AddressRanges()
	if err != nil {
		return ipam.PoolSpec{}, fmt.Errorf("pool %q: %w", c.Name, err)
	}
	spec := ipam.PoolSpec{Name: c.Name, Mode: v1.LoadBalancerIPMode(c.IPMode), ProxyEnforcesSourceRanges: c.ProxyEnforcesSourceRanges}
	if c.IPMode == "" {
		spec.Mode = v1.LoadBalancerIPModeVIP
	}
	for _, r := range ranges {
		spec.Ranges = append(spec.Ranges, ipam.Range{First: r.First, Last: r.Last})
	}
	var errs []error
	selector := func(field string, ls *metav1.LabelSelector) labels.Selector {
		if ls == nil {
			return nil
		}
		sel, err := metav1.LabelSelectorAsSelector(ls)
		if err != nil {
			errs = append(errs, fmt.Errorf("pool %q: %s: %w", c.Name, field, err))
		}
		return sel
	}
	spec.NodeSelector = selector("nodeSelector", c.NodeSelector)
	spec.Scope = ipam.Scope{
		Namespaces:            c.Namespaces,
		NamespaceSelector:     selector("namespaceSelector", c.NamespaceSelector),
		ServiceSelector:       selector("serviceSelector", c.ServiceSelector),
		Manual:                !c.AutoAssigns(),
		CrossNamespaceSharing: c.AllowCrossNamespaceSharing,
	}
	return spec, errors.Join(errs...)
}
