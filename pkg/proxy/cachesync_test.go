package proxy

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/openflowtest"
)

// TestNothingProgrammedBeforeCachesSync holds the EndpointSlice list back: while it is pending
// the proxier must not touch the bridge, even though Services are already known.
func TestNothingProgrammedBeforeCachesSync(t *testing.T) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode}}
	cs := fake.NewSimpleClientset(node, makeService("ns1", "web", "10.96.0.10"),
		makeSlice("ns1", "web", "web-1", 8080, v1.ProtocolTCP, "http", ep{ip: "10.10.1.5", node: testNode, ready: true}))
	release := make(chan struct{})
	cs.PrependReactor("list", "endpointslices", func(k8stesting.Action) (bool, runtime.Object, error) {
		<-release
		return false, nil, nil
	})
	b := openflowtest.NewFakeBridge()
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

	time.Sleep(300 * time.Millisecond) // give a wrongly eager proxier the chance to program
	if n := b.ApplyCount(); n != 0 {
		t.Fatalf("the bridge was programmed %d time(s) before the EndpointSlice cache synced", n)
	}
	close(release)
	waitFor(t, 10*time.Second, "the Service to be programmed after the caches synced", func() bool {
		st := p.Services()
		return len(st) == 1 && st[0].Ports[0].Buckets == 1
	})
}
