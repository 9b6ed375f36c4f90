package loadbalancer

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/antrea-proxy/antrea-proxy/pkg/config"
)

func TestNewPoolErrors(t *testing.T) {
	_, err := NewPools([]config.IPPool{{Name: "x", Ranges: []string{"bad"}}, {Name: "y", IPMode: "Other", CIDRs: []string{"10.0.0.0/24"}}, {Name: "z"}})
	require.EqualError(t, err, "pool \"x\": ranges[0]: \"bad\" is not a range \"first-last\"\npool \"y\": unknown ipMode \"Other\"\npool \"z\" has no addresses")
}

// TestNewPoolsFromConfig: CIDRs lose their network (and IPv4 broadcast) address, an empty
// ipMode is VIP, and a node selector selects only matching nodes.
func TestNewPoolsFromConfig(t *testing.T) {
	pools, err := NewPools([]config.IPPool{
		{Name: "a", CIDRs: []string{"192.0.2.0/30"}, Ranges: []string{"fd00::1-fd00::2"},
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"lb": "yes"}}},
		{Name: "p", IPMode: config.IPModeProxy, CIDRs: []string{"10.0.0.0/24"}},
	})
	require.NoError(t, err)
	require.Len(t, pools, 2)
	a, p := pools[0], pools[1]
	require.Equal(t, v1.LoadBalancerIPModeVIP, a.Mode)
	require.Equal(t, v1.LoadBalancerIPModeProxy, p.Mode)
	for addr, want := range map[string]bool{"192.0.2.0": false, "192.0.2.1": true, "192.0.2.2": true, "192.0.2.3": false, "fd00::2": true, "fd00::3": false} {
		require.Equal(t, want, a.Contains(netip.MustParseAddr(addr)), addr)
	}
	require.True(t, a.NodeSelector.Matches(labels.Set{"lb": "yes"}))
	require.False(t, a.NodeSelector.Matches(labels.Set{}))
	require.True(t, p.NodeSelector.Matches(labels.Set{}), "no selector: every node")
}
