package proxy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/openflowtest"
	"github.com/antrea-proxy/antrea-proxy/test/ovssandbox"
)

// nullBridge accepts every bundle and keeps nothing: what the proxier itself retains is then
// the whole heap a benchmark measures.
type nullBridge struct{}

func (nullBridge) Apply(context.Context, []of.Op) error { return nil }

// errNoCounts is what a bridge that keeps nothing answers a count with: the proxier's checks
// against OVS then do nothing (a benchmark measures the syncs alone).
var errNoCounts = errors.New("this test bridge keeps no flows to count")

func (nullBridge) CountFlows(context.Context, of.FlowFilter) (int, error) { return 0, errNoCounts }
func (nullBridge) TableStats(context.Context) ([]of.TableStats, error)    { return nil, errNoCounts }
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
func newScaleProxier(tb testing.TB, bridge Bridge) *Proxier {
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
// with its informer cache. heap-MB is what stays live; peak-held-MB the most heap memory the
// process held from the OS while building and installing it (default GOGC: live objects plus
// the garbage and free pages between collections), both above the heap before.
func BenchmarkStateHeap10k(b *testing.B) {
	for _, c := range []struct {
		name   string
		bridge func() Bridge
	}{{"null-bridge", func() Bridge { return nullBridge{} }}, {"fake-bridge", func() Bridge { return openflowtest.NewFakeBridge() }}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var total, peak uint64
			for i := 0; i < b.N; i++ {
				debug.FreeOSMemory()
				before := heapInUse()
				stop := sampleHeapHeld()
				p := newScaleProxier(b, c.bridge())
				peak += stop() - before
				total += heapInUse() - before
				writeHeapProfile(b, c.name)
				runtime.KeepAlive(p)
			}
			b.ReportMetric(float64(total)/float64(b.N)/(1<<20), "heap-MB")
			b.ReportMetric(float64(peak)/float64(b.N)/(1<<20), "peak-held-MB")
		})
	}
}

// heapHeld returns the heap memory the runtime holds from the OS: live and dead objects,
// fragmentation and free pages not yet returned (what the heap adds to the resident size).
func heapHeld() uint64 {
	ms := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/unused:bytes"},
		{Name: "/memory/classes/heap/free:bytes"}}
	metrics.Read(ms)
	var n uint64
	for _, m := range ms {
		n += m.Value.Uint64()
	}
	return n
}

// sampleHeapHeld samples heapHeld every millisecond until the returned func is called, which
// returns the largest value seen: the peak, with the default GOGC, of what a sync makes the
// process hold.
func sampleHeapHeld() func() uint64 {
	done, result := make(chan struct{}), make(chan uint64)
	go func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		peak := heapHeld()
		for {
			select {
			case <-done:
				result <- max(peak, heapHeld())
				return
			case <-t.C:
				peak = max(peak, heapHeld())
			}
		}
	}()
	return func() uint64 {
		close(done)
		return <-result
	}
}

// writeHeapProfile writes the live heap to $STATEHEAP_PROFILE-<name>.prof when that variable
// is set: what the installed state holds, by allocation site (go tool pprof -sample_index
// inuse_space). The benchmark's own -memprofile is written after the state is gone.
func writeHeapProfile(b *testing.B, name string) {
	base := os.Getenv("STATEHEAP_PROFILE")
	if base == "" {
		return
	}
	f, err := os.Create(base + "-" + name + ".prof")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}

// cpuNow returns this process's user + system CPU time.
func cpuNow(tb testing.TB) time.Duration { return rusageCPU(tb, syscall.RUSAGE_SELF) }

// scaleBridges are the bridges the scale benchmarks run on: the fake (which validates and
// clones its whole state on every bundle: most of a small sync's time) and one that keeps
// nothing (the proxier's own work only).
func scaleBridges() []struct {
	name string
	new  func() Bridge
} {
	return []struct {
		name string
		new  func() Bridge
	}{{"fake-bridge", func() Bridge { return openflowtest.NewFakeBridge() }}, {"null-bridge", func() Bridge { return nullBridge{} }}}
}

