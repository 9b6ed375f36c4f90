package agent

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/antrea-proxy/antrea-proxy/pkg/config"
	"github.com/antrea-proxy/antrea-proxy/pkg/lbapi"
)

// TestAnnouncerLease: the Lease is created and renewed while the agent is healthy; the node
// may announce only within the Lease's duration after the last renewal (an unhealthy agent, or
// one cut off from the API server, stops claiming its addresses); release writes no holder and
// ends renewals.
func TestAnnouncerLease(t *testing.T) {
	client := fake.NewClientset()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var healthy atomic.Bool
	healthy.Store(true)
	cfg := config.AnnouncerConfig{LeaseDuration: config.Duration{Duration: 2 * time.Second}, RenewInterval: config.Duration{Duration: 500 * time.Millisecond}, IdleRenewInterval: &config.Duration{}}
	leases := client.CoordinationV1().Leases("kube-system")
	l := NewAnnouncerLease(leases, "n1", cfg, healthy.Load, clk)
	ctx := context.Background()
	require.False(t, l.Valid(), "never renewed")

	require.NoError(t, l.write(ctx, true))
	got, err := leases.Get(ctx, lbapi.AnnouncerLeaseName("n1"), metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "n1", got.Labels[lbapi.LabelAnnouncer])
	require.Equal(t, "n1", *got.Spec.HolderIdentity)
	require.Equal(t, int32(2), *got.Spec.LeaseDurationSeconds)
	require.True(t, l.Valid())

	clk.Step(1900 * time.Millisecond)
	require.True(t, l.Valid(), "within the duration")
	clk.Step(200 * time.Millisecond)
	require.False(t, l.Valid(), "2 s after the last renewal the node stops announcing")
	require.NoError(t, l.write(ctx, true))
	require.True(t, l.Valid(), "a renewal makes it valid again")

	require.NoError(t, l.Release(ctx))
	got, err = leases.Get(ctx, lbapi.AnnouncerLeaseName("n1"), metav1.GetOptions{})
	require.NoError(t, err)
	require.Nil(t, got.Spec.HolderIdentity, "a released Lease has no holder")
	require.False(t, l.Valid())
	require.NoError(t, l.write(ctx, true))
	require.False(t, l.Valid(), "no renewal after release")
	got, _ = leases.Get(ctx, lbapi.AnnouncerLeaseName("n1"), metav1.GetOptions{})
	require.Nil(t, got.Spec.HolderIdentity)
}

// TestAnnouncerLeaseRunsOnlyWhileHealthy: the renewal loop writes only while healthy.
func TestAnnouncerLeaseRunsOnlyWhileHealthy(t *testing.T) {
	client := fake.NewClientset()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var healthy atomic.Bool
	cfg := config.AnnouncerConfig{LeaseDuration: config.Duration{Duration: 2 * time.Second}, RenewInterval: config.Duration{Duration: 500 * time.Millisecond}, IdleRenewInterval: &config.Duration{}}
	l := NewAnnouncerLease(client.CoordinationV1().Leases("kube-system"), "n1", cfg, healthy.Load, clk)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	require.Eventually(t, clk.HasWaiters, 5*time.Second, time.Millisecond)
	require.False(t, l.Valid(), "an unhealthy agent does not renew")
	healthy.Store(true)
	clk.Step(500 * time.Millisecond)
	require.Eventually(t, l.Valid, 5*time.Second, time.Millisecond, "the next tick renews once healthy")
}

// TestHandOver: a stopping agent waits until no Service names it as an announcer.
func TestHandOver(t *testing.T) {
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web",
		Annotations: map[string]string{lbapi.AnnotationAnnouncingNode: "10.0.0.1=n1"}}}
	client := fake.NewClientset(svc)
	svcs := client.CoreV1().Services(metav1.NamespaceAll)
	took, done := HandOver(svcs, "n2", time.Second, clocktesting.NewFakeClock(time.Now()))
	require.True(t, done, "n2 announces nothing")
	require.Zero(t, took)
	go func() {
		moved := svc.DeepCopy()
		moved.Annotations[lbapi.AnnotationAnnouncingNode] = "10.0.0.1=n2"
		_, _ = client.CoreV1().Services("ns").Update(context.Background(), moved, metav1.UpdateOptions{})
	}()
	_, done = HandOver(svcs, "n1", 5*time.Second, clock.RealClock{})
	require.True(t, done, "n1's address moved to n2")
}

