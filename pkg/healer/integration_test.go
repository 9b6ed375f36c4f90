package healer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/native"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/ofctl"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
	"github.com/antrea-proxy/antrea-proxy/test/ovssandbox"
)

// bridgeOwner is an Owner and TableCounts on a real bridge, shaped like the agent's owners: its flows are
// in one or more cookie categories of round 7; Verify counts each category in OVS (one
// aggregate request each, as the proxier does) and Replay replaces every category.
type bridgeOwner struct {
	name  string
	b     *native.Bridge
	flows map[pipeline.Category][]openflow.Flow
}

func (o *bridgeOwner) Name() string { return o.name }

func (o *bridgeOwner) Verify(ctx context.Context, c openflow.FlowCounter) (bool, error) {
	for cat, fs := range o.flows {
		n, err := c.CountFlows(ctx, openflow.FlowFilter{Cookie: pipeline.Cookie(7, cat, 0), CookieMask: pipeline.RoundMask | pipeline.CategoryMask})
		if err != nil || n != len(fs) {
			return false, err
		}
	}
	return true, nil
}

func (o *bridgeOwner) Replay(ctx context.Context) error {
	for cat, fs := range o.flows {
		if err := o.b.Apply(ctx, pipeline.ReplaceCategory(cat, fs)); err != nil {
			return err
		}
	}
	return nil
}

func (o *bridgeOwner) InstalledVersion() (uint64, bool) { return 1, true }

func (o *bridgeOwner) InstalledFlows() (openflow.InstalledFlows, bool) {
	per := map[uint8]int{}
	for _, fs := range o.flows {
		for _, f := range fs {
			per[f.Table]++
		}
	}
	return openflow.InstalledFlows{PerTable: per, Version: 1}, true
}

// ownerFlows returns n flows of category cat in table, each matching its own TCP destination.
func ownerFlows(cat pipeline.Category, table uint8, first, n int) []openflow.Flow {
	out := make([]openflow.Flow, n)
	for i := range out {
		k := first + i
		dst := netip.AddrFrom4([4]byte{10, byte(k >> 16), byte(k >> 8), byte(k)})
		out[i] = openflow.Flow{Table: table, Priority: 200, Cookie: pipeline.Cookie(7, cat, uint64(k)),
			Match:   openflow.Match{EthType: openflow.EthTypeIP, IPProto: openflow.ProtoTCP, Dst: netip.PrefixFrom(dst, 32), TpDst: 80},
			Actions: []openflow.Action{openflow.Drop{}}}
	}
	return out
}

// healBridge starts OVS with a bridge holding, like an agent's at scale, a "proxier" owner of
// three categories (base: 10 flows in table 11; service: services flows in table 14;
// endpoint: 10 per Service in table 15), a "gateway" owner of 5 flows in table 0 and a "pods"
// owner that does not count per table (10 flows in table 0 and 20). The owners are in replay
// order; tables are those that count per table.
func healBridge(tb testing.TB, services int) (o *ovssandbox.Instance, br string, b *native.Bridge, owners []Owner, tables []TableCounts) {
	tb.Helper()
	ns := ovssandbox.NewNetNS(tb, "healer")
	o = ovssandbox.Start(tb, ovssandbox.Options{NetNS: ns.Name})
	br = fmt.Sprintf("br%06x", rand.IntN(1<<24))
	_, err := o.Vsctl("add-br", br, "--", "set", "bridge", br, "datapath_type=netdev",
		"protocols=OpenFlow10,OpenFlow13,OpenFlow15", "fail_mode=secure")
	require.NoError(tb, err)
	require.NoError(tb, o.WaitForBridge(br))
	b = native.New(o.MgmtSocket(br), ofctl.New(o.MgmtSocket(br)))
	tb.Cleanup(b.Close)
	proxier := &bridgeOwner{name: "proxier", b: b, flows: map[pipeline.Category][]openflow.Flow{
		pipeline.CategoryBase:     ownerFlows(pipeline.CategoryBase, 11, 0, 10),
		pipeline.CategoryService:  ownerFlows(pipeline.CategoryService, 14, 0, services),
		pipeline.CategoryEndpoint: ownerFlows(pipeline.CategoryEndpoint, 15, 0, 10*services),
	}}
	gateway := &bridgeOwner{name: "gateway", b: b, flows: map[pipeline.Category][]openflow.Flow{
		pipeline.CategoryGateway: ownerFlows(pipeline.CategoryGateway, 0, 0, 5)}}
	pods := &bridgeOwner{name: "pods", b: b, flows: map[pipeline.Category][]openflow.Flow{
		pipeline.CategoryPod: append(ownerFlows(pipeline.CategoryPod, 0, 100, 5), ownerFlows(pipeline.CategoryPod, 20, 200, 5)...)}}
	owners, tables = []Owner{gateway, pods, proxier}, []TableCounts{gateway, proxier}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, ow := range owners {
		require.NoError(tb, ow.Replay(ctx))
	}
	return o, br, b, owners, tables
}

