package proxy

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestInstallBaseFlowsBeforeFirstSync: before any sync, InstallBaseFlows puts the node-level
// flows (and nothing else) on the bridge; the first sync replaces them atomically, leaving the
// bridge as a first sync alone does; afterwards it does nothing. A replay before the first sync
// (ovs-vswitchd restarted) installs them again.
func TestInstallBaseFlowsBeforeFirstSync(t *testing.T) {
	svc := makeService("ns1", "web", "10.96.0.10")
	slice := makeSlice("ns1", "web", "web-1", 8080, v1.ProtocolTCP, "http", ep{ip: "10.10.1.5", node: testNode, ready: true})
	fresh := newHarness(t, testOptions())
	fresh.addService(svc)
	fresh.addSlice(slice)
	fresh.sync()

	h := newHarness(t, testOptions())
	require.NoError(t, h.p.InstallBaseFlows(t.Context()))
	early := h.bridge.Dump()
	require.Contains(t, early, "table=20,priority=0 actions=NORMAL")
	require.NotContains(t, early, "10.96.0.10")
	for _, line := range strings.Split(strings.TrimSpace(early), "\n") {
		require.Contains(t, fresh.bridge.Dump(), line, "an early node-level flow the first sync does not install")
	}

	h.bridge.Reset()
	require.NoError(t, h.p.Reconciler().Replay(t.Context()))
	require.Equal(t, early, h.bridge.Dump(), "a replay before the first sync installs the node-level flows")

	h.addService(svc)
	h.addSlice(slice)
	h.sync()
	require.Equal(t, fresh.bridge.Dump(), h.bridge.Dump())
	require.NoError(t, h.p.InstallBaseFlows(t.Context()))
	require.Equal(t, fresh.bridge.Dump(), h.bridge.Dump(), "after a sync it does nothing")
}

// TestInstallBaseFlowsAfterFailedStart: the first sync scanned the bridge and failed; the
// node-level flows installed afterwards for an older Node are deleted by the next sync's bundle,
// which installs the current Node's.
func TestInstallBaseFlowsAfterFailedStart(t *testing.T) {
	h := newHarness(t, testOptions())
	h.bridge.FailNextApply(errors.New("connection reset"))
	require.Error(t, h.p.SyncNow(t.Context(), false))
	require.NoError(t, h.p.InstallBaseFlows(t.Context()))
	require.Contains(t, h.bridge.Dump(), "nw_dst=192.168.77.10")
	h.p.OnNodeUpdate(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode}, Status: v1.NodeStatus{
		Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.168.77.20"}}}})
	h.sync()
	dump := h.bridge.Dump()
	require.NotContains(t, dump, "nw_dst=192.168.77.10", "the early flows of the older Node are gone")
	require.Contains(t, dump, "nw_dst=192.168.77.20")
}
