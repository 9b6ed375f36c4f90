// Package lbstatus holds the tri-state helpers the end-to-end tests use to
// wait for a LoadBalancer Service, following the test plan of KEP-4631:
// instead of guessing with timeouts, a test watches the provider's
// LoadBalancerServing condition and ends in one of three states:
//
//   - Pass: Serving=True and nothing relevant to the test is degraded;
//   - Skip: the provider says it cannot do what the test needs
//     (Serving=False/Unsupported, or Degraded=True with a reason that
//     concerns a feature the test requires); the reason is reported;
//   - Fail: anything else, including a provider that sets no Serving
//     condition within 30 s, or one still provisioning when time is up.
package lbstatus

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/antrea-proxy/antrea-proxy/pkg/loadbalancer/conditions"
)

// Feature is a load balancer feature a test requires (KEP-4631).
type Feature = conditions.Feature

// Outcome is the tri-state result of a wait.
type Outcome int

// Outcomes.
const (
	Fail Outcome = iota
	Pass
	Skip
)

func (o Outcome) String() string {
	switch o {
	case Pass:
		return "Pass"
	case Skip:
		return "Skip"
	}
	return "Fail"
}

// Result is the outcome of WaitForServing.
type Result struct {
	Outcome Outcome
	// Reason explains a Skip or a Fail (and summarises a Pass).
	Reason string
	// Service is the last version observed (nil if never read).
	Service *v1.Service
}

// Defaults of Waiter.
const (
	DefaultConditionTimeout = 30 * time.Second
	DefaultInterval         = 250 * time.Millisecond
)

// Waiter polls a Service's conditions. The zero value uses the defaults.
type Waiter struct {
	// ConditionTimeout is how long the Serving condition may take to
	// appear at all. Default 30 s.
	ConditionTimeout time.Duration
	// Interval is the polling period. Default 250 ms.
	Interval time.Duration
	// Clock measures both; default the real clock.
	Clock clock.Clock
}

// WaitForServing waits with a default Waiter; see Waiter.WaitForServing.
func WaitForServing(ctx context.Context, client kubernetes.Interface, ns, name string, required []Feature, timeout time.Duration) (Result, error) {
	return Waiter{}.WaitForServing(ctx, client, ns, name, required, timeout)
}

// WaitForServing polls Service ns/name until its provider's verdict is
// final or timeout expires. Conditions whose observedGeneration is older
// than the Service's generation are not trusted yet. The error is non-nil
// only when the wait itself broke (ctx cancelled, API errors until the
// end); the Result is then Fail.
func (w Waiter) WaitForServing(ctx context.Context, client kubernetes.Interface, ns, name string, required []Feature, timeout time.Duration) (Result, error) {
	w.defaults()
	start := w.Clock.Now()
	var last *v1.Service
	var lastErr error
	for {
		svc, err := client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			last, lastErr = svc, nil
			if res, final := Evaluate(svc, required); final {
				return res, nil
			}
		} else {
			lastErr = fmt.Errorf("reading Service %s/%s: %w", ns, name, err)
		}
		elapsed := w.Clock.Since(start)
		hasServing := last != nil && meta.FindStatusCondition(last.Status.Conditions, conditions.TypeServing) != nil
		switch {
		case !hasServing && elapsed >= w.ConditionTimeout:
			return failed(last, lastErr, fmt.Sprintf("no %s condition on Service %s/%s within %v: the provider does not report KEP-4631 status",
				conditions.TypeServing, ns, name, w.ConditionTimeout))
		case elapsed >= timeout:
			return failed(last, lastErr, fmt.Sprintf("Service %s/%s not serving after %v: %s", ns, name, timeout, describe(last)))
		}
		select {
		case <-ctx.Done():
			return Result{Outcome: Fail, Reason: "wait cancelled", Service: last}, ctx.Err()
		case <-w.Clock.After(w.Interval):
		}
	}
}

