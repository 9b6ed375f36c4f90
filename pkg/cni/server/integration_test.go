package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	types100 "github.com/containernetworking/cni/pkg/types/100"

	"github.com/antrea-proxy/antrea-proxy/pkg/cni/podnet"
	"github.com/antrea-proxy/antrea-proxy/pkg/cni/protocol"
	"github.com/antrea-proxy/antrea-proxy/pkg/cni/server"
	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/ofctl"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/ovsdb"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
	"github.com/antrea-proxy/antrea-proxy/test/ovssandbox"
)

// node is one node's data path under test: a private OVS, the CNI server of the agent, and the
// real antrea-cni binary, called the way a container runtime calls it.
type node struct {
	t       *testing.T
	ovs     *ovssandbox.Instance
	bridge  string
	db      *ovsdb.Client
	of      *ofctl.Bridge
	opts    server.Options
	plugin  string
	binDir  string
	sock    string
	spool   string
	stopSrv func()
}

func newNode(t *testing.T) *node {
	t.Helper()
	o := ovssandbox.Start(t, ovssandbox.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n := &node{t: t, ovs: o, bridge: "br-int"}
	db, err := ovsdb.New(ctx, o.DBSocket())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	n.db = db
	if err := db.EnsureBridge(ctx, ovsdb.BridgeConfig{Name: n.bridge, DatapathType: ovsdb.DatapathNetdev}); err != nil {
		t.Fatal(err)
	}
	if err := o.WaitForBridge(n.bridge); err != nil {
		t.Fatal(err)
	}
	n.of = ofctl.New(o.MgmtSocket(n.bridge))
	base := pipeline.BaseFlows(pipeline.NodeConfig{Round: 1, IPv4: true})
	var ops []of.Op
	for i := range base {
		ops = append(ops, of.Op{Kind: of.AddFlow, Flow: &base[i]})
	}
	if err := n.of.Apply(ctx, ops); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "cni") // short: unix socket paths are limited to 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	n.binDir, n.sock, n.spool = filepath.Join(dir, "bin"), filepath.Join(dir, "cni.sock"), filepath.Join(dir, "spool")
	n.plugin = buildPlugin(t, n.binDir)
	n.opts = server.Options{Bridge: n.bridge, PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.20.0.0/24")},
		GatewayMAC: net.HardwareAddr{0xaa, 0xbb, 0xcc, 0, 0, 1}, StateDir: filepath.Join(dir, "state"), SpoolDir: n.spool,
		DisableTXChecksumOffload: true}
	n.startServer(1)
	return n
}

// startServer starts (or restarts, as an agent restart does) the CNI server with round.
func (n *node) startServer(round uint16) {
	n.t.Helper()
	if n.stopSrv != nil {
		n.stopSrv()
	}
	n.opts.Round = round
	srv, err := server.New(n.opts, n.db, n.of, &podnet.Netlink{HostNetNS: "/var/run/netns/" + n.ovs.NetNS})
	if err != nil {
		n.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := srv.Start(ctx); err != nil {
		cancel()
		n.t.Fatal(err)
	}
	l, err := protocol.Listen(n.sock)
	if err != nil {
		cancel()
		n.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- protocol.Serve(ctx, l, srv) }()
	n.stopSrv = func() {
		cancel()
		if err := <-done; err != nil {
			n.t.Errorf("CNI server: %v", err)
		}
		n.stopSrv = nil
	}
	n.t.Cleanup(func() {
		if n.stopSrv != nil {
			n.stopSrv()
		}
	})
}

func buildPlugin(t *testing.T, dir string) string {
	t.Helper()
	goBin := ovssandbox.GoTool()
	bin := filepath.Join(dir, "antrea-cni")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", bin, "github.com/antrea-proxy/antrea-proxy/cmd/antrea-cni")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building antrea-cni: %v: %s", err, out)
	}
	return bin
}

func (n *node) conf() string {
	return fmt.Sprintf(`{"cniVersion":"1.0.0","name":"antrea","type":"antrea-cni","socketPath":%q,"delSpoolDir":%q}`, n.sock, n.spool)
}

// cni runs the plugin binary like a container runtime: CNI_* environment, config on stdin.
func (n *node) cni(cmd, containerID string, ns *ovssandbox.NetNS, stdin string) (stdout string, exit int) {
	n.t.Helper()
	netnsPath := ""
	if ns != nil {
		netnsPath = "/var/run/netns/" + ns.Name
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, n.plugin)
	c.Env = []string{"CNI_COMMAND=" + cmd, "CNI_CONTAINERID=" + containerID, "CNI_NETNS=" + netnsPath, "CNI_IFNAME=eth0",
		"CNI_PATH=" + n.binDir, "CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=pod-" + containerID}
	c.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	c.Stdout, c.Stderr = &out, &errOut
	err := c.Run()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return out.String(), ee.ExitCode()
		}
		n.t.Fatalf("running antrea-cni %s: %v: %s", cmd, err, errOut.String())
	}
	return out.String(), 0
}

func (n *node) add(containerID string, ns *ovssandbox.NetNS) *types100.Result {
	n.t.Helper()
	out, code := n.cni("ADD", containerID, ns, n.conf())
	if code != 0 {
		n.t.Fatalf("ADD %s: exit %d: %s", containerID, code, out)
	}
	var res types100.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		n.t.Fatalf("ADD %s: result %q: %v", containerID, out, err)
	}
	if len(res.IPs) != 1 || len(res.Interfaces) != 2 {
		n.t.Fatalf("ADD %s: unexpected result %s", containerID, out)
	}
	return &res
}

func (n *node) ports() string {
	out, err := n.ovs.Vsctl("list-ports", n.bridge)
	if err != nil {
		n.t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

func (n *node) podFlows() string {
	out, err := n.ovs.Ofctl("dump-flows", n.bridge, "--no-stats", fmt.Sprintf("cookie=%#x/%#x",
		pipeline.Cookie(0, pipeline.CategoryPod, 0), pipeline.CategoryMask))
	if err != nil {
		n.t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	slices.Sort(lines) // dump order is not stable across reinstalls
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

func (n *node) hostLinks() string {
	o, err := exec.Command("ip", "-n", n.ovs.NetNS, "-o", "link", "show").CombinedOutput()
	if err != nil {
		n.t.Fatalf("ip link: %v: %s", err, o)
	}
	return string(o)
}
