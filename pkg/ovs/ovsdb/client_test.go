package ovsdb_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/ovsdb"
	"github.com/antrea-proxy/antrea-proxy/test/ovssandbox"
)

// testTimeout bounds every client call in these tests.
const testTimeout = 15 * time.Second

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// uniqueName is prefix plus a random suffix, short enough for a Linux device name.
func uniqueName(t *testing.T, prefix string) string {
	b := make([]byte, 3)
	_, err := rand.Read(b)
	require.NoError(t, err)
	name := prefix + hex.EncodeToString(b)
	require.LessOrEqual(t, len(name), 15)
	return name
}

// setup starts a sandbox OVS in a network namespace of its own and a client connected to it.
// The namespace keeps parallel instances apart: the netdev datapath of each creates a tap device
// named ovs-netdev, which would clash in a shared namespace.
func setup(t *testing.T) (*ovssandbox.Instance, *ovsdb.Client) {
	t.Helper()
	ovssandbox.Require(t)
	t.Parallel()
	ns := uniqueName(t, "ovsdbt")
	out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput()
	require.NoError(t, err, "ip netns add: %s", out)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	o := ovssandbox.Start(t, ovssandbox.Options{NetNS: ns})
	c, err := ovsdb.New(testContext(t), o.DBSocket())
	require.NoError(t, err)
	t.Cleanup(c.Close)
	require.True(t, c.Connected())
	return o, c
}

// newBridge creates a netdev bridge through the client.
func newBridge(t *testing.T, c *ovsdb.Client) string {
	t.Helper()
	br := uniqueName(t, "br")
	require.NoError(t, c.EnsureBridge(testContext(t), ovsdb.BridgeConfig{Name: br, DatapathType: ovsdb.DatapathNetdev}))
	return br
}

// vsctl runs ovs-vsctl and returns its output without surrounding space and without the double
// quotes ovs-vsctl puts around some strings (such as those with a "-").
func vsctl(t *testing.T, o *ovssandbox.Instance, args ...string) string {
	t.Helper()
	out, err := o.Vsctl(args...)
	require.NoError(t, err)
	return strings.ReplaceAll(strings.TrimSpace(out), `"`, "")
}

