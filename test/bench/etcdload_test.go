//go:build bench

package bench

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
)

// The etcd loader writes Services and their IPAddress objects straight into kube-apiserver's
// etcd, as kube-apiserver itself stores them (protobuf, under its key layout), and leaves the
// EndpointSlices to the API. Why: kube-apiserver v1.37's ClusterIP allocator lists every
// IPAddress object twice for each Service it creates (ipallocator.Allocator.Used and Free,
// called to update its metrics), so creating Services through the API costs O(Services
// stored) each and the load grows quadratically (30k Services took 12 min and 827 s of
// kube-apiserver CPU; 100k would take hours on two cores). kube-apiserver's watch cache reads
// the writes from etcd like any other, so the proxies list and watch them as usual.

// Where kube-apiserver keeps the objects in etcd (its default "/registry" prefix).
const (
	etcdServicePrefix   = "/registry/services/specs/"
	etcdIPAddressPrefix = "/registry/ipaddresses/"
	// etcdTxnOps is how many puts one transaction carries (etcd's --max-txn-ops is 128).
	etcdTxnOps = 128
)

// ipAllocatorManager is the managed-by label kube-apiserver's ClusterIP allocator puts on the
// IPAddress objects it creates (its repair loop checks that every ClusterIP has one).
const ipAllocatorManager = "ipallocator.k8s.io"

// etcdWriter puts objects into etcd through its JSON gateway (/v3/kv/txn), in transactions.
type etcdWriter struct {
	url    string
	client *http.Client
	codec  runtime.Encoder
}

func newEtcdWriter(url string) *etcdWriter {
	return &etcdWriter{url: url, client: &http.Client{Timeout: time.Minute},
		codec: protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)}
}

// kv is one put.
type kv struct{ Key, Value []byte }

// encode is obj as kube-apiserver stores it: the protobuf envelope ("k8s\x00" and
// runtime.Unknown) of its versioned form.
func (w *etcdWriter) encode(obj runtime.Object) ([]byte, error) {
	var b bytes.Buffer
	if err := w.codec.Encode(obj, &b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// txn puts every kv of puts in one transaction.
func (w *etcdWriter) txn(ctx context.Context, puts []kv) error {
	type put struct {
		Key   string `json:"key"`
		Value string `json:"value"`
	}
	type op struct {
		RequestPut put `json:"request_put"`
	}
	body := struct {
		Success []op `json:"success"`
	}{}
	for _, p := range puts {
		body.Success = append(body.Success, op{put{base64.StdEncoding.EncodeToString(p.Key), base64.StdEncoding.EncodeToString(p.Value)}})
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url+"/v3/kv/txn", bytes.NewReader(raw))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := w.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("etcd txn: reading the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("etcd txn: %s: %.500s", resp.Status, out)
	}
	var r struct {
		Succeeded bool `json:"succeeded"`
	}
	if err := json.Unmarshal(out, &r); err != nil || !r.Succeeded {
		return fmt.Errorf("etcd txn did not succeed (%v): %.500s", err, out)
	}
	return nil
}

// storedService is Service name with ClusterIP ip as kube-apiserver would store it after
// defaulting and allocation (newService's spec).
func storedService(name string, ip netip.Addr, now metav1.Time) *corev1.Service {
	svc := newService(name)
	svc.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}
	svc.UID = types.UID(fmt.Sprintf("6e6e6e6e-0000-4000-8000-%012x", addrUint(ip)))
	svc.CreationTimestamp = now
	single, cluster, none := corev1.IPFamilyPolicySingleStack, corev1.ServiceInternalTrafficPolicyCluster, corev1.ServiceAffinityNone
	svc.Spec.ClusterIP, svc.Spec.ClusterIPs = ip.String(), []string{ip.String()}
	svc.Spec.IPFamilies, svc.Spec.IPFamilyPolicy = []corev1.IPFamily{corev1.IPv4Protocol}, &single
	svc.Spec.InternalTrafficPolicy, svc.Spec.SessionAffinity = &cluster, none
	for i := range svc.Spec.Ports {
		svc.Spec.Ports[i].TargetPort.IntVal = svc.Spec.Ports[i].Port
	}
	return svc
}

// storedIPAddress is the IPAddress object kube-apiserver's allocator keeps for a ClusterIP.
func storedIPAddress(svc *corev1.Service, now metav1.Time) *networkingv1.IPAddress {
	return &networkingv1.IPAddress{
		TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "IPAddress"},
		ObjectMeta: metav1.ObjectMeta{Name: svc.Spec.ClusterIP, CreationTimestamp: now,
			UID: types.UID(fmt.Sprintf("1b1b1b1b-0000-4000-8000-%012x", addrUint(netip.MustParseAddr(svc.Spec.ClusterIP)))),
			Labels: map[string]string{
				networkingv1.LabelIPAddressFamily: string(corev1.IPv4Protocol),
				networkingv1.LabelManagedBy:       ipAllocatorManager,
			}},
		Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Resource: "services", Namespace: svc.Namespace, Name: svc.Name}},
	}
}