// TestAnnouncerLeaseRenewalIsOneUpdate: a renewal updates the Lease the last write left (one
// call), and falls back to a get when that update conflicts.
func TestAnnouncerLeaseRenewalIsOneUpdate(t *testing.T) {
	client := fake.NewClientset()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := config.AnnouncerConfig{LeaseDuration: config.Duration{Duration: 2 * time.Second}, RenewInterval: config.Duration{Duration: 500 * time.Millisecond}, IdleRenewInterval: &config.Duration{}}
	l := NewAnnouncerLease(client.CoordinationV1().Leases("kube-system"), "n1", cfg, func() bool { return true }, clk)
	ctx := context.Background()
	verbs := func() []string {
		var out []string
		for _, a := range client.Actions() {
			out = append(out, a.GetVerb())
		}
		client.ClearActions()
		return out
	}
	require.NoError(t, l.write(ctx, true))
	require.Equal(t, []string{"get", "create"}, verbs())
	require.NoError(t, l.write(ctx, true))
	require.Equal(t, []string{"update"}, verbs(), "a renewal is one update")
	conflicted := false
	client.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if conflicted {
			return false, nil, nil
		}
		conflicted = true
		return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "x", errors.New("modified"))
	})
	require.NoError(t, l.write(ctx, true))
	require.Equal(t, []string{"update", "get", "update"}, verbs(), "a conflict reads the Lease again")
	require.True(t, l.Valid())
	require.NoError(t, l.Release(ctx))
	verbs()
	require.NoError(t, l.write(ctx, true))
	require.Empty(t, verbs(), "nothing is written after the release")
}

// idleRenewingLease is a healthy node's Lease on a fake clock: 2 s renewed every 500 ms while
// busy, every 5 s while idle.
func idleRenewingLease() (*AnnouncerLease, coordinationclient.LeaseInterface, *clocktesting.FakeClock) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := config.AnnouncerConfig{LeaseDuration: config.Duration{Duration: 2 * time.Second},
		RenewInterval: config.Duration{Duration: 500 * time.Millisecond}, IdleRenewInterval: &config.Duration{Duration: 5 * time.Second}}
	leases := fake.NewClientset().CoordinationV1().Leases("kube-system")
	return NewAnnouncerLease(leases, "n1", cfg, func() bool { return true }, clk), leases, clk
}

// TestAnnouncerLeaseIdleRenewsSlowly: a node that announces nothing renews every idle interval
// with a Lease duration of twice that; once assigned an address it renews at once with the
// short duration, and again every renew interval.
func TestAnnouncerLeaseIdleRenewsSlowly(t *testing.T) {
	l, leases, clk := idleRenewingLease()
	ctx := context.Background()
	duration := func() int32 {
		got, err := leases.Get(ctx, lbapi.AnnouncerLeaseName("n1"), metav1.GetOptions{})
		require.NoError(t, err)
		return *got.Spec.LeaseDurationSeconds
	}

	require.True(t, l.due(), "never renewed")
	require.Equal(t, 500*time.Millisecond, l.nextWake(), "never renewed: retried every renew interval")
	require.NoError(t, l.write(ctx, true))
	require.Equal(t, int32(10), duration(), "an idle renewal writes twice the idle interval")
	require.Equal(t, 5*time.Second, l.nextWake(), "idle: the loop sleeps the whole idle interval, not a renew interval")
	clk.Step(4 * time.Second)
	require.False(t, l.due(), "idle: not before the idle interval")
	require.Equal(t, time.Second, l.nextWake())
	require.True(t, l.Valid(), "idle: valid for the idle duration")
	clk.Step(time.Second)
	require.True(t, l.due(), "idle: due after the idle interval")
	require.Equal(t, 500*time.Millisecond, l.nextWake(), "idle, overdue (unhealthy or failing): retried every renew interval")

	l.SetBusy(true)
	require.Len(t, l.busyKick, 1, "becoming busy wakes the renewal loop")
	require.True(t, l.due(), "busy: due at every tick")
	require.NoError(t, l.write(ctx, true))
	require.Equal(t, int32(2), duration(), "a busy renewal writes the short duration")
	require.Equal(t, 500*time.Millisecond, l.nextWake(), "busy: renewed every renew interval")
	clk.Step(2100 * time.Millisecond)
	require.False(t, l.Valid(), "busy: valid for the short duration only")

	l.SetBusy(false)
	require.NoError(t, l.write(ctx, true))
	require.Equal(t, int32(10), duration())
	require.False(t, l.due(), "idle again")
}

