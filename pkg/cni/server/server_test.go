package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/cni/protocol"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/openflowtest"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

const conf100 = `{"cniVersion":"1.0.0","name":"antrea","type":"antrea-cni"}`

type env struct {
	t      *testing.T
	dir    string
	ports  *fakePorts
	bridge *openflowtest.FakeBridge
	nl     *fakeNetlink
	srv    *Server
	opts   Options
}

func newEnv(t *testing.T, cidrs ...string) *env {
	t.Helper()
	if len(cidrs) == 0 {
		cidrs = []string{"10.10.0.0/24"}
	}
	var pfx []netip.Prefix
	for _, c := range cidrs {
		pfx = append(pfx, netip.MustParsePrefix(c))
	}
	dir := t.TempDir()
	e := &env{t: t, dir: dir, ports: newFakePorts(), bridge: openflowtest.NewFakeBridge(),
		nl: newFakeNetlink("/var/run/netns/pod1", "/var/run/netns/pod2"),
		opts: Options{Bridge: "br-int", PodCIDRs: pfx, StateDir: filepath.Join(dir, "state"),
			SpoolDir: filepath.Join(dir, "spool"), Round: 1,
			GatewayMAC: net.HardwareAddr{0x0a, 0x58, 0x0a, 0x0a, 0x00, 0x01}}}
	e.restart(1)
	return e
}

// restart replaces the server by a new one on the same state, as an agent restart does.
func (e *env) restart(round uint16) {
	e.t.Helper()
	e.opts.Round = round
	srv, err := New(e.opts, e.ports, e.bridge, e.nl)
	require.NoError(e.t, err)
	require.NoError(e.t, srv.Start(context.Background()))
	e.srv = srv
}

func req(cmd, cid, netns string) protocol.Request {
	return protocol.Request{Command: cmd, ContainerID: cid, Netns: netns, IfName: "eth0", Path: "/opt/cni/bin",
		Args: "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-" + cid, Config: json.RawMessage(conf100)}
}

func (e *env) do(r protocol.Request) protocol.Response {
	return e.srv.Handle(context.Background(), r)
}

func (e *env) mustOK(r protocol.Request) protocol.Response {
	e.t.Helper()
	resp := e.do(r)
	require.Nil(e.t, resp.Error, "%s %s", r.Command, r.ContainerID)
	return resp
}

func (e *env) ipamFiles() []string {
	e.t.Helper()
	entries, err := os.ReadDir(filepath.Join(e.opts.StateDir, "ipam"))
	require.NoError(e.t, err)
	var out []string
	for _, en := range entries {
		if _, err := netip.ParseAddr(en.Name()); err == nil {
			out = append(out, en.Name())
		}
	}
	return out
}

func TestAddResultFormatPortAndFlows(t *testing.T) {
	e := newEnv(t, "10.10.0.0/24", "fd00:10::/64")
	resp := e.mustOK(req("ADD", "c1", "/var/run/netns/pod1"))
	host := hostIfName("c1", "eth0")
	hostMAC, podMAC := macFor(host, false), macFor(host, true)
	want := fmt.Sprintf(`{"cniVersion":"1.0.0","interfaces":[{"name":%q,"mac":%q},{"name":"eth0","mac":%q,"sandbox":"/var/run/netns/pod1"}],`+
		`"ips":[{"interface":1,"address":"10.10.0.2/24","gateway":"10.10.0.1"},{"interface":1,"address":"fd00:10::2/64","gateway":"fd00:10::1"}],`+
		`"routes":[{"dst":"0.0.0.0/0","gw":"10.10.0.1"},{"dst":"::/0","gw":"fd00:10::1"}]}`, host, hostMAC, podMAC)
	require.JSONEq(t, want, string(resp.Result))

	require.Equal(t, map[string]string{"container-id": "c1", "container-ifname": "eth0", "pod-namespace": "default",
		"pod-name": "web-c1", "ip-address": "10.10.0.2,fd00:10::2", "mac-address": podMAC.String(), "antrea-owner": "antrea-cni"},
		e.ports.ports[host].ids)
	cfg := e.nl.ifaces[host]
	require.Equal(t, "eth0", cfg.IfName)
	require.Equal(t, []netip.Addr{netip.MustParseAddr("10.10.0.1"), netip.MustParseAddr("fd00:10::1")}, cfg.Gateways)

	wantFlows := pipeline.PodFlows(1, e.opts.GatewayMAC, pipeline.Pod{ID: 10, OFPort: 10, MAC: podMAC,
		IPs: []netip.Addr{netip.MustParseAddr("10.10.0.2"), netip.MustParseAddr("fd00:10::2")}})
	require.Equal(t, renderSorted(wantFlows), e.bridge.DumpCookie(pipeline.PodCookie(0, 10), pipeline.PodCookieMask))
	require.Contains(t, e.bridge.Dump(), "in_port=10,dl_src="+podMAC.String()+",nw_src=10.10.0.2")
}

