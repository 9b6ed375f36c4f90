package agent

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/antrea-proxy/antrea-proxy/pkg/config"
)

// TestSkipSetIsConfigs: the proxier skips exactly the entries config parsed and validated.
func TestSkipSetIsConfigs(t *testing.T) {
	parsed, err := config.AntreaProxyConfig{SkipServices: []string{"kube-system/kube-dns", "::ffff:10.96.0.99", "fd00::99"}}.SkipServiceSet()
	require.NoError(t, err)
	s := skipSet(parsed)
	require.Equal(t, sets.New(types.NamespacedName{Namespace: "kube-system", Name: "kube-dns"}), s.Names)
	require.Equal(t, sets.New(netip.MustParseAddr("10.96.0.99"), netip.MustParseAddr("fd00::99")), s.IPs)
}