// sortedFlows is the bridge's flows without statistics, sorted.
func sortedFlows(t *testing.T, o *ovssandbox.Instance, br string) string {
	t.Helper()
	out, err := o.Ofctl("dump-flows", br, "--no-stats")
	require.NoError(t, err)
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "OFPST_") && !strings.HasPrefix(l, "NXST_") {
			lines = append(lines, l)
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// TestIntegrationTableCheckHeals: with the table statistics check on a real ovs-vswitchd, an
// external `ovs-ofctl del-flows` of the whole bridge, of one table and of one flow each heal
// (the owner that lost flows replays); a foreign flow added costs one full check and no replay.
// "polled" checks every 100 ms; "watched" has OVS report the changes (native.FlowWatch) and no
// periodic check within the test, so every heal is the flow monitor's doing.
func TestIntegrationTableCheckHeals(t *testing.T) {
	ovssandbox.Require(t)
	t.Run("polled", func(t *testing.T) { testTableCheckHeals(t, false) })
	t.Run("watched", func(t *testing.T) { testTableCheckHeals(t, true) })
}

func testTableCheckHeals(t *testing.T, watched bool) {
	o, br, b, owners, tables := healBridge(t, 20)
	want := sortedFlows(t, o, br)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opts := Options{Counter: b, Owners: owners, Tables: tables, CheckInterval: 100 * time.Millisecond, FullCheckInterval: -1}
	if watched {
		w := b.NewFlowWatch()
		go w.Run(ctx)
		opts.Changes, opts.WatchedCheckInterval = w, time.Hour
	}
	h := New(opts)
	go h.Run(ctx)
	waitStats := func(what string, cond func(Stats) bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cond(h.Stats()) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; stats %+v", what, h.Stats())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if watched {
		waitStats("the baseline", func(s Stats) bool { return s.FullChecks >= 1 && opts.Changes.Watching() })
	} else {
		waitStats("the baseline", func(s Stats) bool { return s.FullChecks >= 1 && s.TableChecks >= 3 })
	}
	replays := func(owner string) int { return h.Stats().Owners[owner].Replays[TriggerMismatch] }
	for _, c := range []struct {
		name  string
		args  []string
		owner string // an owner that must replay
	}{
		{"whole bridge", nil, "pods"},
		{"one table", []string{"table=15"}, "proxier"},
		{"one flow", []string{"--strict", "table=14,priority=200,tcp,nw_dst=10.0.0.7,tp_dst=80"}, "proxier"},
		{"one pod flow", []string{"--strict", "table=20,priority=200,tcp,nw_dst=10.0.0.201,tp_dst=80"}, "pods"},
	} {
		before := replays(c.owner)
		_, err := o.Ofctl("del-flows", br, c.args...)
		require.NoError(t, err, c.name)
		waitStats(c.name+" healed", func(Stats) bool { return replays(c.owner) > before && sortedFlows(t, o, br) == want })
		waitStats(c.name+": a new baseline", func(Stats) bool {
			h.opMu.Lock()
			defer h.opMu.Unlock()
			return h.tables.baseline != nil
		})
	}
	// A foreign flow: one full check, no replay, then table checks only.
	full, total := h.Stats().FullChecks, 0
	for _, n := range []string{"gateway", "pods", "proxier"} {
		total += replays(n)
	}
	_, err := o.Ofctl("add-flow", br, "table=30,priority=1,actions=drop")
	require.NoError(t, err)
	waitStats("the foreign flow's full check", func(s Stats) bool { return s.FullChecks == full+1 })
	tableChecks := h.Stats().TableChecks
	if watched {
		// Another foreign flow in the same table: reported, checked, counted in the baseline.
		_, err := o.Ofctl("add-flow", br, "table=30,priority=2,actions=drop")
		require.NoError(t, err)
		waitStats("the second foreign flow's full check", func(s Stats) bool { return s.FullChecks == full+2 })
		full++
	} else {
		waitStats("table checks", func(s Stats) bool { return s.TableChecks >= tableChecks+3 })
	}
	st := h.Stats()
	require.Equal(t, full+1, st.FullChecks, "full checks after the foreign flow")
	after := 0
	for _, n := range []string{"gateway", "pods", "proxier"} {
		after += st.Owners[n].Replays[TriggerMismatch]
	}
	require.Equal(t, total, after, "replays caused by a foreign flow")
}

// cpuTicks returns the user + system CPU of process pid in clock ticks (/proc/<pid>/stat).
func cpuTicks(tb testing.TB, pid int) int64 {
	tb.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(tb, err)
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	require.NoError(tb, err1)
	require.NoError(tb, err2)
	return u + st
}

// selfCPU is the CPU time this process and its waited-for children (ovs-ofctl) used so far.
func selfCPU(tb testing.TB) time.Duration {
	tb.Helper()
	var total time.Duration
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		require.NoError(tb, syscall.Getrusage(who, &ru))
		total += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return total
}

// BenchmarkCheck10k is one periodic check of a bridge holding 110,025 flows (10,000 Services ×
// 10 endpoints, as the proxier lays them out, plus gateway and pod flows), nothing lost: the
// table statistics check against verifying every owner (five aggregate requests, what every
// check did before). vswitchd-ms/check is the CPU ovs-vswitchd spent per check (from
// /proc/<pid>/stat, 10 ms ticks, over b.N checks); agent-cpu-µs/check the CPU of the checking
// process and of the ovs-ofctl processes it ran.
func BenchmarkCheck10k(b *testing.B) {
	ovssandbox.Require(b)
	o, _, br, owners, tables := healBridge(b, 10000)
	h := New(Options{Counter: br, Owners: owners, Tables: tables, FullCheckInterval: -1})
	ctx := context.Background()
	h.check(ctx) // the first check is a full one and records the baseline
	require.NotNil(b, h.tables.baseline)
	for _, bc := range []struct {
		name string
		run  func()
	}{
		{"tables", func() { h.check(ctx) }},
		{"verify-every-owner", func() { h.opMu.Lock(); h.verifyAllLocked(ctx); h.opMu.Unlock() }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			pid := o.VSwitchdPID()
			start, self := cpuTicks(b, pid), selfCPU(b)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				bc.run()
			}
			b.StopTimer()
			b.ReportMetric(float64(cpuTicks(b, pid)-start)*10/float64(b.N), "vswitchd-ms/check")
			b.ReportMetric(float64(selfCPU(b)-self)/float64(time.Microsecond)/float64(b.N), "agent-cpu-µs/check")
		})
	}
	for name, st := range h.Stats().Owners {
		if st.Mismatches != 0 || st.VerifyErrors != 0 {
			b.Fatalf("owner %s: %+v: the bridge lost flows during the benchmark", name, st)
		}
	}
}