// renderSorted renders flows as FakeBridge.DumpCookie does.
func renderSorted(flows []openflow.Flow) string {
	b := openflowtest.NewFakeBridge()
	var ops []openflow.Op
	for i := range flows {
		ops = append(ops, openflow.Op{Kind: openflow.AddFlow, Flow: &flows[i]})
	}
	if err := b.Apply(context.Background(), ops); err != nil {
		panic(err)
	}
	return b.Dump()
}

func TestAddIsIdempotent(t *testing.T) {
	e := newEnv(t)
	first := e.mustOK(req("ADD", "c1", "/var/run/netns/pod1"))
	flows := e.bridge.Dump()
	second := e.mustOK(req("ADD", "c1", "/var/run/netns/pod1"))
	require.JSONEq(t, string(first.Result), string(second.Result))
	require.Equal(t, flows, e.bridge.Dump())
	require.Equal(t, []string{"10.10.0.2"}, e.ipamFiles())
	require.Len(t, e.ports.names(), 1)

	other := e.mustOK(req("ADD", "c2", "/var/run/netns/pod2"))
	require.Contains(t, string(other.Result), `"10.10.0.3/24"`)
}

func TestAddSameContainerNewNetNSReplacesOldAttachment(t *testing.T) {
	e := newEnv(t)
	e.mustOK(req("ADD", "c1", "/var/run/netns/pod1"))
	resp := e.mustOK(req("ADD", "c1", "/var/run/netns/pod2"))
	require.Contains(t, string(resp.Result), `"sandbox":"/var/run/netns/pod2"`)
	require.Equal(t, 1, e.nl.count())
	require.Equal(t, "/var/run/netns/pod2", e.nl.ifaces[hostIfName("c1", "eth0")].NetNS)
}

func TestDelRemovesEverythingAndIsIdempotent(t *testing.T) {
	e := newEnv(t)
	e.mustOK(req("ADD", "c1", "/var/run/netns/pod1"))
	e.mustOK(req("ADD", "c2", "/var/run/netns/pod2"))
	e.mustOK(req("DEL", "c1", "/var/run/netns/pod1"))
	require.Equal(t, []string{hostIfName("c2", "eth0")}, e.ports.names())
	require.Equal(t, []string{"10.10.0.3"}, e.ipamFiles())
	require.Equal(t, 1, e.nl.count())
	require.Empty(t, e.bridge.DumpCookie(pipeline.PodCookie(0, 10), pipeline.PodCookieMask))
	require.NotEmpty(t, e.bridge.DumpCookie(pipeline.PodCookie(0, 11), pipeline.PodCookieMask))

	e.mustOK(req("DEL", "c1", "/var/run/netns/pod1"))
	e.mustOK(req("DEL", "c1", "")) // CNI_NETNS may be empty for DEL
	e.mustOK(req("DEL", "never-added", ""))
}

func TestCheck(t *testing.T) {
	e := newEnv(t)
	add := e.mustOK(req("ADD", "c1", "/var/run/netns/pod1"))
	e.mustOK(req("CHECK", "c1", "/var/run/netns/pod1"))

	withPrev := req("CHECK", "c1", "/var/run/netns/pod1")
	withPrev.Config = json.RawMessage(`{"cniVersion":"1.0.0","name":"antrea","type":"antrea-cni","prevResult":` + string(add.Result) + `}`)
	e.mustOK(withPrev)
	badPrev := withPrev
	badPrev.Config = json.RawMessage(strings.Replace(string(withPrev.Config), "10.10.0.2/24", "10.10.0.9/24", 1))
	resp := e.do(badPrev)
	require.NotNil(t, resp.Error)
	require.Contains(t, resp.Error.Details, "prevResult")

	resp = e.do(req("CHECK", "c9", "/var/run/netns/pod1"))
	require.NotNil(t, resp.Error)
	require.Equal(t, protocol.ErrUnknownContainer, resp.Error.Code)

	// A flow deleted behind the server's back is found.
	require.NoError(t, e.bridge.Apply(context.Background(), []openflow.Op{{Kind: openflow.DeleteFlows, TableSet: true,
		Flow: &openflow.Flow{Table: pipeline.TableL3Forwarding, Cookie: pipeline.PodCookie(0, 10), CookieMask: pipeline.PodCookieMask}}}))
	resp = e.do(req("CHECK", "c1", "/var/run/netns/pod1"))
	require.NotNil(t, resp.Error)
	require.Contains(t, resp.Error.Details, "flow missing")
}