// ip runs the ip command inside the sandbox's network namespace.
func ip(o *ovssandbox.Instance, args ...string) error {
	out, err := exec.Command("ip", append([]string{"-n", o.NetNS}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// vethPair creates an up veth pair in the sandbox's namespace; the namespace's removal deletes
// it.
func vethPair(t *testing.T, o *ovssandbox.Instance) (string, string) {
	t.Helper()
	a := uniqueName(t, "vth")
	b := a + "b"
	a += "a"
	require.NoError(t, ip(o, "link", "add", a, "type", "veth", "peer", "name", b))
	require.NoError(t, ip(o, "link", "set", a, "up"))
	require.NoError(t, ip(o, "link", "set", b, "up"))
	return a, b
}

func TestEnsureBridgeCreatesAndUpdates(t *testing.T) {
	o, c := setup(t)
	ctx := testContext(t)
	br := newBridge(t, c)

	require.Equal(t, "netdev", vsctl(t, o, "get", "bridge", br, "datapath_type"))
	require.Equal(t, "[OpenFlow10, OpenFlow13, OpenFlow15]", vsctl(t, o, "get", "bridge", br, "protocols"))
	require.Equal(t, "secure", vsctl(t, o, "get", "bridge", br, "fail_mode"))
	require.Equal(t, br, vsctl(t, o, "list-br"), "the bridge is listed in the Open_vSwitch row")
	require.Equal(t, "internal", vsctl(t, o, "get", "interface", br, "type"), "local interface like add-br")
	require.Equal(t, "65534", vsctl(t, o, "get", "interface", br, "ofport"), "ovs-vswitchd set the bridge up before EnsureBridge returned")

	require.NoError(t, o.WaitForBridge(br))
	out, err := o.Ofctl("show", br)
	require.NoError(t, err)
	require.Contains(t, out, "OFPT_FEATURES_REPLY (OF1.5)")
	require.Contains(t, out, "LOCAL("+br+")")

	// Idempotent: a second call writes nothing, so next_cfg stays put.
	nextCfg := vsctl(t, o, "get", "Open_vSwitch", ".", "next_cfg")
	require.NoError(t, c.EnsureBridge(ctx, ovsdb.BridgeConfig{Name: br, DatapathType: ovsdb.DatapathNetdev}))
	require.Equal(t, nextCfg, vsctl(t, o, "get", "Open_vSwitch", ".", "next_cfg"))
	require.Equal(t, br, vsctl(t, o, "list-br"))

	// Changed settings are applied to the existing bridge.
	require.NoError(t, c.EnsureBridge(ctx, ovsdb.BridgeConfig{
		Name: br, DatapathType: ovsdb.DatapathNetdev, Protocols: []string{"OpenFlow15", "OpenFlow13"},
		FailMode: ovsdb.FailModeStandalone,
	}))
	require.Equal(t, "[OpenFlow13, OpenFlow15]", vsctl(t, o, "get", "bridge", br, "protocols"))
	require.Equal(t, "standalone", vsctl(t, o, "get", "bridge", br, "fail_mode"))
	require.Empty(t, vsctl(t, o, "list-ports", br), "no ports besides the local one")
}

func TestEnsureBridgeAdoptsBridgeMadeByVsctl(t *testing.T) {
	o, c := setup(t)
	br := uniqueName(t, "br")
	vsctl(t, o, "add-br", br, "--", "set", "bridge", br, "datapath_type=netdev")
	require.NoError(t, c.EnsureBridge(testContext(t), ovsdb.BridgeConfig{Name: br, DatapathType: ovsdb.DatapathNetdev}))
	require.Equal(t, "[OpenFlow10, OpenFlow13, OpenFlow15]", vsctl(t, o, "get", "bridge", br, "protocols"))
	require.Equal(t, "secure", vsctl(t, o, "get", "bridge", br, "fail_mode"))
}

func TestEnsureBridgeRejectsConfigWithoutOpenFlow15(t *testing.T) {
	o, c := setup(t)
	err := c.EnsureBridge(testContext(t), ovsdb.BridgeConfig{Name: "brbad", Protocols: []string{"OpenFlow13"}})
	require.ErrorContains(t, err, `ensuring bridge "brbad": protocols [OpenFlow13] do not include OpenFlow15`)
	require.Empty(t, vsctl(t, o, "list-br"))
}

func TestInternalPort(t *testing.T) {
	o, c := setup(t)
	ctx := testContext(t)
	br := newBridge(t, c)
	name := uniqueName(t, "int")

	ofport, err := c.EnsurePort(ctx, br, ovsdb.PortConfig{
		Name: name, Type: ovsdb.PortTypeInternal, ExternalIDs: map[string]string{"owner": "antrea-proxy"},
	})
	require.NoError(t, err)
	require.Positive(t, ofport)
	require.Equal(t, itoa(ofport), vsctl(t, o, "get", "interface", name, "ofport"))
	require.Equal(t, "internal", vsctl(t, o, "get", "interface", name, "type"))
	require.Equal(t, br, vsctl(t, o, "port-to-br", name))
	require.Equal(t, `antrea-proxy`, vsctl(t, o, "get", "port", name, "external_ids:owner"))
	require.Equal(t, `antrea-proxy`, vsctl(t, o, "get", "interface", name, "external_ids:owner"))

	// Idempotent, and new external IDs are merged with the old ones.
	again, err := c.EnsurePort(ctx, br, ovsdb.PortConfig{
		Name: name, Type: ovsdb.PortTypeInternal, ExternalIDs: map[string]string{"role": "gateway"},
	})
	require.NoError(t, err)
	require.Equal(t, ofport, again)
	require.Equal(t, `{owner=antrea-proxy, role=gateway}`, vsctl(t, o, "get", "port", name, "external_ids"))

	got, err := c.GetOFPort(ctx, name)
	require.NoError(t, err)
	require.Equal(t, ofport, got)

	// A requested port number is honoured.
	requested := uniqueName(t, "req")
	ofport, err = c.EnsurePort(ctx, br, ovsdb.PortConfig{Name: requested, Type: ovsdb.PortTypeInternal, RequestedOFPort: 42})
	require.NoError(t, err)
	require.Equal(t, int32(42), ofport)
}

func TestSystemPortOnVeth(t *testing.T) {
	o, c := setup(t)
	ctx := testContext(t)
	br := newBridge(t, c)
	vethA, _ := vethPair(t, o)

	ofport, err := c.EnsurePort(ctx, br, ovsdb.PortConfig{Name: vethA})
	require.NoError(t, err)
	require.Positive(t, ofport)
	require.NoError(t, o.WaitForBridge(br))
	out, err := o.Ofctl("show", br)
	require.NoError(t, err)
	require.Contains(t, out, " "+itoa(ofport)+"("+vethA+")")

	again, err := c.EnsurePort(ctx, br, ovsdb.PortConfig{Name: vethA, Type: "system"})
	require.NoError(t, err)
	require.Equal(t, ofport, again)

	require.NoError(t, c.DeletePort(ctx, br, vethA))
	require.Empty(t, vsctl(t, o, "list-ports", br))
	_, err = c.GetOFPort(ctx, vethA)
	require.ErrorContains(t, err, `interface "`+vethA+`": interface not found`)
	out, err = o.Ofctl("show", br)
	require.NoError(t, err)
	require.NotContains(t, out, vethA, "ovs-vswitchd released the port before DeletePort returned")

	// Deleting a missing port is fine.
	require.NoError(t, c.DeletePort(ctx, br, vethA))
	require.NoError(t, c.DeletePort(ctx, br, "nosuchport"))
}

func TestPatchPorts(t *testing.T) {
	o, c := setup(t)
	ctx := testContext(t)
	br1, br2 := newBridge(t, c), newBridge(t, c)
	p1, p2 := uniqueName(t, "pa"), uniqueName(t, "pb")

	of1, err := c.EnsurePort(ctx, br1, ovsdb.PortConfig{Name: p1, Type: ovsdb.PortTypePatch, PeerName: p2})
	require.NoError(t, err)
	of2, err := c.EnsurePort(ctx, br2, ovsdb.PortConfig{Name: p2, Type: ovsdb.PortTypePatch, PeerName: p1})
	require.NoError(t, err)
	require.Positive(t, of1)
	require.Positive(t, of2)
	require.Equal(t, "patch", vsctl(t, o, "get", "interface", p1, "type"))
	require.Equal(t, p2, vsctl(t, o, "get", "interface", p1, "options:peer"))
	require.Equal(t, p1, vsctl(t, o, "get", "interface", p2, "options:peer"))
	// p1 was created before its peer existed. ovs-vswitchd resolves a patch peer when it
	// configures the port, and does not always come back to p1 when p2 appears ("No usable
	// peer"): re-creating p1 once p2 exists is the reliable way to pair them.
	require.NoError(t, c.DeletePort(ctx, br1, p1))
	again, err := c.EnsurePort(ctx, br1, ovsdb.PortConfig{Name: p1, Type: ovsdb.PortTypePatch, PeerName: p2})
	require.NoError(t, err)
	require.Positive(t, again)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		e := vsctl(t, o, "get", "interface", p1, "error")
		if e == "[]" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("interface %s still reports an error after 10s: %s", p1, e)
		}
	}

	// A port cannot be ensured on a second bridge, and cannot be deleted from the wrong one.
	_, err = c.EnsurePort(ctx, br2, ovsdb.PortConfig{Name: p1, Type: ovsdb.PortTypePatch, PeerName: p2})
	require.ErrorContains(t, err, `ensuring port "`+p1+`" on bridge "`+br2+`": port already exists on bridge "`+br1+`"`)
	err = c.DeletePort(ctx, br2, p1)
	require.ErrorContains(t, err, `deleting port "`+p1+`" from bridge "`+br2+`": port is on bridge "`+br1+`"`)

	require.NoError(t, c.DeletePort(ctx, br1, p1))
	require.NoError(t, c.DeletePort(ctx, br2, p2))
	require.Empty(t, vsctl(t, o, "list-ports", br1))
	require.Empty(t, vsctl(t, o, "list-ports", br2))
}

func TestMissingDeviceReportsInterfaceError(t *testing.T) {
	_, c := setup(t)
	ctx := testContext(t)
	br := newBridge(t, c)
	name := uniqueName(t, "nodev")

	_, err := c.EnsurePort(ctx, br, ovsdb.PortConfig{Name: name})
	require.ErrorContains(t, err, `ensuring port "`+name+`" on bridge "`+br+`": interface error: `)
	require.ErrorContains(t, err, "No such device")
	t.Logf("error for a missing device: %v", err)
	_, err = c.GetOFPort(ctx, name)
	require.ErrorContains(t, err, "interface error")

	_, err = c.EnsurePort(ctx, "nosuchbr", ovsdb.PortConfig{Name: "p0", Type: ovsdb.PortTypeInternal})
	require.ErrorContains(t, err, `ensuring port "p0" on bridge "nosuchbr": bridge not found`)
}

func TestEnsurePortRecoversOnceDeviceAppears(t *testing.T) {
	o, c := setup(t)
	ctx := testContext(t)
	br := newBridge(t, c)
	vethA, _ := vethPair(t, o)
	require.NoError(t, ip(o, "link", "set", vethA, "name", vethA+"x"))

	_, err := c.EnsurePort(ctx, br, ovsdb.PortConfig{Name: vethA})
	require.ErrorContains(t, err, "interface error")

	require.NoError(t, ip(o, "link", "set", vethA+"x", "name", vethA))
	ofport, err := c.EnsurePort(ctx, br, ovsdb.PortConfig{Name: vethA})
	require.NoError(t, err)
	require.Positive(t, ofport)
}

func TestBridgeExternalIDs(t *testing.T) {
	o, c := setup(t)
	ctx := testContext(t)
	br := newBridge(t, c)

	ids, err := c.BridgeExternalIDs(ctx, br)
	require.NoError(t, err)
	require.Empty(t, ids)

	require.NoError(t, c.SetBridgeExternalIDs(ctx, br, map[string]string{"round": "1", "keep": "yes"}))
	require.NoError(t, c.SetBridgeExternalIDs(ctx, br, map[string]string{"round": "2"}))
	ids, err = c.BridgeExternalIDs(ctx, br)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"round": "2", "keep": "yes"}, ids)
	require.Equal(t, "2", vsctl(t, o, "get", "bridge", br, "external_ids:round"))

	require.NoError(t, c.RemoveBridgeExternalIDs(ctx, br, "keep", "absent"))
	ids, err = c.BridgeExternalIDs(ctx, br)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"round": "2"}, ids)

	// Keys written by others survive.
	vsctl(t, o, "set", "bridge", br, "external_ids:other=x")
	require.NoError(t, c.SetBridgeExternalIDs(ctx, br, map[string]string{"round": "3"}))
	ids, err = c.BridgeExternalIDs(ctx, br)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"round": "3", "other": "x"}, ids)

	_, err = c.BridgeExternalIDs(ctx, "nosuchbr")
	require.ErrorContains(t, err, `reading external_ids of bridge "nosuchbr": bridge not found`)
	err = c.SetBridgeExternalIDs(ctx, "nosuchbr", map[string]string{"round": "1"})
	require.ErrorContains(t, err, `setting external_ids [round] of bridge "nosuchbr": bridge not found`)
}

