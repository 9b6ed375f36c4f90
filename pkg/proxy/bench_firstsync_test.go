package proxy

import (
	"context"
	"runtime"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkFirstSync10k measures exactly the first full sync of a proxier whose trackers hold
// 10,000 ClusterIP Services × 10 endpoints, onto a bridge that keeps nothing (the proxier's own
// work: gather, plan, commit): wall time (ns/op), the CPU of every goroutine including the GC
// (cpu-ms/op), allocations, and the heap the proxier and its trackers retain afterwards
// (heap-MB, above the heap with the trackers fed). Feeding the trackers is outside the timer.
// parallel computes the Services on up to GOMAXPROCS goroutines (the default), serial on the
// sync goroutine only.
func BenchmarkFirstSync10k(b *testing.B) {
	for _, c := range []struct {
		name    string
		workers int
	}{{"parallel", 0}, {"serial", 1}} {
		b.Run(c.name, func(b *testing.B) { benchFirstSync(b, c.workers) })
	}
}

func benchFirstSync(b *testing.B, workers int) {
	b.ReportAllocs()
	var cpu time.Duration
	var heap uint64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		p, err := New(testOptions(), nullBridge{})
		if err != nil {
			b.Fatal(err)
		}
		p.computeWorkers = workers
		p.OnNodeUpdate(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode}, Status: v1.NodeStatus{
			Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.168.77.10"}}}})
		feed10k(p)
		before := heapInUse()
		b.StartTimer()
		cpu0 := cpuNow(b)
		if err := p.SyncNow(context.Background(), false); err != nil {
			b.Fatal(err)
		}
		cpu += cpuNow(b) - cpu0
		b.StopTimer()
		n := 0
		for _, r := range p.svcs {
			if r.status != nil {
				n++
			}
		}
		if n != 10000 {
			b.Fatalf("installed %d Services, want 10000", n)
		}
		heap += heapInUse() - before
		runtime.KeepAlive(p)
		b.StartTimer()
	}
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
	b.ReportMetric(float64(heap)/float64(b.N)/(1<<20), "heap-MB")
}
