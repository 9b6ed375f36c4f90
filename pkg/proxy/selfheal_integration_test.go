package proxy

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/ofctl"
	"github.com/antrea-proxy/antrea-proxy/test/ovssandbox"
)

// addOVSBridge creates a netdev bridge in o and returns its OpenFlow client.
func addOVSBridge(t *testing.T, o *ovssandbox.Instance, br string) *ofctl.Bridge {
	t.Helper()
	if _, err := o.Vsctl("add-br", br, "--", "set", "bridge", br, "datapath_type=netdev",
		"protocols=OpenFlow10,OpenFlow13,OpenFlow15", "fail_mode=secure"); err != nil {
		t.Fatal(err)
	}
	if err := o.WaitForBridge(br); err != nil {
		t.Fatal(err)
	}
	return ofctl.New(o.MgmtSocket(br))
}

// restartVSwitchd kills and restarts ovs-vswitchd and waits until br answers OpenFlow again.
func restartVSwitchd(t *testing.T, o *ovssandbox.Instance, br string, b of.Bridge) {
	t.Helper()
	if err := o.RestartVSwitchd(false); err != nil {
		t.Fatal(err)
	}
	if err := o.WaitForBridge(br); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := b.DumpFlows(context.Background(), of.FlowFilter{Table: 0, TableSet: true})
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("bridge %s does not answer after the restart: %v", br, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// canonicalFlows renders a bridge's flows canonically, sorted (no groups: safe with groups
// over 64 KiB).
func canonicalFlows(t *testing.T, b of.Bridge) string {
	t.Helper()
	flows, err := b.DumpFlows(context.Background(), of.FlowFilter{})
	if err != nil {
		t.Fatal(err)
	}
	lines := make([]string, 0, len(flows))
	for _, f := range flows {
		c := of.CanonicalFlow(f)
		lines = append(lines, of.FormatFlow(&c))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// bigSlices returns n EndpointSlices of per endpoints each for ns1/big, offset shifting the
// addresses (a change of the endpoints).
func bigSlices(n, per, offset int) []*discovery.EndpointSlice {
	var out []*discovery.EndpointSlice
	for s := 0; s < n; s++ {
		var eps []ep
		for i := 0; i < per; i++ {
			k := s*per + i + offset
			eps = append(eps, ep{ip: fmt.Sprintf("10.%d.%d.%d", 20+k/65536, k/256%256, k%256), node: "node-b", ready: true})
		}
		out = append(out, makeSlice("ns1", "big", fmt.Sprintf("big-%d", s), 8080, v1.ProtocolTCP, "http", eps...))
	}
	return out
}

// TestIntegrationRestartWithBigService: a Service of 5,000 endpoints (5 slices of 1,000),
// changed, then a new proxier (the next round) starts on the same bridge: ovs-vswitchd must
// survive the start-up (it aborts on a dump-groups of a group over 64 KiB, which the start-up
// no longer asks for) and a small Service is installed as on a fake bridge.
func TestIntegrationRestartWithBigService(t *testing.T) {
	o := ovssandbox.Start(t, ovssandbox.Options{})
	real := addOVSBridge(t, o, "brbig")
	pid := o.VSwitchdPID()
	h1 := realHarness(t, testOptions(), real)
	big := makeService("ns1", "big", "10.96.1.1")
	h1.addService(big)
	old := bigSlices(5, 1000, 0)
	for _, s := range old {
		h1.addSlice(s)
	}
	h1.sync()
	changed := bigSlices(5, 1000, 7)
	for i := range old[:2] {
		h1.updateSlice(old[i], changed[i])
	}
	h1.sync()

	opts := testOptions()
	opts.Round = 2
	h2 := realHarness(t, opts, real)
	small := makeService("ns1", "small", "10.96.1.2", withNodePort(30200))
	h2.addService(big)
	h2.addService(small)
	final := append(append([]*discovery.EndpointSlice(nil), changed[:2]...), old[2:]...)
	for _, s := range final {
		h2.addSlice(s)
	}
	h2.addSlice(makeSlice("ns1", "small", "small-1", 8080, v1.ProtocolTCP, "http", twoEndpoints()...))
	start := time.Now()
	h2.sync()
	t.Logf("restart with a 5,000-endpoint Service: first sync of the new round took %v", time.Since(start))
	if !o.VSwitchdAlive() || o.VSwitchdPID() != pid {
		t.Fatalf("ovs-vswitchd did not survive the restart (pid %d, was %d, alive %v)", o.VSwitchdPID(), pid, o.VSwitchdAlive())
	}
	fake := newHarness(t, opts)
	fake.addService(big)
	fake.addService(small)
	for _, s := range final {
		fake.addSlice(s)
	}
	fake.addSlice(makeSlice("ns1", "small", "small-1", 8080, v1.ProtocolTCP, "http", twoEndpoints()...))
	fake.sync()
	if diff := cmp.Diff(canonicalFlows(t, fake.bridge), canonicalFlows(t, real)); diff != "" {
		t.Errorf("after the restart OVS holds other flows than the fake (-fake +ovs):\n%s", diff)
	}
}

// TestIntegrationReplayAfterVSwitchdRestart: after ovs-vswitchd is killed and restarted (all
// flows and groups gone), Replay restores the same canonical dump.
func TestIntegrationReplayAfterVSwitchdRestart(t *testing.T) {
	o := ovssandbox.Start(t, ovssandbox.Options{})
	real := addOVSBridge(t, o, "brre")
	h := realHarness(t, testOptions(), real)
	p := h.p
	installReplayServices(t, h)
	want := canonicalDump(t, real)
	restartVSwitchd(t, o, "brre", real)
	if got := canonicalDump(t, real); got == want {
		t.Fatal("the restart lost nothing; the test proves nothing")
	}
	if err := p.Reconciler().Replay(context.Background()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, canonicalDump(t, real)); diff != "" {
		t.Errorf("Replay did not restore the bridge (-before +after):\n%s", diff)
	}
}
