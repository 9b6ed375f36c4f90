//go:build bench

package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/native"
	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// floorResult is the raw OVS floor of the agent's groups and flows, replayed into a fresh
// bridge twice: as one `ovs-ofctl bundle` (text parsed and encoded by ovs-ofctl) and as one
// bundle of the project's native OpenFlow 1.5 backend (what the agent's own connection costs at
// the least).
type floorResult struct {
	Groups, Flows int
	Bytes         int
	Ofctl         time.Duration
	Native        time.Duration
	// NativeErr says why the native floor was not measured.
	NativeErr string
}

// Fresh bridges the floors are measured on, one after the other.
const (
	floorBridge       = "br-floor"
	nativeFloorBridge = "br-floor-nat"
)

// measureFloor dumps the agent's groups and flows and replays them into fresh bridges of the
// same ovs-vswitchd: with one `ovs-ofctl bundle`, then, parsed with the openflow package, as
// one bundle of the native backend (pkg/ovs/openflow/native), timing each replay alone.
func measureFloor(t *testing.T, n *framework.Node, progress func(string, ...any)) floorResult {
	groups, err := n.OVS.Ofctl("dump-groups", framework.Bridge)
	if err != nil {
		t.Fatal(err)
	}
	flows, err := n.OVS.Ofctl("dump-flows", framework.Bridge, "--no-stats", "--no-names")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	var fr floorResult
	for _, line := range strings.Split(groups, "\n") {
		if line = strings.TrimSpace(line); strings.HasPrefix(line, "group_id=") {
			b.WriteString("group add " + line + "\n")
			fr.Groups++
		}
	}
	for _, line := range strings.Split(flows, "\n") {
		if line = strings.TrimSpace(line); strings.Contains(line, "actions=") && !strings.HasPrefix(line, "OFPST") {
			b.WriteString("flow add " + line + "\n")
			fr.Flows++
		}
	}
	fr.Bytes = b.Len()
	file := filepath.Join(n.Dir, "floor.bundle")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := addFloorBridge(n, floorBridge, flows); err != nil {
		t.Fatal(err)
	}
	progress("floor: replaying %d groups + %d flows (%d MB) in one ovs-ofctl bundle", fr.Groups, fr.Flows, fr.Bytes>>20)
	start := time.Now()
	if out, err := n.OVS.Ofctl("bundle", floorBridge, file); err != nil {
		t.Fatalf("floor bundle: %v: %s", err, out)
	}
	fr.Ofctl = time.Since(start)
	if _, err := n.OVS.Vsctl("del-br", floorBridge); err != nil {
		t.Error(err)
	}
	if fr.Native, err = nativeFloor(n, groups, flows, progress); err != nil {
		fr.NativeErr = err.Error()
		t.Errorf("native floor: %v", err)
	}
	return fr
}

// nativeFloor parses the dumps into ops (the groups first, as flows refer to them) and applies
// them as one native bundle into a fresh bridge, timing Apply (which includes connecting: one
// unix-socket handshake).
func nativeFloor(n *framework.Node, groups, flows string, progress func(string, ...any)) (time.Duration, error) {
	gs, err := openflow.ParseGroupDump(groups)
	if err != nil {
		return 0, fmt.Errorf("parsing the group dump: %w", err)
	}
	fs, err := openflow.ParseFlowDump(flows)
	if err != nil {
		return 0, fmt.Errorf("parsing the flow dump: %w", err)
	}
	ops := make([]openflow.Op, 0, len(gs)+len(fs))
	for i := range gs {
		ops = append(ops, openflow.Op{Kind: openflow.AddGroup, Group: &gs[i]})
	}
	for i := range fs {
		ops = append(ops, openflow.Op{Kind: openflow.AddFlow, Flow: &fs[i]})
	}
	if err := addFloorBridge(n, nativeFloorBridge, flows); err != nil {
		return 0, err
	}
	defer func() { _, _ = n.OVS.Vsctl("del-br", nativeFloorBridge) }()
	br := native.New(n.OVS.MgmtSocket(nativeFloorBridge), nil)
	defer br.Close()
	progress("floor: replaying %d groups + %d flows in one native OpenFlow 1.5 bundle", len(gs), len(fs))
	start := time.Now()
	if err := br.Apply(context.Background(), ops); err != nil {
		return 0, fmt.Errorf("native bundle: %w", err)
	}
	took := time.Since(start)
	// The replay must have installed what the agent has (a bundle is all or nothing, but
	// check the count so that a silently empty replay cannot pass for a fast one).
	got, err := n.OVS.Ofctl("dump-aggregate", nativeFloorBridge)
	if err != nil {
		return 0, err
	}
	agg, err := openflow.ParseAggregateReply(got)
	if err != nil {
		return 0, err
	}
	if int(agg.FlowCount) != len(fs) {
		return 0, fmt.Errorf("the native replay left %d flows on %s, want %d", agg.FlowCount, nativeFloorBridge, len(fs))
	}
	return took, nil
}

// addFloorBridge adds a fresh bridge like the agent's, waits for its management socket and
// adds the meters the flows name (the reject meters: OVS refuses a flow whose meter does not
// exist; the agent creates them before its first bundle too).
func addFloorBridge(n *framework.Node, name, flows string) error {
	if _, err := n.OVS.Vsctl("add-br", name, "--", "set", "bridge", name,
		"datapath_type=netdev", "protocols=OpenFlow13,OpenFlow15", "fail_mode=secure"); err != nil {
		return err
	}
	if err := n.OVS.WaitForBridge(name); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, m := range meterRef.FindAllStringSubmatch(flows, -1) {
		if seen[m[1]] {
			continue
		}
		seen[m[1]] = true
		if out, err := n.OVS.Ofctl("add-meter", name, "meter="+m[1]+",pktps,band=type=drop,rate=1000000"); err != nil {
			return fmt.Errorf("adding meter %s to %s: %w: %s", m[1], name, err, out)
		}
	}
	return nil
}

// meterRef matches the meter action of a dumped flow.
var meterRef = regexp.MustCompile(`meter:(\d+)`)
