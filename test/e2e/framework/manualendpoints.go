package framework

import (
	"context"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// This file holds the large Services of the self-healing tests: a Service without a selector
// whose EndpointSlices (of up to 1,000 endpoints each, the API's limit) the test writes itself,
// with addresses that need not exist.

// EndpointSliceSize is the most endpoints the API accepts in one EndpointSlice.
const EndpointSliceSize = 1000

// manualSliceManager is the endpointslice.kubernetes.io/managed-by label of the slices the tests
// write, so that the endpointslice controller leaves them alone.
const manualSliceManager = "e2e.antrea-proxy.io"

// ManualService is a ClusterIP Service without a selector (TCP port 80 to EchoPort) whose
// endpoints the test sets through SetEndpoints.
type ManualService struct {
	s *Sandbox
	// Service is the Service as the API server created it.
	Service *corev1.Service
	// Addrs are the endpoint addresses last set.
	Addrs  []string
	slices int
}

// CreateManualService creates the Service namespace/name and its EndpointSlices listing addrs
// (all ready), EndpointSliceSize per slice.
func (s *Sandbox) CreateManualService(ctx context.Context, namespace, name string, addrs []string) (*ManualService, error) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
			{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(EchoPort)},
		}},
	}
	got, err := s.CP.Client.CoreV1().Services(namespace).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating Service %s/%s: %w", namespace, name, err)
	}
	m := &ManualService{s: s, Service: got}
	return m, m.SetEndpoints(ctx, addrs)
}

// sliceName is the name of the Service's i-th EndpointSlice.
func (m *ManualService) sliceName(i int) string { return fmt.Sprintf("%s-e2e-%d", m.Service.Name, i) }

// SetEndpoints makes the Service's EndpointSlices list exactly addrs (all ready), in order,
// EndpointSliceSize per slice: slices are created, updated or deleted as needed.
func (m *ManualService) SetEndpoints(ctx context.Context, addrs []string) error {
	cs := m.s.CP.Client.DiscoveryV1().EndpointSlices(m.Service.Namespace)
	want := (len(addrs) + EndpointSliceSize - 1) / EndpointSliceSize
	for i := 0; i < want; i++ {
		chunk := addrs[i*EndpointSliceSize : min(len(addrs), (i+1)*EndpointSliceSize)]
		sl := m.slice(i, chunk)
		cur, err := cs.Get(ctx, sl.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = cs.Create(ctx, sl, metav1.CreateOptions{})
		case err == nil:
			sl.ResourceVersion = cur.ResourceVersion
			_, err = cs.Update(ctx, sl, metav1.UpdateOptions{})
		}
		if err != nil {
			return fmt.Errorf("writing EndpointSlice %s/%s (%d endpoints): %w", sl.Namespace, sl.Name, len(chunk), err)
		}
	}
	for i := want; i < m.slices; i++ {
		if err := cs.Delete(ctx, m.sliceName(i), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting EndpointSlice %s/%s: %w", m.Service.Namespace, m.sliceName(i), err)
		}
	}
	m.slices, m.Addrs = want, append([]string(nil), addrs...)
	return nil
}

func (m *ManualService) slice(i int, addrs []string) *discoveryv1.EndpointSlice {
	ready := true
	eps := make([]discoveryv1.Endpoint, len(addrs))
	for j, a := range addrs {
		eps[j] = discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}
	}
	portName, port, proto := "tcp", int32(EchoPort), corev1.ProtocolTCP
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: m.Service.Namespace, Name: m.sliceName(i),
			Labels: map[string]string{
				discoveryv1.LabelServiceName: m.Service.Name,
				discoveryv1.LabelManagedBy:   manualSliceManager,
			},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   eps,
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port, Protocol: &proto}},
	}
}

// UnusedPodAddrs returns n consecutive IPv4 addresses, starting offset addresses into the upper
// half of the first cluster CIDR: pod addresses no node has been given (nodeipam allocates
// podCIDRs from the bottom), so nothing answers on them.
func (s *Sandbox) UnusedPodAddrs(n, offset int) ([]string, error) {
	cidrs := s.CP.ClusterCIDRs()
	if len(cidrs) == 0 {
		return nil, fmt.Errorf("the sandbox has no cluster CIDR")
	}
	cluster, err := netip.ParsePrefix(cidrs[0])
	if err != nil || !cluster.Addr().Is4() || cluster.Bits() > 20 {
		return nil, fmt.Errorf("cluster CIDR %q: want an IPv4 prefix of at most 20 bits", cidrs[0])
	}
	half := uint32(1) << (31 - cluster.Bits())
	if uint32(offset+n) > half {
		return nil, fmt.Errorf("%d addresses from offset %d do not fit into the upper half of %s", n, offset, cluster)
	}
	base := cluster.Masked().Addr().As4()
	first := (uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])) + half + uint32(offset)
	out := make([]string, n)
	for i := range out {
		v := first + uint32(i)
		a := netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
		for _, node := range s.Nodes {
			if p, err := netip.ParsePrefix(node.PodCIDR); err == nil && p.Contains(a) {
				return nil, fmt.Errorf("address %s is in %s's podCIDR %s", a, node.Name, p)
			}
		}
		out[i] = a.String()
	}
	return out, nil
}