func failed(last *v1.Service, err error, reason string) (Result, error) {
	if err != nil {
		reason += fmt.Sprintf(" (last error: %v)", err)
	}
	return Result{Outcome: Fail, Reason: reason, Service: last}, err
}

func (w *Waiter) defaults() {
	if w.ConditionTimeout <= 0 {
		w.ConditionTimeout = DefaultConditionTimeout
	}
	if w.Interval <= 0 {
		w.Interval = DefaultInterval
	}
	if w.Clock == nil {
		w.Clock = clock.RealClock{}
	}
}

// Evaluate judges the Service's current conditions for a test requiring
// the given features. final is false while the verdict may still change
// (no condition yet, stale observedGeneration, Provisioning,
// Infrastructure); the Result is then a provisional Fail.
func Evaluate(svc *v1.Service, required []Feature) (res Result, final bool) {
	res = Result{Outcome: Fail, Service: svc}
	serving := meta.FindStatusCondition(svc.Status.Conditions, conditions.TypeServing)
	if serving == nil {
		res.Reason = "no " + conditions.TypeServing + " condition yet"
		return res, false
	}
	if serving.ObservedGeneration < svc.Generation {
		res.Reason = fmt.Sprintf("%s is for generation %d, the Service is at %d", conditions.TypeServing, serving.ObservedGeneration, svc.Generation)
		return res, false
	}
	if serving.Status == metav1.ConditionFalse && serving.Reason == conditions.ReasonUnsupported {
		res.Outcome, res.Reason = Skip, fmt.Sprintf("load balancer provider refuses the Service (%s=False/%s): %s",
			conditions.TypeServing, serving.Reason, serving.Message)
		return res, true
	}
	if d := meta.FindStatusCondition(svc.Status.Conditions, conditions.TypeDegraded); d != nil &&
		d.Status == metav1.ConditionTrue && d.ObservedGeneration >= svc.Generation && degradedConcerns(d, required) {
		res.Outcome, res.Reason = Skip, fmt.Sprintf("load balancer is degraded for a required feature (%s=True/%s): %s",
			conditions.TypeDegraded, d.Reason, d.Message)
		return res, true
	}
	if serving.Status == metav1.ConditionTrue {
		res.Outcome, res.Reason = Pass, serving.Message
		return res, true
	}
	res.Reason = fmt.Sprintf("%s=%s/%s: %s", conditions.TypeServing, serving.Status, serving.Reason, serving.Message)
	return res, false
}

// degradedConcerns reports whether a Degraded condition is about one of
// the required features. Multiple concerns them when its message names a
// required feature, or names no known feature at all.
func degradedConcerns(d *metav1.Condition, required []Feature) bool {
	if d.Reason == conditions.ReasonMultiple {
		if len(required) == 0 {
			return false
		}
		namesAny := false
		for _, f := range conditions.AllFeatures() {
			if strings.Contains(d.Message, string(f)) {
				namesAny = true
				if slices.Contains(required, f) {
					return true
				}
			}
		}
		return !namesAny
	}
	return slices.ContainsFunc(required, func(f Feature) bool { return f.DegradedReason() == d.Reason })
}

func describe(svc *v1.Service) string {
	if svc == nil {
		return "never read"
	}
	var parts []string
	for _, c := range svc.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s/%s (%s)", c.Type, c.Status, c.Reason, c.Message))
	}
	if len(parts) == 0 {
		return "no conditions"
	}
	return strings.Join(parts, "; ")
}

// TB is the part of testing.TB that Check uses.
type TB interface {
	Helper()
	Logf(format string, args ...any)
	Skipf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// Check ends the test according to r: Skip skips it naming the reason,
// Fail fails it, Pass logs and returns.
func Check(t TB, r Result) {
	t.Helper()
	switch r.Outcome {
	case Pass:
		t.Logf("load balancer serving: %s", r.Reason)
	case Skip:
		t.Skipf("skipping: %s", r.Reason)
	default:
		t.Fatalf("load balancer not serving: %s", r.Reason)
	}
}
