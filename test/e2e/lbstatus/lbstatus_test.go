package lbstatus

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	c "github.com/antrea-proxy/antrea-proxy/pkg/loadbalancer/conditions"
)

func cond(typ string, status metav1.ConditionStatus, reason, msg string, gen int64) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen}
}

func service(gen int64, conds ...metav1.Condition) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lb", Generation: gen},
		Spec:       v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer},
		Status:     v1.ServiceStatus{Conditions: conds},
	}
}

var (
	servingTrue  = cond(c.TypeServing, "True", c.ReasonServing, "serving 10.0.0.1 (VIP)", 1)
	provisioning = cond(c.TypeServing, "False", c.ReasonProvisioning, "waiting for a Ready node", 1)
	unsupported  = cond(c.TypeServing, "False", c.ReasonUnsupported, "unsupported: ExternalTrafficPolicy: proxy", 1)
	infra        = cond(c.TypeServing, "False", c.ReasonInfrastructure, "pool exhausted", 1)
	degradedETP  = cond(c.TypeDegraded, "True", c.ReasonExternalTrafficPolicyNotSupported, "ExternalTrafficPolicy: proxy", 1)
	degradedMany = cond(c.TypeDegraded, "True", c.ReasonMultiple, "ExternalTrafficPolicy: x; SessionAffinity: y", 1)
	degradedAny  = cond(c.TypeDegraded, "True", c.ReasonMultiple, "several things", 1)
)

func TestEvaluate(t *testing.T) {
	etp := []Feature{c.FeatureExternalTrafficPolicy}
	for _, tc := range []struct {
		name     string
		svc      *v1.Service
		required []Feature
		outcome  Outcome
		final    bool
		reason   string
	}{
		{"no condition", service(1), nil, Fail, false, "no LoadBalancerServing condition yet"},
		{"serving", service(1, servingTrue), nil, Pass, true, "serving 10.0.0.1 (VIP)"},
		{"stale generation", service(2, servingTrue), nil, Fail, false, "LoadBalancerServing is for generation 1, the Service is at 2"},
		{"provisioning", service(1, provisioning), nil, Fail, false, "LoadBalancerServing=False/Provisioning: waiting for a Ready node"},
		{"infrastructure", service(1, infra), nil, Fail, false, "LoadBalancerServing=False/Infrastructure: pool exhausted"},
		{"unsupported", service(1, unsupported), nil, Skip, true,
			"load balancer provider refuses the Service (LoadBalancerServing=False/Unsupported): unsupported: ExternalTrafficPolicy: proxy"},
		{"degraded for a required feature", service(1, servingTrue, degradedETP), etp, Skip, true,
			"load balancer is degraded for a required feature (LoadBalancerDegraded=True/ExternalTrafficPolicyNotSupported): ExternalTrafficPolicy: proxy"},
		{"degraded for another feature", service(1, servingTrue, degradedETP), []Feature{c.FeatureIPFamilies}, Pass, true, "serving 10.0.0.1 (VIP)"},
		{"degraded, nothing required", service(1, servingTrue, degradedETP), nil, Pass, true, "serving 10.0.0.1 (VIP)"},
		{"multiple naming a required feature", service(1, servingTrue, degradedMany), []Feature{c.FeatureSessionAffinity}, Skip, true,
			"load balancer is degraded for a required feature (LoadBalancerDegraded=True/Multiple): ExternalTrafficPolicy: x; SessionAffinity: y"},
		{"multiple naming other features", service(1, servingTrue, degradedMany), []Feature{c.FeatureIPFamilies}, Pass, true, "serving 10.0.0.1 (VIP)"},
		{"multiple naming nothing known", service(1, servingTrue, degradedAny), []Feature{c.FeatureIPFamilies}, Skip, true,
			"load balancer is degraded for a required feature (LoadBalancerDegraded=True/Multiple): several things"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, final := Evaluate(tc.svc, tc.required)
			require.Equal(t, tc.outcome, res.Outcome)
			require.Equal(t, tc.final, final)
			require.Equal(t, tc.reason, res.Reason)
		})
	}
}

// sequence makes Get return the given Services in turn, the last one
// forever, and counts the calls.
func sequence(client *fake.Clientset, svcs ...*v1.Service) *atomic.Int32 {
	var calls atomic.Int32
	client.PrependReactor("get", "services", func(k8stesting.Action) (bool, runtime.Object, error) {
		i := int(calls.Add(1)) - 1
		return true, svcs[min(i, len(svcs)-1)].DeepCopy(), nil
	})
	return &calls
}

