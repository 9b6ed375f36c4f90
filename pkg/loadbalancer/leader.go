package loadbalancer

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// LeaderElection configures RunLeaderElected.
type LeaderElection struct {
	// Namespace and Name of the coordination.k8s.io Lease.
	Namespace, Name string
	// Identity names this replica in the Lease (e.g. host name + random).
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod as in client-go's
	// leaderelection.LeaderElectionConfig.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Status, when set, records whether this replica leads.
	Status *LeaderStatus
	// WatchDog, when set, is client-go's health adaptor: its Check fails
	// while this replica leads but has not renewed the Lease in time.
	WatchDog *leaderelection.HealthzAdaptor
}

// LeaderStatus records whether this replica holds the Lease. It is safe
// for concurrent use; the zero value is a standby.
type LeaderStatus struct{ leading atomic.Bool }

// Leading reports whether this replica holds the Lease.
func (s *LeaderStatus) Leading() bool { return s.leading.Load() }

func (s *LeaderStatus) set(v bool) {
	if s != nil {
		s.leading.Store(v)
	}
}

// ErrLostLeadership is returned by RunLeaderElected when this replica stops
// being the leader before ctx is done. The process should exit: its
// in-memory allocations may be stale once another replica writes.
var ErrLostLeadership = errors.New("lost leadership of the LoadBalancer controller Lease")

// RunLeaderElected runs run(ctx) only while this replica holds the Lease,
// so two replicas never write at the same time; run must return once its
// context is done. It returns nil when ctx is done (releasing the Lease),
// ErrLostLeadership if the Lease could not be renewed, or run's error.
func RunLeaderElected(ctx context.Context, client kubernetes.Interface, le LeaderElection, run func(context.Context) error) error {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: le.Namespace, Name: le.Name},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: le.Identity},
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	runDone := make(chan error, 1)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   le.LeaseDuration,
		RenewDeadline:   le.RenewDeadline,
		RetryPeriod:     le.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            le.Name,
		WatchDog:        le.WatchDog,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				klog.InfoS("Became leader", "lease", klog.KRef(le.Namespace, le.Name), "identity", le.Identity)
				le.Status.set(true)
				runDone <- run(ctx)
				cancel()
			},
			OnStoppedLeading: func() {
				le.Status.set(false)
				klog.InfoS("Stopped leading", "lease", klog.KRef(le.Namespace, le.Name), "identity", le.Identity)
			},
			OnNewLeader: func(id string) {
				if id != le.Identity {
					klog.InfoS("Another replica leads", "lease", klog.KRef(le.Namespace, le.Name), "leader", id)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("setting up leader election on Lease %s/%s: %w", le.Namespace, le.Name, err)
	}
	elector.Run(ctx)
	if ctx.Err() == nil {
		// Run returns on its own only after leading and failing to renew;
		// run has started and sees its context cancelled.
		<-runDone
		return ErrLostLeadership
	}
	select {
	case err := <-runDone:
		return err
	default:
		return nil // ctx done; run, if it started, is stopping
	}
}
