package server

import (
	"context"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// TestPodsAndInstalledPodFlows: a tracer's view of the pods is their records and the flows the
// server installed (what OVS holds), across a DEL and a restart.
func TestPodsAndInstalledPodFlows(t *testing.T) {
	e := newEnv(t)
	e.mustOK(req("ADD", "c1", "/var/run/netns/pod1"))
	e.mustOK(req("ADD", "c2", "/var/run/netns/pod2"))
	check := func(names ...string) {
		t.Helper()
		pods, err := e.srv.Pods()
		require.NoError(t, err)
		var got []string
		for _, p := range pods {
			got = append(got, p.Namespace+"/"+p.Name)
			host := hostIfName(p.Name[len("web-"):], "eth0")
			require.Equal(t, host, p.Interface)
			require.Equal(t, macFor(host, true), p.MAC)
			require.Len(t, p.IPs, 1)
		}
		require.Equal(t, names, got)
		dump, err := e.bridge.DumpFlows(context.Background(), openflow.FlowFilter{})
		require.NoError(t, err)
		require.Equal(t, renderSorted(dump), renderSorted(e.srv.InstalledPodFlows()), "the bridge holds only pod flows here")
	}
	check("default/web-c1", "default/web-c2")
	pods, err := e.srv.Pods()
	require.NoError(t, err)
	require.Equal(t, []netip.Addr{netip.MustParseAddr("10.10.0.2")}, pods[0].IPs)
	e.mustOK(req("DEL", "c1", "/var/run/netns/pod1"))
	check("default/web-c2")
	e.restart(2)
	check("default/web-c2")
}
