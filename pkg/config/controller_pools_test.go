package config

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestValidateRefusesSpecialRanges: a pool may not hand out addresses
// that no Service should answer for (the unspecified, loopback,
// link-local, multicast and broadcast addresses, IPv4-mapped IPv6
// addresses) nor be so broad that it surely covers such addresses; every
// problem is reported, naming the pool and the range.
func TestValidateRefusesSpecialRanges(t *testing.T) {
	in := `
ipPools:
- name: all
  cidrs: ["0.0.0.0/0", "::/0"]
- name: special
  cidrs: ["127.0.0.0/30", "169.254.169.254/32", "224.0.0.0/24", "255.255.255.255/32", "fe80::/64", "ff02::/120", "::1/128"]
  ranges: ["0.0.0.0-0.0.0.3", "::ffff:10.0.0.1-::ffff:10.0.0.9", ":: - ::3"]
- name: broad
  cidrs: ["10.0.0.0/15", "fd00::/63"]
  ranges: ["10.8.0.0-10.9.0.0"]
- name: fine
  cidrs: ["10.20.0.0/16", "fd00:20::/64"]
  ranges: ["10.30.0.1-10.30.255.254"]
`
	_, err := ParseController([]byte(in))
	require.Equal(t, []string{
		`ipPools[0].cidrs[0]: pool "all": 0.0.0.0/0 is too broad: an IPv4 pool takes prefixes of /16 or longer and ranges of at most 65536 addresses`,
		`ipPools[0].cidrs[0]: pool "all": 0.0.0.0/0 includes 0.0.0.0/8 (unspecified, "this network")`,
		`ipPools[0].cidrs[0]: pool "all": 0.0.0.0/0 includes 127.0.0.0/8 (loopback)`,
		`ipPools[0].cidrs[0]: pool "all": 0.0.0.0/0 includes 169.254.0.0/16 (link-local, incl. the metadata address 169.254.169.254)`,
		`ipPools[0].cidrs[0]: pool "all": 0.0.0.0/0 includes 224.0.0.0/4 (multicast)`,
		`ipPools[0].cidrs[1]: pool "all": ::/0 is too broad: an IPv6 pool takes prefixes of /64 or longer and ranges of at most 2^64 addresses`,
		`ipPools[0].cidrs[1]: pool "all": ::/0 includes ::1/128 (loopback)`,
		`ipPools[0].cidrs[1]: pool "all": ::/0 includes ::ffff:0.0.0.0/96 (IPv4-mapped)`,
		`ipPools[0].cidrs[1]: pool "all": ::/0 includes fe80::/10 (link-local)`,
		`ipPools[0].cidrs[1]: pool "all": ::/0 includes ff00::/8 (multicast)`,
		`ipPools[1].ranges[1]: pool "special": "::ffff:10.0.0.1-::ffff:10.0.0.9": IPv4-mapped IPv6 addresses are not allowed; write the IPv4 address`,
		`ipPools[1].cidrs[0]: pool "special": 127.0.0.0/30 includes 127.0.0.0/8 (loopback)`,
		`ipPools[1].cidrs[1]: pool "special": 169.254.169.254/32 includes 169.254.0.0/16 (link-local, incl. the metadata address 169.254.169.254)`,
		`ipPools[1].cidrs[2]: pool "special": 224.0.0.0/24 includes 224.0.0.0/4 (multicast)`,
		`ipPools[1].cidrs[3]: pool "special": 255.255.255.255/32 includes 255.255.255.255/32 (broadcast)`,
		`ipPools[1].cidrs[4]: pool "special": fe80::/64 includes fe80::/10 (link-local)`,
		`ipPools[1].cidrs[5]: pool "special": ff02::/120 includes ff00::/8 (multicast)`,
		`ipPools[1].cidrs[6]: pool "special": ::1/128 includes ::1/128 (loopback)`,
		`ipPools[1].ranges[0]: pool "special": 0.0.0.0-0.0.0.3 includes 0.0.0.0/8 (unspecified, "this network")`,
		`ipPools[1].ranges[2]: pool "special": ::-::3 includes ::/128 (unspecified)`,
		`ipPools[1].ranges[2]: pool "special": ::-::3 includes ::1/128 (loopback)`,
		`ipPools[2].cidrs[0]: pool "broad": 10.0.0.0/15 is too broad: an IPv4 pool takes prefixes of /16 or longer and ranges of at most 65536 addresses`,
		`ipPools[2].cidrs[1]: pool "broad": fd00::/63 is too broad: an IPv6 pool takes prefixes of /64 or longer and ranges of at most 2^64 addresses`,
		`ipPools[2].ranges[0]: pool "broad": 10.8.0.0-10.9.0.0 is too broad: an IPv4 pool takes prefixes of /16 or longer and ranges of at most 65536 addresses`,
	}, errorLines(err))
}

// TestControllerWithoutPools: no pool is a valid configuration (the chart
// ships none); the controller runs and reports Services as not
// provisionable.
func TestControllerWithoutPools(t *testing.T) {
	c, err := ParseController([]byte("loadBalancerClass: example.com/lb\n"))
	require.NoError(t, err)
	require.Empty(t, c.IPPools)
}