// addrUint is an IPv4 address as a number.
func addrUint(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// writeServicesToEtcd writes n Services (serviceName(i), ClusterIP ips[i]) and their IPAddress
// objects into etcd, from workers goroutines in transactions of etcdTxnOps puts: every
// IPAddress first, then (once ipsSeen says kube-apiserver's cache holds them all) the Services,
// so that kube-apiserver's ClusterIP repair loop finds a Service's IPAddress when it sees the
// Service (it would otherwise try to create it again and record a warning Event). done is
// called with the Services written so far.
func writeServicesToEtcd(ctx context.Context, w *etcdWriter, ips []netip.Addr, workers int, out []benchService, ipsSeen func() error, done func(int)) error {
	now := metav1.NewTime(time.Now().UTC().Truncate(time.Second))
	svcs := make([]*corev1.Service, len(ips))
	for i, ip := range ips {
		svcs[i] = storedService(serviceName(i), ip, now)
		out[i].Name, out[i].ClusterIP = svcs[i].Name, svcs[i].Spec.ClusterIP
	}
	ipAddress := func(i int) (string, runtime.Object) {
		return etcdIPAddressPrefix + svcs[i].Spec.ClusterIP, storedIPAddress(svcs[i], now)
	}
	service := func(i int) (string, runtime.Object) {
		return etcdServicePrefix + benchNamespace + "/" + svcs[i].Name, svcs[i]
	}
	if err := w.putAll(ctx, len(ips), workers, ipAddress, func(int) {}); err != nil {
		return fmt.Errorf("writing the IPAddress objects: %w", err)
	}
	if err := ipsSeen(); err != nil {
		return err
	}
	return w.putAll(ctx, len(ips), workers, service, done)
}

// putAll puts item(0) … item(n-1) (key, object) from workers goroutines, etcdTxnOps per
// transaction; done is called with the count written so far after each transaction.
func (w *etcdWriter) putAll(ctx context.Context, n, workers int, item func(int) (string, runtime.Object), done func(int)) error {
	batches := make(chan int)
	errs := make(chan error, workers)
	var mu sync.Mutex
	written := 0
	var wg sync.WaitGroup
	for range max(1, workers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for first := range batches {
				puts := make([]kv, 0, etcdTxnOps)
				for i := first; i < min(n, first+etcdTxnOps); i++ {
					key, obj := item(i)
					v, err := w.encode(obj)
					if err != nil {
						errs <- fmt.Errorf("encoding %s: %w", key, err)
						return
					}
					puts = append(puts, kv{[]byte(key), v})
				}
				if err := w.txn(ctx, puts); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				written += len(puts)
				d := written
				mu.Unlock()
				done(d)
			}
		}()
	}
	var err error
feed:
	for first := 0; first < n; first += etcdTxnOps {
		select {
		case batches <- first:
		case err = <-errs:
			break feed
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(batches)
	wg.Wait()
	if err != nil {
		return err
	}
	select {
	case err = <-errs:
		return err
	default:
		return nil
	}
}

// freeClusterIPs returns n addresses of cidr that no Service of taken holds, from the 256th of
// the range on (the first ones hold the control plane's own Services).
func freeClusterIPs(cidr netip.Prefix, taken map[string]bool, n int) ([]netip.Addr, error) {
	out := make([]netip.Addr, 0, n)
	for a := addrAt(cidr.Masked().Addr(), 256); len(out) < n; a = a.Next() {
		if !cidr.Contains(a) || !a.Next().IsValid() {
			return nil, fmt.Errorf("the Service CIDR %s holds fewer than %d free addresses", cidr, n)
		}
		if !taken[a.String()] && cidr.Contains(a.Next()) {
			out = append(out, a)
		}
	}
	return out, nil
}
