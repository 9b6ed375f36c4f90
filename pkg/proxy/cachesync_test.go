package proxy

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/observe"
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
	opts.MinSyncInterval = 10 * time.Millisecond
	p := runWithInformers(t, opts, b, cs)

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

// firstSync records the first successful sync's result.
type firstSync struct {
	mu  sync.Mutex
	res *observe.SyncResult
}

func (*firstSync) QueuedUpdate()        {}
func (*firstSync) NodeUpdated(*v1.Node) {}
func (f *firstSync) SyncDone(r observe.SyncResult) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.res == nil && r.Err == nil {
		f.res = &r
	}
}

func (f *firstSync) get() *observe.SyncResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.res
}

// TestFirstSyncHasTheWholeInitialList: the first sync starts only once the proxier's handlers
// have received every object of the initial lists (their registrations' HasSynced, not only the
// informers' caches): it installs every Service with its endpoint, so nothing is computed twice
// at start-up. (With a fake clientset the handlers keep up with the informers, so this checks
// the contract rather than catching a lagging handler.)
func TestFirstSyncHasTheWholeInitialList(t *testing.T) {
	const n = 3000
	objs := []runtime.Object{&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode}}}
	for i := range n {
		name := fmt.Sprintf("s%04d", i)
		objs = append(objs, makeService("ns1", name, fmt.Sprintf("10.96.%d.%d", i/200, i%200+1)),
			makeSlice("ns1", name, name+"-1", 8080, v1.ProtocolTCP, "http", ep{ip: fmt.Sprintf("10.10.%d.%d", i/200, i%200+1), node: testNode, ready: true}))
	}
	cs := fake.NewSimpleClientset(objs...)
	first := &firstSync{}
	opts := testOptions()
	opts.Observer = first
	runWithInformers(t, opts, nullBridge{}, cs)
	waitFor(t, 60*time.Second, "the first sync", func() bool { return first.get() != nil })
	res := first.get()
	withEndpoint := 0
	for _, s := range res.Services {
		if s != nil && s.Endpoints == 1 {
			withEndpoint++
		}
	}
	if withEndpoint != n {
		t.Fatalf("the first sync installed %d of %d Services with their endpoint (%d computed)", withEndpoint, n, len(res.Services))
	}
}

// runWithInformers runs a proxier with the real clock on informers of cs until the test ends.
func runWithInformers(t *testing.T, opts Options, b Bridge, cs *fake.Clientset) *Proxier {
	t.Helper()
	opts.Clock = nil
	p, err := New(opts, b)
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, p, cs)
	return p
}

// runUntilCleanup runs p on informers of cs until the test's clean-up, which stops it and waits
// for it to return; the context it runs in is returned.
func runUntilCleanup(t *testing.T, p *Proxier, cs *fake.Clientset) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, cs) }()
	t.Cleanup(func() { cancel(); <-done })
	return ctx
}
