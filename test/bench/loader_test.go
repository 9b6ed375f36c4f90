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
// changeBase starts the addresses the one-endpoint changes bring in (outside that range, which
// 100k Services × 10 endpoints fill).
var (
	endpointBase = netip.MustParseAddr("172.16.0.1")
	changeBase   = netip.MustParseAddr("100.64.0.1")
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
	// Loader is "api" or "etcd" (config.Loader).
	Loader string `json:",omitempty"`
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
//
// With an etcd writer (the etcd loader, see etcdload_test.go) the Services and their IPAddress
// objects are written into etcd instead, with ClusterIPs of serviceCIDR no Service holds yet;
// the EndpointSlices still go through the API.
func load(ctx context.Context, cs kubernetes.Interface, lo loadOptions, cp *cpuWatch, progress func(string, ...any)) ([]benchService, loadStats, error) {
	n, k, workers := lo.N, lo.K, lo.Workers
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNamespace}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return nil, loadStats{}, fmt.Errorf("creating namespace %s: %w", benchNamespace, err)
	}
	out := make([]benchService, n)
	var svcDone, sliceDone atomic.Int64
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	start := time.Now()
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
	if lo.Etcd != nil {
		ips, err := clusterIPsFor(ctx, cs, lo.ServiceCIDR, n)
		if err != nil {
			return nil, loadStats{}, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := writeServicesToEtcd(ctx, lo.Etcd, ips, max(1, workers/2), out, func() error { return waitIPAddresses(ctx, cs, ips) }, func(d int) {
				svcDone.Store(int64(d))
				tenths.done(d)
			})
			if err == nil {
				err = readBack(ctx, cs, out[0])
			}
			if err != nil {
				cancel(fmt.Errorf("writing Services into etcd: %w", err))
			}
		}()
	} else {
		streamServices(stream, cs, out, &svcDone, ctx)
	}
	stream("EndpointSlice", &sliceDone, func(i int) error {
		sl, err := cs.DiscoveryV1().EndpointSlices(benchNamespace).Create(ctx, newSlice(serviceName(i), i, k), metav1.CreateOptions{})
		if err == nil {
			out[i].Slice = sl
		}
		return err
	})
	return waitLoaded(ctx, &wg, start, cpu0, cp, tenths, &svcDone, &sliceDone, lo, out, progress)
}

// loadOptions is what load writes: N Services of K endpoints, from Workers parallel clients;
// Etcd, when set, writes the Services (ClusterIPs from ServiceCIDR) straight into etcd.
type loadOptions struct {
	N, K, Workers int
	Etcd          *etcdWriter
	ServiceCIDR   netip.Prefix
}

// clusterIPsFor picks n ClusterIPs of cidr that no existing Service holds.
func clusterIPsFor(ctx context.Context, cs kubernetes.Interface, cidr netip.Prefix, n int) ([]netip.Addr, error) {
	list, err := cs.CoreV1().Services(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing the existing Services: %w", err)
	}
	taken := map[string]bool{}
	for _, s := range list.Items {
		for _, ip := range s.Spec.ClusterIPs {
			taken[ip] = true
		}
	}
	return freeClusterIPs(cidr, taken, n)
}

// waitIPAddresses polls kube-apiserver's cache (a list at resourceVersion 0) every second until
// it holds an IPAddress object for every address of ips, at most 5 minutes (a list of 100,000
// costs kube-apiserver a fraction of a second: not polled faster).
func waitIPAddresses(ctx context.Context, cs kubernetes.Interface, ips []netip.Addr) error {
	want := map[string]bool{}
	for _, ip := range ips {
		want[ip.String()] = true
	}
	seen := 0
	err := pollUntil(5*time.Minute, time.Second, func() (bool, string) {
		list, err := cs.NetworkingV1().IPAddresses().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, err.Error()
		}
		seen = 0
		for _, a := range list.Items {
			if want[a.Name] {
				seen++
			}
		}
		return seen == len(want), fmt.Sprintf("%d of %d IPAddress objects in kube-apiserver's cache", seen, len(want))
	})
	if err != nil {
		return fmt.Errorf("waiting for the IPAddress objects: %w", err)
	}
	return nil
}

// readBack reads a Service the etcd loader wrote, and its IPAddress, through kube-apiserver:
// the objects are where kube-apiserver keeps them and it can decode them.
func readBack(ctx context.Context, cs kubernetes.Interface, sv benchService) error {
	got, err := cs.CoreV1().Services(benchNamespace).Get(ctx, sv.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading Service %s back through kube-apiserver: %w", sv.Name, err)
	}
	if got.Spec.ClusterIP != sv.ClusterIP {
		return fmt.Errorf("Service %s read back with ClusterIP %q, written with %q", sv.Name, got.Spec.ClusterIP, sv.ClusterIP)
	}
	ip, err := cs.NetworkingV1().IPAddresses().Get(ctx, sv.ClusterIP, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading IPAddress %s back through kube-apiserver: %w", sv.ClusterIP, err)
	}
	if ref := ip.Spec.ParentRef; ref == nil || ref.Name != sv.Name {
		return fmt.Errorf("IPAddress %s read back with parent %+v", sv.ClusterIP, ip.Spec.ParentRef)
	}
	return nil
}

// streamServices creates the Services through the API (kube-apiserver allocates their
// ClusterIPs).
func streamServices(stream func(string, *atomic.Int64, func(int) error), cs kubernetes.Interface, out []benchService, done *atomic.Int64, ctx context.Context) {
	stream("Service", done, func(i int) error {
		got, err := cs.CoreV1().Services(benchNamespace).Create(ctx, newService(serviceName(i)), metav1.CreateOptions{})
		if err == nil {
			out[i].Name, out[i].ClusterIP = got.Name, got.Spec.ClusterIP
		}
		return err
	})
}

// waitLoaded waits for the load's writers, printing progress every 10 s, and returns its
// figures.
func waitLoaded(ctx context.Context, wg *sync.WaitGroup, start time.Time, cpu0 cpuSample, cp *cpuWatch, tenths *tenthRecorder,
	svcDone, sliceDone *atomic.Int64, lo loadOptions, out []benchService, progress func(string, ...any)) ([]benchService, loadStats, error) {
	n, k := lo.N, lo.K
	stats := loadStats{}
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

// done records that d Services exist (d grows; a writer may report it in steps).
func (r *tenthRecorder) done(d int) {
	step := max(1, r.n/10)
	r.mu.Lock()
	defer r.mu.Unlock()
	if d < (r.lastN/step+1)*step && d != r.n {
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
