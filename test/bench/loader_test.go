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

// fastClient is a clientset for cfg allowing qps requests per second.
func fastClient(cfg *rest.Config, qps float32) (*kubernetes.Clientset, error) {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = qps, int(2*qps)
	return kubernetes.NewForConfig(c)
}

// addrAt is base + i.
func addrAt(base netip.Addr, i int) netip.Addr {
	b := base.As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += uint32(i)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

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

// load creates the namespace, n selector-less ClusterIP Services and one EndpointSlice of k
// ready endpoints for each, with workers parallel clients, printing progress every tenth.
func load(ctx context.Context, cs kubernetes.Interface, n, k, workers int, progress func(string, ...any)) ([]benchService, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNamespace}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating namespace %s: %w", benchNamespace, err)
	}
	out := make([]benchService, n)
	var next, done atomic.Int64
	var firstErr error
	var mu sync.Mutex
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				s, err := createOne(ctx, cs, i, k)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					next.Store(int64(n))
					return
				}
				out[i] = s
				if d := done.Add(1); d%int64(max(1, n/10)) == 0 {
					progress("loader: %d/%d Services with %d endpoints each (%v)", d, n, k, time.Since(start).Round(time.Second))
				}
			}
		}()
	}
	wg.Wait()
	return out, firstErr
}

func createOne(ctx context.Context, cs kubernetes.Interface, i, k int) (benchService, error) {
	name := fmt.Sprintf("svc-%05d", i)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: benchNamespace},
		Spec: corev1.ServiceSpec{
			Type:  corev1.ServiceTypeClusterIP,
			Ports: []corev1.ServicePort{{Name: "http", Port: servicePort, Protocol: corev1.ProtocolTCP}},
		},
	}
	got, err := cs.CoreV1().Services(benchNamespace).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		return benchService{}, fmt.Errorf("creating Service %s: %w", name, err)
	}
	sl, err := cs.DiscoveryV1().EndpointSlices(benchNamespace).Create(ctx, newSlice(name, i, k), metav1.CreateOptions{})
	if err != nil {
		return benchService{}, fmt.Errorf("creating EndpointSlice of %s: %w", name, err)
	}
	return benchService{Name: name, ClusterIP: got.Spec.ClusterIP, Slice: sl}, nil
}
