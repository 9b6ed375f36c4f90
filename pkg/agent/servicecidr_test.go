package agent

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// cidrSink records every set of ServiceCIDRs it receives.
type cidrSink struct {
	mu   sync.Mutex
	sets [][]netip.Prefix
}

func (s *cidrSink) SetServiceCIDRs(p []netip.Prefix) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sets = append(s.sets, slices.Clone(p))
}

func (s *cidrSink) last() ([]netip.Prefix, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.sets) == 0 {
		return nil, 0
	}
	return s.sets[len(s.sets)-1], len(s.sets)
}

func serviceCIDR(name string, cidrs ...string) *networkingv1.ServiceCIDR {
	return &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: cidrs}}
}

func servingServiceCIDRs(c *fake.Clientset) {
	c.Resources = []*metav1.APIResourceList{{GroupVersion: serviceCIDRGroupVersion,
		APIResources: []metav1.APIResource{{Name: serviceCIDRResource, Kind: "ServiceCIDR"}}}}
}

func TestWatchServiceCIDRs(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	client := fake.NewClientset(serviceCIDR("kubernetes", "10.96.0.0/16", "fd00:96::/112"))
	servingServiceCIDRs(client)
	factory := informers.NewSharedInformerFactory(client, 0)
	// Shutdown waits for the informers, which stop with ctx.
	defer func() { cancel(); factory.Shutdown() }()
	sink := &cidrSink{}
	ok, err := WatchServiceCIDRs(ctx, client, factory, sink)
	if err != nil || !ok {
		t.Fatalf("watchServiceCIDRs = %v, %v", ok, err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16"), netip.MustParsePrefix("fd00:96::/112")}
	if got, _ := sink.last(); !slices.Equal(got, want) {
		t.Fatalf("after the cache synced: %v, want %v", got, want)
	}
	extra := serviceCIDR("extra", "10.100.0.0/24")
	if _, err := client.NetworkingV1().ServiceCIDRs().Create(ctx, extra, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the added ServiceCIDR", func() bool { got, _ := sink.last(); return len(got) == 3 })
	if err := client.NetworkingV1().ServiceCIDRs().Delete(ctx, "extra", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the deleted ServiceCIDR gone", func() bool { got, _ := sink.last(); return slices.Equal(got, want) })
}

func TestWatchServiceCIDRsAbsent(t *testing.T) {
	for name, setup := range map[string]func(*fake.Clientset){
		"not in discovery": func(*fake.Clientset) {},
		"forbidden": func(c *fake.Clientset) {
			servingServiceCIDRs(c)
			c.PrependReactor("list", "servicecidrs", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "networking.k8s.io", Resource: "servicecidrs"}, "", nil)
			})
		},
	} {
		t.Run(name, func(t *testing.T) {
			client := fake.NewClientset(serviceCIDR("kubernetes", "10.96.0.0/16"))
			setup(client)
			factory := informers.NewSharedInformerFactory(client, 0)
			ctx, cancel := context.WithCancel(context.Background())
			defer func() { cancel(); factory.Shutdown() }()
			sink := &cidrSink{}
			ok, err := WatchServiceCIDRs(ctx, client, factory, sink)
			if ok || err != nil {
				t.Fatalf("watchServiceCIDRs = %v, %v; want the fallback", ok, err)
			}
			if _, n := sink.last(); n != 0 {
				t.Errorf("the sink got %d sets; want none", n)
			}
		})
	}
}

func TestServiceCIDRPrefixes(t *testing.T) {
	got := serviceCIDRPrefixes([]*networkingv1.ServiceCIDR{serviceCIDR("a", "10.96.0.1/16", "bogus"), serviceCIDR("b", "fd00::/108")})
	want := []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16"), netip.MustParsePrefix("fd00::/108")}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// waitFor polls cond until it holds or 10 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