// BenchmarkIdleResync10k measures one periodic full resync with nothing changed, at 10,000
// ClusterIP Services × 10 endpoints: wall time (ns/op), the CPU it uses (cpu-ms/op, every
// goroutine including the GC) and the Services it computes. recompute-all is the behaviour
// before input fingerprints (every Service recomputed), changed-only the default.
func BenchmarkIdleResync10k(b *testing.B) {
	for _, c := range []struct {
		name   string
		bridge func() Bridge
		all    bool
	}{
		{"fake-bridge/recompute-all", func() Bridge { return openflowtest.NewFakeBridge() }, true},
		{"fake-bridge/changed-only", func() Bridge { return openflowtest.NewFakeBridge() }, false},
		{"null-bridge/changed-only", func() Bridge { return nullBridge{} }, false},
	} {
		b.Run(c.name, func(b *testing.B) { benchIdleResync(b, newScaleProxier(b, c.bridge()), c.all) })
	}
}

// BenchmarkIdleResync10kOVS is BenchmarkIdleResync10k on a real bridge (ovs-ofctl, the test
// sandbox): the full resync's drift check counts the flows through ovs-ofctl dump-aggregate;
// ovs-cpu-ms/op is what ovs-vswitchd spends meanwhile.
func BenchmarkIdleResync10kOVS(b *testing.B) {
	o := ovssandbox.Start(b, ovssandbox.Options{})
	real := benchBridge(b, o, "brbench")
	p := newScaleProxier(b, real)
	for _, all := range []bool{true, false} {
		name := map[bool]string{true: "recompute-all", false: "changed-only"}[all]
		b.Run(name, func(b *testing.B) {
			vs := processCPU(b, o.VSwitchdPID())
			kids := rusageCPU(b, syscall.RUSAGE_CHILDREN)
			benchIdleResync(b, p, all)
			b.ReportMetric(float64((processCPU(b, o.VSwitchdPID())-vs).Microseconds())/1000/float64(b.N), "ovs-cpu-ms/op")
			b.ReportMetric(float64((rusageCPU(b, syscall.RUSAGE_CHILDREN)-kids).Microseconds())/1000/float64(b.N), "ofctl-cpu-ms/op")
		})
	}
}

// benchIdleResync times full resyncs of p with nothing changed.
func benchIdleResync(b *testing.B, p *Proxier, all bool) {
	p.recomputeAll = all
	computes := 0
	p.onCompute = func(types.NamespacedName) { computes++ }
	defer func() { p.onCompute = nil }()
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
	b.ReportMetric(float64(computes)/float64(b.N), "computed/op")
}

// BenchmarkOneEndpointChange10k measures the partial sync that follows one endpoint's readiness
// flipping in one Service's slice, at 10,000 ClusterIP Services × 10 endpoints (the tracker
// update is outside the timer); behind-resync is the same change arriving while a periodic full
// resync holds the sync goroutine: the time until it is installed is that resync plus the
// partial sync (recompute-all: the behaviour before input fingerprints).
func BenchmarkOneEndpointChange10k(b *testing.B) {
	for _, br := range scaleBridges() {
		b.Run(br.name, func(b *testing.B) { benchOneEndpointChange(b, br.new(), nil) })
	}
	for _, c := range []struct {
		name   string
		bridge func() Bridge
		all    bool
	}{
		{"behind-resync/recompute-all", func() Bridge { return openflowtest.NewFakeBridge() }, true},
		{"behind-resync/changed-only", func() Bridge { return openflowtest.NewFakeBridge() }, false},
		{"behind-resync/changed-only/null-bridge", func() Bridge { return nullBridge{} }, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			benchOneEndpointChange(b, c.bridge(), func(p *Proxier) {
				p.recomputeAll = c.all
				if err := p.SyncNow(context.Background(), true); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// benchOneEndpointChange times, per iteration, before (when set) and the partial sync that
// installs one endpoint change.
func benchOneEndpointChange(b *testing.B, bridge Bridge, before func(*Proxier)) {
	p := newScaleProxier(b, bridge)
	runtime.GC()
	b.ResetTimer()
	cpu0 := cpuNow(b)
	var worst time.Duration
	for i := 0; i < b.N; i++ {
		svc, pass := i%10000, i/10000
		b.StopTimer()
		old, cur := scaleSlice(svc, pass%2 == 0), scaleSlice(svc, pass%2 == 1)
		b.StartTimer()
		t0 := time.Now()
		p.Tracker().Endpoints.OnEndpointSliceUpdate(old, cur)
		if before != nil {
			before(p)
		}
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