func TestOVSVersion(t *testing.T) {
	o, c := setup(t)
	ctx := testContext(t)
	// ovs-vswitchd leaves ovs_version alone; the ovs-ctl start script writes it.
	version, err := c.OVSVersion(ctx)
	require.NoError(t, err)
	require.Empty(t, version)

	vsctl(t, o, "set", "Open_vSwitch", ".", "ovs_version=3.1.0")
	require.Eventually(t, func() bool {
		version, err = c.OVSVersion(ctx)
		return err == nil && version == "3.1.0"
	}, 5*time.Second, 10*time.Millisecond, "version %q, error %v", version, err)
}

func TestReconnectAfterDBRestart(t *testing.T) {
	o, c := setup(t)
	ctx := testContext(t)
	br := newBridge(t, c)
	before, err := c.EnsurePort(ctx, br, ovsdb.PortConfig{Name: uniqueName(t, "int"), Type: ovsdb.PortTypeInternal})
	require.NoError(t, err)

	require.NoError(t, o.RestartDB())

	name := uniqueName(t, "int")
	after, err := c.EnsurePort(ctx, br, ovsdb.PortConfig{Name: name, Type: ovsdb.PortTypeInternal})
	require.NoError(t, err)
	require.Positive(t, after)
	require.NotEqual(t, before, after)
	require.Equal(t, itoa(after), vsctl(t, o, "get", "interface", name, "ofport"))
	require.Eventually(t, c.Connected, 5*time.Second, 20*time.Millisecond)
	require.NoError(t, c.SetBridgeExternalIDs(ctx, br, map[string]string{"round": "7"}))
	got, err := c.GetOFPort(ctx, name)
	require.NoError(t, err)
	require.Equal(t, after, got)
}