func fastWaiter() Waiter { return Waiter{Interval: time.Millisecond, ConditionTimeout: time.Second} }

func TestWaitForServingFollowsTransitions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		seq     []*v1.Service
		outcome Outcome
		calls   int32
	}{
		{"provisioning then serving", []*v1.Service{service(1), service(1, provisioning), service(1, servingTrue)}, Pass, 3},
		{"stale then unsupported", []*v1.Service{service(2, servingTrue), service(2, cond(c.TypeServing, "False", c.ReasonUnsupported, "no", 2))}, Skip, 2},
		{"infrastructure then serving", []*v1.Service{service(1, infra), service(1, infra), service(1, servingTrue)}, Pass, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			calls := sequence(client, tc.seq...)
			res, err := fastWaiter().WaitForServing(context.Background(), client, "ns", "lb", nil, 5*time.Second)
			require.NoError(t, err)
			require.Equal(t, tc.outcome, res.Outcome, res.Reason)
			require.Equal(t, tc.calls, calls.Load())
		})
	}
}

func TestWaitForServingTimesOut(t *testing.T) {
	client := fake.NewClientset()
	sequence(client, service(1, provisioning))
	res, err := fastWaiter().WaitForServing(context.Background(), client, "ns", "lb", nil, 20*time.Millisecond)
	require.NoError(t, err)
	require.Equal(t, Fail, res.Outcome)
	require.Equal(t, "Service ns/lb not serving after 20ms: LoadBalancerServing=False/Provisioning (waiting for a Ready node)", res.Reason)
}

// TestWaitForServingNoConditionWithin30s runs the 30 s limit on a fake clock.
func TestWaitForServingNoConditionWithin30s(t *testing.T) {
	client := fake.NewClientset()
	calls := sequence(client, service(1))
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			if clk.HasWaiters() {
				clk.Step(5 * time.Second)
			}
			time.Sleep(50 * time.Microsecond)
		}
	}()
	defer close(done)
	w := Waiter{Interval: 5 * time.Second, Clock: clk}
	res, err := w.WaitForServing(context.Background(), client, "ns", "lb", nil, 10*time.Minute)
	require.NoError(t, err)
	require.Equal(t, Fail, res.Outcome)
	require.Equal(t, "no LoadBalancerServing condition on Service ns/lb within 30s: the provider does not report KEP-4631 status", res.Reason)
	require.Equal(t, int32(7), calls.Load(), "polled at 0, 5, ..., 30 s")
}

func TestWaitForServingErrors(t *testing.T) {
	client := fake.NewClientset() // the Service does not exist
	res, err := Waiter{Interval: time.Millisecond, ConditionTimeout: 10 * time.Millisecond}.
		WaitForServing(context.Background(), client, "ns", "lb", nil, time.Second)
	require.ErrorContains(t, err, `reading Service ns/lb: services "lb" not found`)
	require.Equal(t, Fail, res.Outcome)

	_, _ = client.CoreV1().Services("ns").Create(context.Background(), service(1), metav1.CreateOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err = fastWaiter().WaitForServing(ctx, client, "ns", "lb", nil, time.Second)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, Fail, res.Outcome)
}

type fakeTB struct {
	logs, skips, fatals []string
}

func (f *fakeTB) Helper()                       {}
func (f *fakeTB) Logf(format string, a ...any)  { f.logs = append(f.logs, fmt.Sprintf(format, a...)) }
func (f *fakeTB) Skipf(format string, a ...any) { f.skips = append(f.skips, fmt.Sprintf(format, a...)) }
func (f *fakeTB) Fatalf(format string, a ...any) {
	f.fatals = append(f.fatals, fmt.Sprintf(format, a...))
}

func TestCheck(t *testing.T) {
	tb := &fakeTB{}
	Check(tb, Result{Outcome: Pass, Reason: "serving 10.0.0.1"})
	Check(tb, Result{Outcome: Skip, Reason: "refused: ExternalTrafficPolicy"})
	Check(tb, Result{Outcome: Fail, Reason: "no condition"})
	require.Equal(t, []string{"load balancer serving: serving 10.0.0.1"}, tb.logs)
	require.Equal(t, []string{"skipping: refused: ExternalTrafficPolicy"}, tb.skips)
	require.Equal(t, []string{"load balancer not serving: no condition"}, tb.fatals)
	require.Equal(t, "Skip", Skip.String())
}
