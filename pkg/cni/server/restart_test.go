package server

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/cni/protocol"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

func TestRestartKeepsPodsAndMovesFlowsToNewRound(t *testing.T) {
	e := newEnv(t)
	first := e.mustOK(req("ADD", "c1", "/var/run/netns/pod1"))
	// A flow of an older round for a pod the server no longer knows must go too.
	orphan := openflow.Flow{Table: pipeline.TableClassifier, Priority: pipeline.PriorityLow,
		Cookie: pipeline.PodCookie(0, 77), Match: openflow.Match{InPort: 77}, Actions: []openflow.Action{openflow.Drop{}}}
	require.NoError(t, e.bridge.Apply(context.Background(), []openflow.Op{{Kind: openflow.AddFlow, Flow: &orphan}}))
	before := e.bridge.FlowCount()

	e.restart(2)
	require.Equal(t, before-1, e.bridge.FlowCount())
	for _, f := range mustDump(t, e) {
		require.Equal(t, uint16(2), pipeline.CookieRound(f.Cookie), openflow.FormatFlow(&f))
	}
	again := e.mustOK(req("ADD", "c1", "/var/run/netns/pod1"))
	require.JSONEq(t, string(first.Result), string(again.Result), "the pod keeps its address across the restart")
	e.mustOK(req("CHECK", "c1", "/var/run/netns/pod1"))
	fresh := e.mustOK(req("ADD", "c2", "/var/run/netns/pod2"))
	require.Contains(t, string(fresh.Result), `"10.10.0.3/24"`, "a new pod gets a fresh address")
}

func mustDump(t *testing.T, e *env) []openflow.Flow {
	t.Helper()
	flows, err := e.bridge.DumpFlows(context.Background(), openflow.FlowFilter{})
	require.NoError(t, err)
	return flows
}

func TestRestartReplaysSpooledDelAndRemovesPodsWithoutNetNS(t *testing.T) {
	e := newEnv(t)
	e.mustOK(req("ADD", "c1", "/var/run/netns/pod1"))
	e.mustOK(req("ADD", "c2", "/var/run/netns/pod2"))
	e.mustOK(req("ADD", "c3", "/var/run/netns/pod2"))

	// While the agent is down: the plugin spools the DEL of c1, and the sandbox of c2 and c3
	// (pod2) vanishes without any DEL.
	del := req("DEL", "c1", "/var/run/netns/pod1")
	require.NoError(t, protocol.WriteSpool(e.opts.SpoolDir, del))
	require.NoError(t, os.WriteFile(filepath.Join(e.opts.SpoolDir, "garbage.json"), []byte("{"), 0o600))
	e.nl.removeNetNS("/var/run/netns/pod2")

	e.restart(2)
	require.Empty(t, e.ports.names())
	require.Empty(t, e.ipamFiles())
	require.Zero(t, e.bridge.FlowCount())
	entries, err := os.ReadDir(e.opts.SpoolDir)
	require.NoError(t, err)
	require.Empty(t, entries, "replayed spool entries are removed, unreadable ones moved aside")
	quarantined, err := os.ReadDir(filepath.Join(e.opts.StateDir, "quarantine"))
	require.NoError(t, err)
	require.Len(t, quarantined, 1)
	require.True(t, strings.HasSuffix(quarantined[0].Name(), "-"+KindSpooledDel+"-garbage.json"), quarantined[0].Name())
}

func TestRestartReleasesAddressesWithoutRecord(t *testing.T) {
	e := newEnv(t)
	e.mustOK(req("ADD", "c1", "/var/run/netns/pod1"))
	// A crash between reserving an address and writing the record.
	_, err := e.srv.ipam.Allocate(ownerOf("crashed"))
	require.NoError(t, err)
	require.Len(t, e.ipamFiles(), 2)
	e.restart(2)
	require.Equal(t, []string{"10.10.0.2"}, e.ipamFiles())
}

func TestRestartReattachesMissingPort(t *testing.T) {
	e := newEnv(t)
	e.mustOK(req("ADD", "c1", "/var/run/netns/pod1"))
	require.NoError(t, e.ports.DeletePort(context.Background(), "br-int", hostIfName("c1", "eth0"))) // OVS lost it
	e.restart(2)
	require.Equal(t, []string{hostIfName("c1", "eth0")}, e.ports.names())
	e.mustOK(req("CHECK", "c1", "/var/run/netns/pod1"))
	require.Empty(t, e.bridge.DumpCookie(pipeline.PodCookie(0, 10), pipeline.PodCookieMask), "flows of the old OpenFlow port are gone")
}

func TestGC(t *testing.T) {
	e := newEnv(t)
	e.mustOK(req("ADD", "c1", "/var/run/netns/pod1"))
	e.mustOK(req("ADD", "c2", "/var/run/netns/pod2"))
	gc := protocol.Request{Command: "GC", Path: "/opt/cni/bin", Config: json.RawMessage(
		`{"cniVersion":"1.1.0","name":"antrea","type":"antrea-cni","cni.dev/valid-attachments":[{"containerID":"c2","ifname":"eth0"}]}`)}
	e.mustOK(gc)
	require.Equal(t, []string{hostIfName("c2", "eth0")}, e.ports.names())
	require.Equal(t, []string{"10.10.0.3"}, e.ipamFiles())
	require.True(t, strings.Contains(e.bridge.Dump(), "in_port=11"))
	require.False(t, strings.Contains(e.bridge.Dump(), "in_port=10"))
}

func TestReconcileWhileRunning(t *testing.T) {
	e := newEnv(t)
	e.mustOK(req("ADD", "c1", "/var/run/netns/pod1"))
	e.mustOK(req("ADD", "c2", "/var/run/netns/pod2"))
	require.NoError(t, protocol.WriteSpool(e.opts.SpoolDir, req("DEL", "c1", "/var/run/netns/pod1")))
	e.nl.removeNetNS("/var/run/netns/pod2")
	require.NoError(t, e.srv.Reconcile(context.Background()))
	require.Empty(t, e.ports.names())
	require.Empty(t, e.ipamFiles())
	require.Zero(t, e.bridge.FlowCount())
}

func TestCancelledCallerDoesNotLeaveHalfAttachment(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	resp := e.srv.Handle(ctx, req("ADD", "c1", "/var/run/netns/pod1"))
	require.Nil(t, resp.Error)
	e.mustOK(req("CHECK", "c1", "/var/run/netns/pod1"))
}