func TestMalformedRequestsChangeNothing(t *testing.T) {
	e := newEnv(t)
	calls := e.bridge.ApplyCount()
	for _, tc := range []struct {
		name string
		mod  func(*protocol.Request)
		code uint
	}{
		{"bad JSON", func(r *protocol.Request) { r.Config = json.RawMessage(`{"cniVersion":`) }, protocol.ErrDecodingFailure},
		{"no name", func(r *protocol.Request) { r.Config = json.RawMessage(`{"cniVersion":"1.0.0"}`) }, protocol.ErrInvalidNetworkConfig},
		{"missing netns", func(r *protocol.Request) { r.Netns = "" }, protocol.ErrInvalidEnvironmentVariables},
		{"missing container", func(r *protocol.Request) { r.ContainerID = "" }, protocol.ErrInvalidEnvironmentVariables},
		{"unknown command", func(r *protocol.Request) { r.Command = "FROB" }, protocol.ErrInvalidEnvironmentVariables},
		{"bad args", func(r *protocol.Request) { r.Args = "K8S_POD_NAME" }, protocol.ErrInvalidEnvironmentVariables},
		{"netns does not exist", func(r *protocol.Request) { r.Netns = "/var/run/netns/nope" }, protocol.ErrInvalidEnvironmentVariables},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := req("ADD", "c1", "/var/run/netns/pod1")
			tc.mod(&r)
			resp := e.do(r)
			require.NotNil(t, resp.Error)
			require.Equal(t, tc.code, resp.Error.Code, resp.Error.Error())
		})
	}
	require.Equal(t, calls, e.bridge.ApplyCount())
	require.Empty(t, e.ipamFiles())
	require.Empty(t, e.ports.names())
	require.Zero(t, e.nl.count())
}

func TestFailedAddRollsBack(t *testing.T) {
	e := newEnv(t)
	e.ports.failErr = errors.New("ovsdb down")
	resp := e.do(req("ADD", "c1", "/var/run/netns/pod1"))
	require.NotNil(t, resp.Error)
	require.Equal(t, protocol.ErrInternal, resp.Error.Code)
	require.Contains(t, resp.Error.Details, "ovsdb down")
	require.Empty(t, e.ipamFiles())
	require.Zero(t, e.nl.count())
	e.ports.failErr = nil
	e.mustOK(req("ADD", "c1", "/var/run/netns/pod1"))
	require.Len(t, e.ipamFiles(), 1, "the retried ADD holds exactly one address")
}

func TestFailedFlowInstallRollsBack(t *testing.T) {
	e := newEnv(t)
	e.bridge.FailNextApply(errors.New("bundle rejected"))
	resp := e.do(req("ADD", "c1", "/var/run/netns/pod1"))
	require.NotNil(t, resp.Error)
	require.Empty(t, e.ipamFiles())
	require.Empty(t, e.ports.names())
	require.Zero(t, e.bridge.FlowCount())
}

func TestExhaustion(t *testing.T) {
	e := newEnv(t, "10.10.0.0/30")
	e.mustOK(req("ADD", "c1", "/var/run/netns/pod1"))
	resp := e.do(req("ADD", "c2", "/var/run/netns/pod2"))
	require.NotNil(t, resp.Error)
	require.Equal(t, protocol.ErrNoFreeAddress, resp.Error.Code)
	require.Equal(t, 1, e.nl.count())
}

func TestNotReadyBeforeStart(t *testing.T) {
	e := newEnv(t)
	srv, err := New(e.opts, e.ports, e.bridge, e.nl)
	require.NoError(t, err)
	resp := srv.Handle(context.Background(), req("ADD", "c1", "/var/run/netns/pod1"))
	require.Equal(t, protocol.ErrTryAgainLater, resp.Error.Code)
	resp = srv.Handle(context.Background(), req("STATUS", "", ""))
	require.Equal(t, protocol.ErrPluginNotAvailable, resp.Error.Code)
	require.Nil(t, e.do(req("STATUS", "", "")).Error)
}
