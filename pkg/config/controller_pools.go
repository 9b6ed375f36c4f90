package config

// This file holds the checks of an IPPool beyond its syntax: the addresses
// a pool may never hand out, how broad it may be, and the selectors that
// decide which Services may use it.

import (
	"fmt"
	"math/big"
	"net/netip"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Pool size limits: a pool hands out addresses that nodes will answer for,
// so a prefix broader than these surely covers addresses of the network
// itself (gateways, nodes) and is refused as a mistake.
const (
	// MinIPv4PoolPrefix is the shortest IPv4 prefix a pool accepts; an
	// IPv4 range may hold at most as many addresses (65536).
	MinIPv4PoolPrefix = 16
	// MinIPv6PoolPrefix is the shortest IPv6 prefix a pool accepts (one
	// subnet); an IPv6 range may hold at most 2^64 addresses.
	MinIPv6PoolPrefix = 64
)

// specialBlock is a range of addresses no LoadBalancer Service may use.
type specialBlock struct {
	prefix netip.Prefix
	what   string
}

// specialBlocks are the addresses a pool may not contain: no node may
// answer for them on behalf of a Service.
func specialBlocks() []specialBlock {
	p := netip.MustParsePrefix
	return []specialBlock{
		{p("0.0.0.0/8"), `unspecified, "this network"`},
		{p("127.0.0.0/8"), "loopback"},
		{p("169.254.0.0/16"), "link-local, incl. the metadata address 169.254.169.254"},
		{p("224.0.0.0/4"), "multicast"},
		{p("255.255.255.255/32"), "broadcast"},
		{p("::/128"), "unspecified"},
		{p("::1/128"), "loopback"},
		{p("::ffff:0.0.0.0/96"), "IPv4-mapped"},
		{p("fe80::/10"), "link-local"},
		{p("ff00::/8"), "multicast"},
	}
}

func (b specialBlock) overlaps(r IPRange) bool {
	first := b.prefix.Masked().Addr()
	return r.overlaps(IPRange{First: first, Last: lastAddr(b.prefix)})
}

// tooBroad reports whether r holds more addresses than a prefix of the
// shortest length a pool accepts.
func tooBroad(r IPRange) bool {
	minBits := MinIPv4PoolPrefix
	if !r.First.Is4() {
		minBits = MinIPv6PoolPrefix
	}
	// r is too broad when first and last differ above the host bits of
	// the limit, unless they span exactly one such aligned block.
	span, err := r.First.Prefix(minBits)
	if err != nil {
		return false
	}
	if span.Contains(r.Last) {
		return false
	}
	// Two adjacent blocks may still hold no more than one block's worth of
	// addresses (e.g. 10.0.255.0-10.1.0.255): compare the sizes.
	return rangeBits(r) > r.First.BitLen()-minBits
}

// rangeBits returns the bit length of last-first: a range of at most
// 2^n addresses has rangeBits <= n.
func rangeBits(r IPRange) int {
	first, last := r.First.As16(), r.Last.As16()
	return new(big.Int).Sub(new(big.Int).SetBytes(last[:]), new(big.Int).SetBytes(first[:])).BitLen()
}

func (p IPPool) limitMessage(r IPRange) string {
	if r.First.Is4() {
		return fmt.Sprintf("an IPv4 pool takes prefixes of /%d or longer and ranges of at most %d addresses",
			MinIPv4PoolPrefix, 1<<(32-MinIPv4PoolPrefix))
	}
	return fmt.Sprintf("an IPv6 pool takes prefixes of /%d or longer and ranges of at most 2^%d addresses",
		MinIPv6PoolPrefix, 128-MinIPv6PoolPrefix)
}

// entry is one cidrs or ranges item of a pool, parsed.
type entry struct {
	field, text string
	r           IPRange
}

// entries returns the pool's parseable items; AddressRanges reports the others.
func (p IPPool) entries() []entry {
	var out []entry
	for i, s := range p.CIDRs {
		if pfx, err := netip.ParsePrefix(s); err == nil && pfx.Addr().Zone() == "" && !pfx.Addr().Is4In6() {
			out = append(out, entry{fmt.Sprintf("cidrs[%d]", i), s, CIDRRange(pfx)})
		}
	}
	for i, s := range p.Ranges {
		if r, err := ParseIPRange(s); err == nil && !mappedRange(s) {
			out = append(out, entry{fmt.Sprintf("ranges[%d]", i), r.String(), r})
		}
	}
	return out
}

// specialRanges reports every item of the pool that is too broad or
// includes special addresses, one error per problem.
func (p IPPool) specialRanges(path string) []error {
	var errs []error
	for _, e := range p.entries() {
		if tooBroad(e.r) {
			errs = append(errs, fieldErr(path+"."+e.field, "pool %q: %s is too broad: %s", p.Name, e.text, p.limitMessage(e.r)))
		}
		for _, b := range specialBlocks() {
			if b.overlaps(e.r) {
				errs = append(errs, fieldErr(path+"."+e.field, "pool %q: %s includes %s (%s)", p.Name, e.text, b.prefix, b.what))
			}
		}
	}
	return errs
}

// isSpecial reports whether r is too broad or includes special addresses.
func (p IPPool) isSpecial(r IPRange) bool {
	if tooBroad(r) {
		return true
	}
	for _, b := range specialBlocks() {
		if b.overlaps(r) {
			return true
		}
	}
	return false
}

// mappedRange reports whether a "first-last" range names an IPv4-mapped
// IPv6 address, which ParseIPRange unmaps.
func mappedRange(s string) bool {
	a, b, _ := strings.Cut(s, "-")
	for _, x := range []string{a, b} {
		if ip, err := netip.ParseAddr(strings.TrimSpace(x)); err == nil && ip.Is4In6() {
			return true
		}
	}
	return false
}

// validateScope checks the selectors of the pool: the nodes that announce
// its addresses and the Services that may use them.
func (p IPPool) validateScope(path string) []error {
	var errs []error
	for _, s := range []struct {
		name string
		sel  *metav1.LabelSelector
	}{{"nodeSelector", p.NodeSelector}, {"namespaceSelector", p.NamespaceSelector}, {"serviceSelector", p.ServiceSelector}} {
		if s.sel == nil {
			continue
		}
		if _, err := metav1.LabelSelectorAsSelector(s.sel); err != nil {
			errs = append(errs, fieldErr(path+"."+s.name, "%v", err))
		}
	}
	for i, ns := range p.Namespaces {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			errs = append(errs, fieldErr(fmt.Sprintf("%s.namespaces[%d]", path, i), "%q is not a valid namespace: %s", ns, strings.Join(msgs, "; ")))
		}
	}
	return errs
}
