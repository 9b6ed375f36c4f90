package tracker

import (
	"fmt"
	"runtime"
	"testing"

	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkEndpointsTrackerHeap10k reports the heap the endpoints tracker itself retains for
// 10,000 Services of one EndpointSlice each (the slices are built before and not counted):
// tracker-B/Service.
func BenchmarkEndpointsTrackerHeap10k(b *testing.B) {
	const n = 10000
	ss := make([]*discovery.EndpointSlice, n)
	for i := range ss {
		ss[i] = &discovery.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("svc-%05d-abcde", i),
				Labels: map[string]string{discovery.LabelServiceName: fmt.Sprintf("svc-%05d", i)}},
			AddressType: discovery.AddressTypeIPv4,
			Endpoints:   []discovery.Endpoint{{Addresses: []string{"10.0.0.1"}}},
		}
	}
	var perService float64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		tr := NewEndpointsChangeTracker(nil)
		for _, s := range ss {
			tr.OnEndpointSliceAdd(s)
		}
		tr.DrainDirty()
		runtime.GC()
		runtime.ReadMemStats(&after)
		perService = float64(after.HeapAlloc-before.HeapAlloc) / n
		runtime.KeepAlive(tr)
	}
	b.ReportMetric(perService, "tracker-B/Service")
}
