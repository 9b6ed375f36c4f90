package proxy

import (
	"context"
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/openflowtest"
)

// nullBridge accepts every bundle and keeps nothing: what the proxier itself retains is then
// the whole heap a benchmark measures.
type nullBridge struct{}

func (nullBridge) Apply(context.Context, []of.Op) error { return nil }
func (nullBridge) DumpFlows(context.Context, of.FlowFilter) ([]of.Flow, error) {
	return nil, nil
}

// scaleSlices builds the slices of Service i of the 10k×10 set (as install10k).
func scaleSlice(i int, firstEndpointReady bool) *discovery.EndpointSlice {
	name := fmt.Sprintf("s%05d", i)
	var eps []ep
	for j := 0; j < 10; j++ {
		k := i*10 + j
		eps = append(eps, ep{ip: fmt.Sprintf("10.%d.%d.%d", 30+k/65536, k/256%256, k%256), node: "node-b",
			ready: j != 0 || firstEndpointReady})
	}
	return makeSlice("ns1", name, name+"-1", 8080, v1.ProtocolTCP, "http", eps...)
}

// newScaleProxier returns a proxier on bridge with the test Node and 10,000 ClusterIP Services
// × 10 endpoints synced through the real trackers.
func newScaleProxier(tb testing.TB, bridge of.Bridge) *Proxier {
	tb.Helper()
	p, err := New(testOptions(), bridge)
	if err != nil {
		tb.Fatal(err)
	}
	p.OnNodeUpdate(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode}, Status: v1.NodeStatus{
		Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.168.77.10"}}}})
	install10k(tb, p)
	return p
}

// heapInUse returns the bytes of live heap after two collections.
func heapInUse() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// BenchmarkStateHeap10k reports the live heap the proxier and its trackers retain with 10,000
// ClusterIP Services × 10 endpoints installed (through the real trackers, onto a bridge that
// keeps nothing), and with the fake bridge (which holds its own copy of every flow). The
// Service and EndpointSlice objects the trackers point to are counted: an agent shares them
// with its informer cache.
func BenchmarkStateHeap10k(b *testing.B) {
	for _, c := range []struct {
		name   string
		bridge func() of.Bridge
	}{{"null-bridge", func() of.Bridge { return nullBridge{} }}, {"fake-bridge", func() of.Bridge { return openflowtest.NewFakeBridge() }}} {
		b.Run(c.name, func(b *testing.B) {
			var total uint64
			for i := 0; i < b.N; i++ {
				before := heapInUse()
				p := newScaleProxier(b, c.bridge())
				total += heapInUse() - before
				runtime.KeepAlive(p)
			}
			b.ReportMetric(float64(total)/float64(b.N)/(1<<20), "heap-MB")
		})
	}
}

// cpuNow returns this process's user + system CPU time.
func cpuNow(tb testing.TB) time.Duration { return rusageCPU(tb, syscall.RUSAGE_SELF) }

// BenchmarkIdleResync10k measures one periodic full resync with nothing changed, at 10,000
// ClusterIP Services × 10 endpoints on the fake bridge: wall time (ns/op), the CPU it uses
// (cpu-ms/op, all goroutines including the GC) and the ops it sends.
func BenchmarkIdleResync10k(b *testing.B) {
	fb := openflowtest.NewFakeBridge()
	p := newScaleProxier(b, fb)
	opsBefore := fb.OpsTotal()
	runtime.GC()
	b.ResetTimer()
	cpu0 := cpuNow(b)
	for i := 0; i < b.N; i++ {
		if err := p.SyncNow(context.Background(), true); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuNow(b)-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
	b.ReportMetric(float64(fb.OpsTotal()-opsBefore)/float64(b.N), "ovs-ops/op")
}

// BenchmarkOneEndpointChange10k measures the partial sync that follows one endpoint's readiness
// flipping in one Service's slice, at 10,000 ClusterIP Services × 10 endpoints on the fake
// bridge (the tracker update is outside the timer).
func BenchmarkOneEndpointChange10k(b *testing.B) {
	fb := openflowtest.NewFakeBridge()
	p := newScaleProxier(b, fb)
	runtime.GC()
	b.ResetTimer()
	cpu0 := cpuNow(b)
	var worst time.Duration
	for i := 0; i < b.N; i++ {
		svc := i % 10000
		b.StopTimer()
		pass := i / 10000
		old, cur := scaleSlice(svc, pass%2 == 0), scaleSlice(svc, pass%2 == 1)
		p.Tracker().Endpoints.OnEndpointSliceUpdate(old, cur)
		b.StartTimer()
		t0 := time.Now()
		if err := p.SyncNow(context.Background(), false); err != nil {
			b.Fatal(err)
		}
		if d := time.Since(t0); d > worst {
			worst = d
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuNow(b)-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
	b.ReportMetric(float64(worst.Microseconds())/1000, "max-ms")
}
