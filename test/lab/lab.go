// Package lab builds a one-node data path for integration tests and the demo: a private Open
// vSwitch with a netdev bridge, a client namespace and pod namespaces running the echo server,
// all routed through a fake gateway MAC, and the L3 forwarding flows to them that the node data
// path would otherwise install. The proxier under test adds the Service flows.
package lab

import (
	"context"
	"net/netip"
	"testing"
	"time"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/ofctl"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/ovsdb"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
	"github.com/antrea-proxy/antrea-proxy/test/ovssandbox"
)

// GatewayIP is the on-link next hop every namespace routes through; its MAC is static, so the
// bridge sees all routed traffic addressed to GatewayMAC.
const (
	GatewayIP  = "10.10.0.1"
	GatewayMAC = "aa:bb:cc:00:00:01"
	Subnet     = "10.10.0.0/24"
)

// Host is a namespace attached to the lab bridge.
type Host struct {
	Name string
	IP   string
	NS   *ovssandbox.NetNS
	Veth *ovssandbox.Veth
}

// Lab is one node's data path.
type Lab struct {
	OVS    *ovssandbox.Instance
	Bridge string
	DB     *ovsdb.Client
	OF     *ofctl.Bridge
	Echo   *ovssandbox.Echo
	Hosts  map[string]*Host
}

// New starts OVS, creates the bridge through OVSDB and builds the echo server.
func New(t *testing.T) *Lab {
	t.Helper()
	o := ovssandbox.Start(t, ovssandbox.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	br := "br-int"
	db, err := ovsdb.New(ctx, o.DBSocket())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	if err := db.EnsureBridge(ctx, ovsdb.BridgeConfig{Name: br, DatapathType: ovsdb.DatapathNetdev}); err != nil {
		t.Fatal(err)
	}
	if err := o.WaitForBridge(br); err != nil {
		t.Fatal(err)
	}
	return &Lab{OVS: o, Bridge: br, DB: db, OF: ofctl.New(o.MgmtSocket(br)), Echo: ovssandbox.BuildEcho(t), Hosts: map[string]*Host{}}
}

// AddHost attaches a namespace with ip (in Subnet), routes everything else through the fake
// gateway, installs the L3 forwarding flow to it, and answers for extra addresses too.
func (l *Lab) AddHost(t *testing.T, name, ip string, extra ...string) *Host {
	t.Helper()
	ns := ovssandbox.NewNetNS(t, name)
	v := ovssandbox.AttachVeth(t, l.OVS, l.Bridge, ns, ovssandbox.VethConfig{Addr: ip + "/24"})
	cmds := [][]string{
		{"ip", "neigh", "replace", GatewayIP, "lladdr", GatewayMAC, "dev", v.IfName, "nud", "permanent"},
		{"ip", "route", "add", "default", "via", GatewayIP},
	}
	for _, a := range extra {
		cmds = append(cmds, []string{"ip", "addr", "add", a + "/32", "dev", v.IfName})
	}
	for _, cmd := range cmds {
		if out, err := ns.Exec(cmd...); err != nil {
			t.Fatalf("%s: %v: %v %s", name, cmd, err, out)
		}
	}
	h := &Host{Name: name, IP: ip, NS: ns, Veth: v}
	var ops []of.Op
	for _, a := range append([]string{ip}, extra...) {
		ops = append(ops, of.Op{Kind: of.AddFlow, Flow: &of.Flow{Table: pipeline.TableL3Forwarding, Priority: 200,
			Match:   of.Match{EthType: of.EthTypeIP, Dst: netip.MustParsePrefix(a + "/32")},
			Actions: []of.Action{of.SetEthDst{MAC: v.MAC}, of.Output{Port: v.OFPort}}}})
	}
	if err := l.OF.Apply(context.Background(), ops); err != nil {
		t.Fatalf("installing L3 forwarding to %s: %v", name, err)
	}
	l.Hosts[name] = h
	return h
}

// AddPod attaches a namespace running the echo server on port.
func (l *Lab) AddPod(t *testing.T, name, ip string, port int) *Host {
	t.Helper()
	h := l.AddHost(t, name, ip)
	l.Echo.Start(t, h.NS, name, port)
	return h
}

// Dial connects from host to addr over TCP and returns (server name, client address seen).
func (l *Lab) Dial(ctx context.Context, from *Host, addr string, timeout time.Duration) (string, string, error) {
	reply, err := l.Echo.Dial(ctx, from.NS, "tcp", addr, timeout)
	if err != nil {
		return "", "", err
	}
	return ovssandbox.ParseEchoReply(reply)
}

// Flows returns `ovs-ofctl dump-flows` of the bridge.
func (l *Lab) Flows() string {
	out, err := l.OVS.Ofctl("dump-flows", l.Bridge, "--no-stats")
	if err != nil {
		return err.Error()
	}
	return out
}

// Rounds returns the lab bridge's round store.
func (l *Lab) Rounds() ovsdb.RoundStore { return ovsdb.RoundStore{Client: l.DB, Bridge: l.Bridge} }
