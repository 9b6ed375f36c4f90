package agent

import (
	"fmt"
	"net/netip"
	"runtime"
	"runtime/metrics"
	"slices"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// heapBenchServices is the size of the scale benchmark's measured point (test/bench,
// BENCH_SIZES=30000), each Service with one EndpointSlice of heapBenchEndpoints endpoints.
const (
	heapBenchServices  = 30000
	heapBenchEndpoints = 10
)

// BenchmarkInformerHeap30k reports what the agent's informer caches retain at 30,000 Services of
// one 10-endpoint EndpointSlice each, shaped as the scale benchmark's loader writes them
// (test/bench: storedService, newSlice): each object encoded with protobuf and decoded, as the
// informer receives it (every string its own allocation), passed through a transform and kept
// in a map by its key, as the informer's store keeps it. It reports the heap objects and bytes
// retained and what one forced collection of that heap costs (the runtime forces one every two
// minutes at rest: half the agent's idle CPU at 30k, docs/performance.md), for the trimmer
// without its sharing of repeated values ("plain": what the trimmer did before) and with it
// ("shared"), side by side. Run it with -benchtime 1x: one iteration builds 60,000 objects twice.
func BenchmarkInformerHeap30k(b *testing.B) {
	svcs, sliceObjs := encodedHeapBenchObjects(b)
	for _, v := range []struct {
		name      string
		transform func(*trimmer, any) any
	}{
		{"plain", (*trimmer).trimOnly},
		{"shared", func(t *trimmer, obj any) any { out, _ := t.transform(obj); return out }},
	} {
		b.Run(v.name, func(b *testing.B) {
			var m heapFigures
			for b.Loop() {
				m = measureInformerHeap(b, svcs, sliceObjs, v.transform)
			}
			b.ReportMetric(float64(m.objects), "heap-objects")
			b.ReportMetric(float64(m.bytes)/(1<<20), "heap-MB")
			b.ReportMetric(float64(m.scan)/(1<<20), "scan-heap-MB")
			b.ReportMetric(float64(m.gcCPU.Microseconds())/1000, "gc-cpu-ms")
			b.ReportMetric(float64(m.markCPU.Microseconds())/1000, "gc-mark-cpu-ms")
		})
	}
}

// heapFigures is what measureInformerHeap measured: objects and bytes retained by the caches,
// the runtime's scannable heap (go_gc_scan_heap_bytes), and the median CPU time of a forced
// collection (the process's, from getrusage, and the runtime's estimate of its mark phase).
type heapFigures struct {
	objects, bytes, scan uint64
	gcCPU, markCPU       time.Duration
}

// encodedObjects are protobuf-encoded objects in one buffer, so that the encoded form adds a
// single object to the heap measured.
type encodedObjects struct {
	buf  []byte
	ends []int
}

func (e *encodedObjects) add(b *testing.B, m interface{ Marshal() ([]byte, error) }) {
	raw, err := m.Marshal()
	if err != nil {
		b.Fatal(err)
	}
	e.buf = append(e.buf, raw...)
	e.ends = append(e.ends, len(e.buf))
}

func (e *encodedObjects) each(f func(raw []byte)) {
	start := 0
	for _, end := range e.ends {
		f(e.buf[start:end])
		start = end
	}
}

// encodedHeapBenchObjects encodes the Services and EndpointSlices as kube-apiserver stores them
// for the scale benchmark's loader: a selector-less single-stack ClusterIP Service with one TCP
// port "http" 80 and its allocation's defaults, and one slice of ready endpoints on port 8080.
func encodedHeapBenchObjects(b *testing.B) (svcs, sliceObjs *encodedObjects) {
	svcs, sliceObjs = &encodedObjects{}, &encodedObjects{}
	now := metav1.NewTime(time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC))
	single, cluster := v1.IPFamilyPolicySingleStack, v1.ServiceInternalTrafficPolicyCluster
	ready, port, proto, pname := true, int32(8080), v1.ProtocolTCP, "http"
	clusterIP, endpoint := netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("172.16.0.1")
	for i := range heapBenchServices {
		name, ip := fmt.Sprintf("svc-%05d", i), clusterIP.String()
		clusterIP = clusterIP.Next()
		svcs.add(b, &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "bench", CreationTimestamp: now, ResourceVersion: fmt.Sprint(1000 + 2*i),
				UID: types.UID(fmt.Sprintf("6e6e6e6e-0000-4000-8000-%012x", i))},
			Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip},
				IPFamilies: []v1.IPFamily{v1.IPv4Protocol}, IPFamilyPolicy: &single, InternalTrafficPolicy: &cluster,
				SessionAffinity: v1.ServiceAffinityNone,
				Ports:           []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(80)}}},
		})
		eps := make([]discovery.Endpoint, heapBenchEndpoints)
		for j := range eps {
			eps[j] = discovery.Endpoint{Addresses: []string{endpoint.String()}, Conditions: discovery.EndpointConditions{Ready: &ready}}
			endpoint = endpoint.Next()
		}
		sliceObjs.add(b, &discovery.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-1", Namespace: "bench", CreationTimestamp: now, ResourceVersion: fmt.Sprint(1001 + 2*i),
				UID: types.UID(fmt.Sprintf("5e5e5e5e-0000-4000-8000-%012x", i)), Generation: 1,
				Labels: map[string]string{discovery.LabelServiceName: name, discovery.LabelManagedBy: "bench.antrea-proxy.io"}},
			AddressType: discovery.AddressTypeIPv4, Endpoints: eps,
			Ports: []discovery.EndpointPort{{Name: &pname, Port: &port, Protocol: &proto}},
		})
	}
	return svcs, sliceObjs
}

