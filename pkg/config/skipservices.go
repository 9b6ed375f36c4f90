package config

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// SkipServices is the parsed form of antreaProxy.skipServices: the Services
// the proxy must ignore, by name or by ClusterIP.
type SkipServices struct {
	Names map[types.NamespacedName]struct{}
	IPs   map[netip.Addr]struct{}
}

// HasName reports whether the Service named nn is skipped.
func (s SkipServices) HasName(nn types.NamespacedName) bool {
	_, ok := s.Names[nn]
	return ok
}

// HasIP reports whether Services with ClusterIP ip are skipped. IPv4-mapped
// IPv6 addresses match their IPv4 form.
func (s SkipServices) HasIP(ip netip.Addr) bool {
	_, ok := s.IPs[ip.Unmap()]
	return ok
}

// Len returns the number of distinct entries.
func (s SkipServices) Len() int { return len(s.Names) + len(s.IPs) }

// ParseSkipServices parses skipServices entries, each "namespace/name" or an
// IP address. Duplicates collapse. Every bad entry is reported (errors.Join
// of *FieldError with paths "skipServices[i]").
func ParseSkipServices(entries []string) (SkipServices, error) {
	s := SkipServices{
		Names: make(map[types.NamespacedName]struct{}),
		IPs:   make(map[netip.Addr]struct{}),
	}
	var errs []error
	for i, e := range entries {
		nn, ip, err := parseSkipService(e)
		switch {
		case err != nil:
			errs = append(errs, fieldErr(fmt.Sprintf("skipServices[%d]", i), "%v", err))
		case ip.IsValid():
			s.IPs[ip] = struct{}{}
		default:
			s.Names[nn] = struct{}{}
		}
	}
	return s, errors.Join(errs...)
}

// SkipServiceSet is ParseSkipServices applied to p.SkipServices.
func (p AntreaProxyConfig) SkipServiceSet() (SkipServices, error) {
	return ParseSkipServices(p.SkipServices)
}

// NodePortPrefixes returns nodePortAddresses as masked prefixes; an empty
// result means "all node IPs".
func (p AntreaProxyConfig) NodePortPrefixes() ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(p.NodePortAddresses))
	var errs []error
	for i, s := range p.NodePortAddresses {
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			errs = append(errs, fieldErr(fmt.Sprintf("nodePortAddresses[%d]", i), "%q is not a valid CIDR", s))
			continue
		}
		out = append(out, pfx.Masked())
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// ExternalIPPrefixes returns externalIPCIDRs as masked, unmapped prefixes; an empty result means
// "any externalIP". Call it on a validated config (an invalid entry is skipped).
func (p AntreaProxyConfig) ExternalIPPrefixes() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range p.ExternalIPCIDRs {
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			continue
		}
		if a := pfx.Addr(); a.Is4In6() && pfx.Bits() >= 96 {
			pfx = netip.PrefixFrom(a.Unmap(), pfx.Bits()-96)
		}
		out = append(out, pfx.Masked())
	}
	return out
}

// parseSkipService parses one skipServices entry; exactly one of the results
// is set on success. IPs are unmapped (::ffff:10.0.0.1 becomes 10.0.0.1).
func parseSkipService(s string) (types.NamespacedName, netip.Addr, error) {
	if ip, err := netip.ParseAddr(s); err == nil {
		if ip.Zone() != "" {
			return types.NamespacedName{}, netip.Addr{}, fmt.Errorf("%q: a ClusterIP has no zone", s)
		}
		return types.NamespacedName{}, ip.Unmap(), nil
	}
	ns, name, ok := strings.Cut(s, "/")
	if !ok || strings.Contains(name, "/") {
		return types.NamespacedName{}, netip.Addr{}, fmt.Errorf("%q is neither \"namespace/name\" nor an IP address", s)
	}
	if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
		return types.NamespacedName{}, netip.Addr{}, fmt.Errorf("%q: namespace %q is invalid: %s", s, ns, strings.Join(msgs, "; "))
	}
	if msgs := validation.IsDNS1035Label(name); len(msgs) > 0 {
		return types.NamespacedName{}, netip.Addr{}, fmt.Errorf("%q: Service name %q is invalid: %s", s, name, strings.Join(msgs, "; "))
	}
	return types.NamespacedName{Namespace: ns, Name: name}, netip.Addr{}, nil
}
