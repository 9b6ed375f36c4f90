package proxy

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/openflowtest"
)

// TestNothingProgrammedBeforeCachesSync holds the EndpointSlice list back: while it has not synced
// the proxier must not touch the bridge, even though the Service is already known (an eager
// proxier would program it without endpoints, i.e. reject its clients). Every bundle the
// bridge receives is checked against the moment the list was released, and the list is
// released only once the proxier's tracker holds the Service.
func TestNothingProgrammedBeforeCachesSync(t *testing.T) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode}}
	cs := fake.NewSimpleClientset(node, makeService("ns1", "web", "10.96.0.10"),
		makeSlice("ns1", "web", "web-1", 8080, v1.ProtocolTCP, "http", ep{ip: "10.10.1.5", node: testNode, ready: true}))
	// The list fails until the release (the reflector retries with backoff). It must not block:
	// the fake clientset holds its lock while a reactor runs, which would hold back the
	// Service list too.
	release := make(chan struct{})
	cs.PrependReactor("list", "endpointslices", func(k8stesting.Action) (bool, runtime.Object, error) {
		select {
		case <-release:
			return false, nil, nil
		default:
			return true, nil, errors.New("held back by the test")
		}
	})
	b := openflowtest.NewFakeBridge()
	var released, early atomic.Bool
	b.SetApplyHook(func([]openflow.Op) error {
		if !released.Load() {
			early.Store(true)
		}
		return nil
	})
	opts := testOptions()
	opts.Clock = nil
	opts.MinSyncInterval = 10 * time.Millisecond
	p, err := New(opts, b)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, cs) }()
	defer func() { cancel(); <-done }()

	waitFor(t, 10*time.Second, "the proxier's tracker to hold the Service (or a bundle before the release)", func() bool {
		return early.Load() || p.track.PendingServices().Has(types.NamespacedName{Namespace: "ns1", Name: "web"})
	})
	released.Store(true)
	close(release)
	waitFor(t, 10*time.Second, "the Service to be programmed after the caches synced", func() bool {
		st := p.Services()
		return len(st) == 1 && st[0].Ports[0].Buckets == 1
	})
	if early.Load() {
		t.Fatal("the bridge was programmed before the EndpointSlice cache synced")
	}
}
