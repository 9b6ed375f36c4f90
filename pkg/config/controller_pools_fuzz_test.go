package config

import (
	"fmt"
	"net/netip"
	"testing"
)

// FuzzPoolValidation checks that a pool entry the validator accepts hands out no special
// address: neither end of any of its ranges is unspecified, loopback, link-local, multicast,
// the IPv4 broadcast address or IPv4-mapped (by the standard library's own predicates), and the
// range is no broader than the documented limits.
func FuzzPoolValidation(f *testing.F) {
	for _, s := range []string{
		"10.0.0.0/24", "0.0.0.0/0", "::/0", "169.254.169.254/32", "127.0.0.1/32", "224.0.0.1/32",
		"255.255.255.255/32", "fe80::1/128", "ff02::1/128", "::ffff:10.0.0.0/120", "10.0.0.0/16",
		"fd00::/64", "fd00::/63", "10.0.255.0-10.1.0.255", "0.0.0.1-0.0.0.9", "::ffff:1.2.3.4-::ffff:1.2.3.5",
		"169.254.255.255-169.255.0.1", "223.255.255.255-224.0.0.0",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		field := "cidrs"
		if _, err := netip.ParsePrefix(s); err != nil {
			field = "ranges"
		}
		conf := fmt.Sprintf("ipPools:\n- name: p\n  %s: [%q]\n", field, s)
		c, err := ParseController([]byte(conf))
		if err != nil {
			return
		}
		ranges, err := c.IPPools[0].AddressRanges()
		if err != nil {
			t.Fatalf("accepted %q but its ranges do not parse: %v", s, err)
		}
		for _, r := range ranges {
			for _, a := range []netip.Addr{r.First, r.Last} {
				if a.IsUnspecified() || a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
					a.IsMulticast() || a.Is4In6() || a == netip.MustParseAddr("255.255.255.255") {
					t.Fatalf("accepted %q, whose range %s ends at the special address %s", s, r, a)
				}
			}
			limit := MinIPv4PoolPrefix
			if !r.First.Is4() {
				limit = MinIPv6PoolPrefix
			}
			if bits := rangeBits(r); bits > r.First.BitLen()-limit {
				t.Fatalf("accepted %q, whose range %s spans %d bits (limit /%d)", s, r, bits, limit)
			}
		}
	})
}
