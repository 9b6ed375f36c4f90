package proxy

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// BenchmarkBudgetBytesPerEntry measures what one OpenFlow entry (a flow or a group bucket, the
// flow budget's unit) costs the agent: the heap the proxier retains, and the most heap it
// held while building and installing it, per entry, for one Service made mostly of flows (100
// ports × 20 externalIPs with externalTrafficPolicy=Local) and one made mostly of buckets (10
// ports × 1,000 endpoints), on a bridge that keeps nothing. The defaults of
// antreaProxy.maxFlowsPerService and maxFlows are chosen from it
// (docs/design/failure-handling.md).
func BenchmarkBudgetBytesPerEntry(b *testing.B) {
	for _, c := range []struct {
		name           string
		ports, extIPs  int
		endpoints      int
		externalPolicy bool
	}{{"flows", 100, 20, 1, true}, {"buckets", 10, 0, 1000, false}} {
		b.Run(c.name, func(b *testing.B) {
			var retained, peak, entries uint64
			for range b.N {
				debug.FreeOSMemory()
				before := heapInUse()
				stop := sampleHeapHeld()
				opts := testOptions()
				opts.MaxFlowsPerService, opts.MaxFlows = 1<<30, 1<<30
				p, err := New(opts, nullBridge{})
				if err != nil {
					b.Fatal(err)
				}
				svc := makeService("ns1", "big", "10.96.0.10", manyPorts(c.ports), manyExternalIPs(c.extIPs))
				if c.externalPolicy {
					withETPLocal(svc)
				}
				p.Tracker().Services.OnServiceAdd(svc)
				for _, sp := range svc.Spec.Ports {
					var eps []ep
					for j := range c.endpoints {
						eps = append(eps, ep{ip: fmt.Sprintf("10.%d.%d.%d", 64+j/65536, j/256%256, j%256), node: "node-b", ready: true})
					}
					p.Tracker().Endpoints.OnEndpointSliceAdd(makeSlice("ns1", "big", "big-"+sp.Name, 8080, v1.ProtocolTCP, sp.Name, eps...))
				}
				if err := p.SyncNow(b.Context(), false); err != nil {
					b.Fatal(err)
				}
				peak += stop() - before
				retained += heapInUse() - before
				e, _ := p.budget.entries.get(types.NamespacedName{Namespace: "ns1", Name: "big"})
				entries += uint64(e.cost)
				runtime.KeepAlive(p)
			}
			b.ReportMetric(float64(entries)/float64(b.N), "entries")
			b.ReportMetric(float64(retained)/float64(entries), "retained-B/entry")
			b.ReportMetric(float64(peak)/float64(entries), "peak-held-B/entry")
		})
	}
}
