package ovsdb_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/ovsdb"
)

// TestEnsureZoneTimeouts checks the policy with ovs-vsctl's own reader, on a database without a
// Datapath row, again unchanged, and after ovs-vsctl changed one zone's policy.
func TestEnsureZoneTimeouts(t *testing.T) {
	o, c := setup(t)
	zt := ovsdb.ZoneTimeouts{DatapathType: ovsdb.DatapathNetdev, Zones: []int{65520, 65521},
		Timeouts: map[string]int{"tcp_close": 120, "tcp_time_wait": 120}}
	want := "Zone:65520, Timeout Policies: tcp_close=120 tcp_time_wait=120\n" +
		"Zone:65521, Timeout Policies: tcp_close=120 tcp_time_wait=120"
	require.NoError(t, c.EnsureZoneTimeouts(testContext(t), zt))
	require.Equal(t, want, vsctl(t, o, "list-zone-tp", "netdev"))
	require.NoError(t, c.EnsureZoneTimeouts(testContext(t), zt))
	require.Equal(t, want, vsctl(t, o, "list-zone-tp", "netdev"))
	require.Len(t, splitLines(vsctl(t, o, "--columns=_uuid", "list", "CT_Timeout_Policy")), 2)

	vsctl(t, o, "del-zone-tp", "netdev", "zone=65521")
	vsctl(t, o, "add-zone-tp", "netdev", "zone=65522", "udp_first=7")
	require.NoError(t, c.EnsureZoneTimeouts(testContext(t), zt))
	require.Equal(t, want+"\nZone:65522, Timeout Policies: udp_first=7", vsctl(t, o, "list-zone-tp", "netdev"))

	require.Error(t, c.EnsureZoneTimeouts(testContext(t), ovsdb.ZoneTimeouts{DatapathType: ovsdb.DatapathNetdev}))
}

// splitLines returns the non-empty lines of s.
func splitLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}