// TestAnnouncerLeaseRenewsAtOnceWhenBusy: the renewal loop renews as soon as the node is
// assigned an address, without waiting for a tick.
func TestAnnouncerLeaseRenewsAtOnceWhenBusy(t *testing.T) {
	l, leases, _ := idleRenewingLease()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	durationIs := func(want int32) func() bool {
		return func() bool {
			got, err := leases.Get(ctx, lbapi.AnnouncerLeaseName("n1"), metav1.GetOptions{})
			return err == nil && *got.Spec.LeaseDurationSeconds == want
		}
	}
	require.Eventually(t, durationIs(10), 5*time.Second, time.Millisecond, "the first renewal, idle")
	l.SetBusy(true)
	require.Eventually(t, durationIs(2), 5*time.Second, time.Millisecond, "busy: renewed at once, no clock step")
}

// waitRecorder is a fake clock that records the duration of every timer it hands out.
type waitRecorder struct {
	*clocktesting.FakeClock
	mu    sync.Mutex
	waits []time.Duration
}

func (c *waitRecorder) NewTimer(d time.Duration) clock.Timer {
	c.mu.Lock()
	c.waits = append(c.waits, d)
	c.mu.Unlock()
	return c.FakeClock.NewTimer(d)
}

func (c *waitRecorder) recorded() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.waits)
}

// TestAnnouncerLeaseIdleLoopWakesPerRenewal: after an idle renewal the renewal loop sleeps the
// whole idle interval, not a renew interval (an idle agent woke twice a second for a renewal
// every 5 s), and the pass that ends that sleep renews.
func TestAnnouncerLeaseIdleLoopWakesPerRenewal(t *testing.T) {
	clk := &waitRecorder{FakeClock: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	cfg := config.AnnouncerConfig{LeaseDuration: config.Duration{Duration: 2 * time.Second},
		RenewInterval: config.Duration{Duration: 500 * time.Millisecond}, IdleRenewInterval: &config.Duration{Duration: 5 * time.Second}}
	client := fake.NewClientset()
	l := NewAnnouncerLease(client.CoordinationV1().Leases("kube-system"), "n1", cfg, func() bool { return true }, clk)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	writes := func() int {
		n := 0
		for _, a := range client.Actions() {
			if a.GetVerb() == "create" || a.GetVerb() == "update" {
				n++
			}
		}
		return n
	}
	sleeps := func(n int) func() bool { return func() bool { return len(clk.recorded()) >= n } }
	require.Eventually(t, sleeps(1), 5*time.Second, time.Millisecond, "the loop sleeps after its first pass")
	require.Equal(t, 1, writes(), "the first pass renewed")
	require.Equal(t, []time.Duration{5 * time.Second}, clk.recorded(), "idle: asleep until the idle renewal is due")
	clk.Step(5 * time.Second)
	require.Eventually(t, sleeps(2), 5*time.Second, time.Millisecond, "the idle renewal's pass")
	require.Equal(t, 2, writes(), "the pass that ends the sleep renews")
	require.Equal(t, []time.Duration{5 * time.Second, 5 * time.Second}, clk.recorded())
}
