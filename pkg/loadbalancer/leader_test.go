package loadbalancer

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"
)

func TestRunLeaderElectedOneWriterAtATime(t *testing.T) {
	client := fake.NewClientset()
	var active, maxActive atomic.Int32
	leaders := make(chan string, 4)
	run := func(id string) func(context.Context) error {
		return func(ctx context.Context) error {
			n := active.Add(1)
			for {
				m := maxActive.Load()
				if n <= m || maxActive.CompareAndSwap(m, n) {
					break
				}
			}
			leaders <- id
			<-ctx.Done()
			active.Add(-1)
			return nil
		}
	}
	status := map[string]*LeaderStatus{"a": {}, "b": {}}
	le := func(id string) LeaderElection {
		return LeaderElection{Namespace: "kube-system", Name: "lb", Identity: id,
			LeaseDuration: time.Second, RenewDeadline: 500 * time.Millisecond, RetryPeriod: 50 * time.Millisecond,
			Status: status[id]}
	}
	ctxs := map[string]context.CancelFunc{}
	results := map[string]chan error{}
	var wg sync.WaitGroup
	for _, id := range []string{"a", "b"} {
		ctx, cancel := context.WithCancel(context.Background())
		ctxs[id] = cancel
		result := make(chan error, 1)
		results[id] = result
		wg.Add(1)
		go func() {
			defer wg.Done()
			result <- RunLeaderElected(ctx, client, le(id), run(id))
		}()
	}
	t.Cleanup(func() {
		for _, c := range ctxs {
			c()
		}
		wg.Wait()
	})
	var first string
	select {
	case first = <-leaders:
	case <-time.After(5 * time.Second):
		t.Fatal("no replica became leader")
	}
	second := map[string]string{"a": "b", "b": "a"}[first]
	require.True(t, status[first].Leading())
	require.False(t, status[second].Leading(), "the standby does not report leading")
	// The other replica stays a follower while the leader renews.
	select {
	case id := <-leaders:
		t.Fatalf("%s led while %s held the Lease", id, first)
	case <-time.After(700 * time.Millisecond):
	}
	// The leader stops and releases the Lease: the other one takes over.
	ctxs[first]()
	require.NoError(t, <-results[first])
	require.False(t, status[first].Leading(), "a replica that stopped reports it")
	select {
	case id := <-leaders:
		require.Equal(t, second, id)
	case <-time.After(5 * time.Second):
		t.Fatal("the second replica did not take over")
	}
	require.True(t, status[second].Leading())
	require.Equal(t, int32(1), maxActive.Load(), "never two leaders at once")
}
