package proxy

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/openflowtest"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

// tableBridge is a FakeBridge that also answers table statistics (from what it holds) and
// counts the calls of both kinds of count.
type tableBridge struct {
	*openflowtest.FakeBridge
	counts, tableStats atomic.Int32
}

func (b *tableBridge) CountFlows(ctx context.Context, f of.FlowFilter) (int, error) {
	b.counts.Add(1)
	return b.FakeBridge.CountFlows(ctx, f)
}

func (b *tableBridge) TableStats(ctx context.Context) ([]of.TableStats, error) {
	b.tableStats.Add(1)
	flows, err := b.DumpFlows(ctx, of.FlowFilter{})
	if err != nil {
		return nil, err
	}
	per := map[uint8]uint64{}
	for _, f := range flows {
		per[f.Table]++
	}
	var out []of.TableStats
	for t := 0; t < 254; t++ {
		out = append(out, of.TableStats{Table: uint8(t), Active: per[uint8(t)]})
	}
	return out, nil
}

// tableHarness is resyncHarness on a tableBridge, with web1 using ClientIP session affinity.
func tableHarness(t *testing.T) (*harness, *tableBridge) {
	fake := openflowtest.NewFakeBridge()
	tb := &tableBridge{FakeBridge: fake}
	h := realHarness(t, testOptions(), tb)
	h.bridge = fake
	for i, ip := range []string{"10.96.0.10", "10.96.0.11", "10.96.0.12"} {
		svc := makeService("ns1", "web"+string(rune('0'+i)), ip)
		if i == 1 {
			timeout := int32(60)
			svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP
			svc.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: &timeout}}
		}
		h.addService(svc)
		for _, s := range twoEndpointSlices(svc) {
			h.addSlice(s)
		}
	}
	h.sync()
	return h, tb
}

// waitDriftCheck waits until the full resync's drift check (off the sync goroutine) is done.
func waitDriftCheck(t *testing.T, p *Proxier) {
	t.Helper()
	waitFor(t, 10*time.Second, "the drift check", func() bool {
		select {
		case p.driftCheck <- struct{}{}:
			<-p.driftCheck
			return true
		default:
			return false
		}
	})
}

// TestInstalledFlowsMatchesTheBridge: the proxier's per-table counts are what the bridge holds,
// and the session affinity table is marked learned.
func TestInstalledFlowsMatchesTheBridge(t *testing.T) {
	h, tb := tableHarness(t)
	in, ok := h.p.Reconciler().InstalledFlows()
	if !ok {
		t.Fatal("InstalledFlows cannot tell after a sync")
	}
	stats, err := tb.TableStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	held := of.FlowsPerTable(stats)
	if len(held) == 0 || len(in.PerTable) != len(held) {
		t.Fatalf("installed per table %v, bridge holds %v", in.PerTable, held)
	}
	for tbl, n := range held {
		if in.PerTable[tbl] != n {
			t.Errorf("table %d: installed %d, bridge holds %d", tbl, in.PerTable[tbl], n)
		}
	}
	if in.PerTable[pipeline.TableSessionAffinityLearn] == 0 {
		t.Errorf("no flow in the affinity learn table: %v", in.PerTable)
	}
	if len(in.Learned) != 1 || in.Learned[0] != pipeline.TableSessionAffinity {
		t.Errorf("learned tables %v, want [%d]", in.Learned, pipeline.TableSessionAffinity)
	}
	if in.Version%2 != 0 {
		t.Errorf("version %d is odd (a bundle in flight)", in.Version)
	}
	if v, ok := h.p.Reconciler().InstalledVersion(); !ok || v != in.Version {
		t.Errorf("InstalledVersion = %d, %v; want %d, true", v, ok, in.Version)
	}
	h.fullSync() // an idle full resync keeps the version: the healer need not count again
	if v, ok := h.p.Reconciler().InstalledVersion(); !ok || v != in.Version {
		t.Errorf("InstalledVersion = %d, %v after an idle full resync; want %d, true", v, ok, in.Version)
	}
	svc := makeService("ns1", "web9", "10.96.0.19")
	h.addService(svc)
	for _, s := range twoEndpointSlices(svc) {
		h.addSlice(s)
	}
	h.sync()
	if v, _ := h.p.Reconciler().InstalledVersion(); v == in.Version {
		t.Errorf("InstalledVersion unchanged (%d) after a Service was added", v)
	}
}

// TestFullResyncAtRestCountsNoFlows: with table statistics, a full resync with nothing lost
// reads them once and counts no flow (OVS walks none).
func TestFullResyncAtRestCountsNoFlows(t *testing.T) {
	h, tb := tableHarness(t)
	h.fullSync()
	waitDriftCheck(t, h.p)
	if n := tb.tableStats.Load(); n != 1 {
		t.Fatalf("%d table statistics requests, want 1", n)
	}
	if n := tb.counts.Load(); n != 0 {
		t.Fatalf("%d flow counts at rest, want 0", n)
	}
}

// TestFullResyncTableCheckRepairsDrift: a table that lost one of the proxier's flows shows in
// the table statistics; the proxier counts, sees the loss and replays.
func TestFullResyncTableCheckRepairsDrift(t *testing.T) {
	h, tb := tableHarness(t)
	want := h.bridge.Dump()
	h.bridge.ClearFlows(of.FlowFilter{Table: pipeline.TableServiceLB, TableSet: true})
	h.fullSync()
	waitFor(t, 10*time.Second, "the replay after the full resync", func() bool { return h.bridge.Dump() == want })
	if tb.counts.Load() == 0 {
		t.Fatal("the loss was repaired without counting the flows")
	}
}

// BenchmarkInstalledFlows10k is one walk of the installed state for the per-table counts at
// 10,000 Services × 10 endpoints (what the healer asks after every change of the version).
func BenchmarkInstalledFlows10k(b *testing.B) {
	p := newScaleProxier(b, nullBridge{})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, ok := p.Reconciler().InstalledFlows(); !ok {
			b.Fatal("cannot tell")
		}
	}
}