// measureInformerHeap decodes every object, transforms it and keeps it in a store by its
// namespace/name key, then measures what the store retains and what a forced collection costs.
func measureInformerHeap(b *testing.B, svcs, sliceObjs *encodedObjects, transform func(*trimmer, any) any) heapFigures {
	before := settledMemStats()
	tr := newTrimmer()
	store := make(map[string]any, 2*heapBenchServices)
	svcs.each(func(raw []byte) {
		s := &v1.Service{}
		if err := s.Unmarshal(raw); err != nil {
			b.Fatal(err)
		}
		store["svc/"+s.Namespace+"/"+s.Name] = transform(tr, s)
	})
	sliceObjs.each(func(raw []byte) {
		s := &discovery.EndpointSlice{}
		if err := s.Unmarshal(raw); err != nil {
			b.Fatal(err)
		}
		store["slice/"+s.Namespace+"/"+s.Name] = transform(tr, s)
	})
	after := settledMemStats()
	var m heapFigures
	m.objects, m.bytes = after.HeapObjects-before.HeapObjects, after.HeapAlloc-before.HeapAlloc
	m.scan = readScanHeap()
	m.gcCPU, m.markCPU = forcedCollectionCPU(5)
	runtime.KeepAlive(store)
	return m
}

// settledMemStats collects twice (the second frees what the first's finalizers and cleanups
// left) and reads the memory statistics.
func settledMemStats() runtime.MemStats {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m
}

func readScanHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/scan/heap:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// forcedCollectionCPU runs n forced collections and returns the median of the process's CPU time
// (user and system) each took and of the runtime's estimate of each one's mark CPU.
func forcedCollectionCPU(n int) (total, mark time.Duration) {
	marks := []metrics.Sample{{Name: "/cpu/classes/gc/mark/assist:cpu-seconds"},
		{Name: "/cpu/classes/gc/mark/dedicated:cpu-seconds"}, {Name: "/cpu/classes/gc/mark/idle:cpu-seconds"}}
	markSeconds := func() float64 {
		metrics.Read(marks)
		return marks[0].Value.Float64() + marks[1].Value.Float64() + marks[2].Value.Float64()
	}
	totals, markTimes := make([]time.Duration, n), make([]time.Duration, n)
	for i := range n {
		m0, c0 := markSeconds(), processCPU()
		runtime.GC()
		totals[i], markTimes[i] = processCPU()-c0, time.Duration((markSeconds()-m0)*float64(time.Second))
	}
	slices.Sort(totals)
	slices.Sort(markTimes)
	return totals[n/2], markTimes[n/2]
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