func TestClosedClient(t *testing.T) {
	_, c := setup(t)
	c.Close()
	require.False(t, c.Connected())
	err := c.EnsureBridge(testContext(t), ovsdb.BridgeConfig{Name: "brclosed"})
	require.ErrorIs(t, err, ovsdb.ErrClosed)
	c.Close() // a second Close is harmless
}

func TestNewFailsWhenServerIsAbsent(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := ovsdb.New(ctx, "unix:"+t.TempDir()+"/db.sock")
	require.ErrorContains(t, err, "connecting to OVSDB at unix:")
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

func TestOperationsWhileServerIsDownFailWithinContext(t *testing.T) {
	o, c := setup(t)
	br := newBridge(t, c)
	o.Stop()
	require.Eventually(t, func() bool { return !c.Connected() }, 5*time.Second, 10*time.Millisecond)

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.EnsurePort(ctx, br, ovsdb.PortConfig{Name: "p0", Type: ovsdb.PortTypeInternal})
	require.ErrorContains(t, err, `ensuring port "p0" on bridge "`+br+`": not connected to OVSDB at `+o.DBSocket())
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 5*time.Second)
}

func TestConcurrentEnsurePortAgrees(t *testing.T) {
	o, c := setup(t)
	ctx := testContext(t)
	br := newBridge(t, c)
	name := uniqueName(t, "int")

	const callers = 4
	ofports := make([]int32, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ofports[i], errs[i] = c.EnsurePort(ctx, br, ovsdb.PortConfig{Name: name, Type: ovsdb.PortTypeInternal})
		}()
	}
	wg.Wait()
	for i := range callers {
		require.NoError(t, errs[i])
		require.Equal(t, ofports[0], ofports[i])
	}
	require.Equal(t, name, vsctl(t, o, "list-ports", br))
}

func TestEnsurePortOnBridgeDeletedBehindTheClientsBack(t *testing.T) {
	o, c := setup(t)
	ctx := testContext(t)
	br := newBridge(t, c)
	vsctl(t, o, "del-br", br)
	// Whether or not the cache has seen the deletion yet, the outcome is the same.
	_, err := c.EnsurePort(ctx, br, ovsdb.PortConfig{Name: "p0", Type: ovsdb.PortTypeInternal})
	require.ErrorContains(t, err, `ensuring port "p0" on bridge "`+br+`": bridge not found`)
}
