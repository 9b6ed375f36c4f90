//go:build bench

package bench

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// benchNamespace holds the loader's objects.
const benchNamespace = "bench"

// endpointBase starts the loader's endpoint addresses (172.16.0.0/12 holds 1M of them);
// changeBase starts the addresses the one-endpoint changes bring in.
var (
	endpointBase = netip.MustParseAddr("172.16.0.1")
	changeBase   = netip.MustParseAddr("172.31.0.1")
)

const (
	servicePort  = 80
	endpointPort = 8080
)

// benchService is one Service the loader wrote.
type benchService struct {
	Name, ClusterIP string
	Slice           *discoveryv1.EndpointSlice
}

// fastClient is a protobuf clientset for cfg allowing qps requests per second (burst 2×qps).
func fastClient(cfg *rest.Config, qps int) (*kubernetes.Clientset, error) {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = float32(qps), 2*qps
	c.ContentType = "application/vnd.kubernetes.protobuf"
	c.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	return kubernetes.NewForConfig(c)
}

// addrAt is base + i.
func addrAt(base netip.Addr, i int) netip.Addr {
	b := base.As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += uint32(i)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// serviceName is Service i's name.
func serviceName(i int) string { return fmt.Sprintf("svc-%05d", i) }

// newSlice is Service i's EndpointSlice with k ready endpoints.
func newSlice(name string, i, k int) *discoveryv1.EndpointSlice {
	ready := true
	eps := make([]discoveryv1.Endpoint, k)
	for j := range eps {
		eps[j] = discoveryv1.Endpoint{
			Addresses:  []string{addrAt(endpointBase, i*k+j).String()},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready},
		}
	}
	port, proto, pname := int32(endpointPort), corev1.ProtocolTCP, "http"
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-1", Namespace: benchNamespace, Labels: map[string]string{
			discoveryv1.LabelServiceName: name,
			discoveryv1.LabelManagedBy:   "bench.antrea-proxy.io",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   eps,
		Ports:       []discoveryv1.EndpointPort{{Name: &pname, Port: &port, Protocol: &proto}},
	}
}

// newService is Service i: selector-less, ClusterIP, one TCP port.
func newService(name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: benchNamespace},
		Spec: corev1.ServiceSpec{
			Type:  corev1.ServiceTypeClusterIP,
			Ports: []corev1.ServicePort{{Name: "http", Port: servicePort, Protocol: corev1.ProtocolTCP}},
		},
	}
}

// loadStats is what the loader measured: its duration and, per tenth of the Services, the wall
// time and the control plane's CPU time per Service (the growth of the apiserver's cost per
// Service with the number already stored shows there).
type loadStats struct {
	Took   time.Duration
	Tenths []loadTenth
	// CPU is the control plane's CPU seconds over the whole load, by component.
	CPU map[string]float64
}

// loadTenth is one tenth of the load.
type loadTenth struct {
	Services int
	// WallMS and CPUMS are milliseconds per Service in this tenth (CPUMS: by component).
	WallMS float64
	CPUMS  map[string]float64
}

// load creates the namespace, n selector-less ClusterIP Services and one EndpointSlice of k
// ready endpoints for each, in two parallel streams (Services, EndpointSlices: a slice does
// not need its Service) of workers/2 clients each, printing progress every 10 s and recording
// the cost of every tenth of the Services.
func load(ctx context.Context, cs kubernetes.Interface, n, k, workers int, cp *cpuWatch, progress func(string, ...any)) ([]benchService, loadStats, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNamespace}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return nil, loadStats{}, fmt.Errorf("creating namespace %s: %w", benchNamespace, err)
	}
	out := make([]benchService, n)
	var svcDone, sliceDone atomic.Int64
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	start := time.Now()
	stats := loadStats{}
	cpu0 := cp.sample()
	tenths := newTenthRecorder(n, start, cp)
	var wg sync.WaitGroup
	stream := func(what string, done *atomic.Int64, create func(i int) error) {
		var next atomic.Int64
		for w := 0; w < max(1, workers/2); w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					i := int(next.Add(1) - 1)
					if i >= n {
						return
					}
					if err := create(i); err != nil {
						cancel(fmt.Errorf("creating %s %d: %w", what, i, err))
						return
					}
					if d := done.Add(1); what == "Service" {
						tenths.done(int(d))
					}
				}
			}()
		}
	}
	stream("Service", &svcDone, func(i int) error {
		got, err := cs.CoreV1().Services(benchNamespace).Create(ctx, newService(serviceName(i)), metav1.CreateOptions{})
		if err == nil {
			out[i].Name, out[i].ClusterIP = got.Name, got.Spec.ClusterIP
		}
		return err
	})
	stream("EndpointSlice", &sliceDone, func(i int) error {
		sl, err := cs.DiscoveryV1().EndpointSlices(benchNamespace).Create(ctx, newSlice(serviceName(i), i, k), metav1.CreateOptions{})
		if err == nil {
			out[i].Slice = sl
		}
		return err
	})
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for running := true; running; {
		select {
		case <-finished:
			running = false
		case <-tick.C:
			progress("loader: %d/%d Services, %d/%d EndpointSlices of %d endpoints (%v; control plane CPU so far: %s)",
				svcDone.Load(), n, sliceDone.Load(), n, k, time.Since(start).Round(time.Second), formatCPU(cp.sample().since(cpu0)))
		}
	}
	stats.Took = time.Since(start)
	stats.Tenths = tenths.result()
	stats.CPU = cp.sample().since(cpu0)
	if err := context.Cause(ctx); err != nil && err != context.Canceled {
		return out, stats, err
	}
	return out, stats, nil
}

// tenthRecorder samples the wall clock and the control plane's CPU each time another tenth of
// the Services is created.
type tenthRecorder struct {
	mu      sync.Mutex
	n       int
	cp      *cpuWatch
	last    time.Time
	lastCPU cpuSample
	lastN   int
	out     []loadTenth
}

func newTenthRecorder(n int, start time.Time, cp *cpuWatch) *tenthRecorder {
	return &tenthRecorder{n: n, cp: cp, last: start, lastCPU: cp.sample()}
}

// done records that d Services exist.
func (r *tenthRecorder) done(d int) {
	step := max(1, r.n/10)
	if d%step != 0 && d != r.n {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if d <= r.lastN {
		return
	}
	now, cpu := time.Now(), r.cp.sample()
	per := float64(d - r.lastN)
	t := loadTenth{Services: d, WallMS: now.Sub(r.last).Seconds() * 1000 / per, CPUMS: map[string]float64{}}
	for name, s := range cpu.since(r.lastCPU) {
		t.CPUMS[name] = s * 1000 / per
	}
	r.out = append(r.out, t)
	r.last, r.lastCPU, r.lastN = now, cpu, d
}

func (r *tenthRecorder) result() []loadTenth {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]loadTenth(nil), r.out...)
}
