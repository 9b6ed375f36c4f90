//go:build bench

package bench

import (
	"context"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// maxMissed is how many changes a side may miss before the others are no longer watched on it.
const maxMissed = 3

// triggerTimeAnnotation is what both proxies' network-programming metric measures from.
const triggerTimeAnnotation = "endpoints.kubernetes.io/last-change-trigger-time"

// measureChanges replaces one endpoint of cfg.Changes Services spread over svcs, one change at
// a time (at most one every cfg.Pace), and watches both proxies' rules from outside until each
// holds the new endpoint (at most timeout per change); the partial-sync and
// network-programming histograms are the proxies' own, over the same changes.
func measureChanges(t *testing.T, ctx context.Context, cs kubernetes.Interface, sides []*side, res []*result, svcs []benchService, cfg config, timeout time.Duration, progress func(string, ...any)) {
	before := make([][2]histogram, len(sides))
	for i, s := range sides {
		p, err1 := s.hist(ctx, "sync_partial_proxy_rules_duration_seconds")
		g, err2 := s.hist(ctx, "network_programming_duration_seconds")
		if err1 != nil || err2 != nil {
			t.Fatalf("%s metrics: %v %v", s.Name, err1, err2)
		}
		before[i] = [2]histogram{p, g}
	}
	progress("changes: %d one-endpoint changes, one every %v at most", cfg.Changes, cfg.Pace)
	pace := time.NewTicker(max(cfg.Pace, time.Millisecond))
	defer pace.Stop()
	for c := 0; c < cfg.Changes; c++ {
		sv := &svcs[c*len(svcs)/cfg.Changes]
		ip := addrAt(changeBase, c).String()
		sl := sv.Slice.DeepCopy()
		sl.Endpoints[0].Addresses = []string{ip}
		if sl.Annotations == nil {
			sl.Annotations = map[string]string{}
		}
		trigger := time.Now()
		sl.Annotations[triggerTimeAnnotation] = trigger.UTC().Format(time.RFC3339Nano)
		got, err := cs.DiscoveryV1().EndpointSlices(benchNamespace).Update(ctx, sl, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("change %d (%s): %v", c, sv.Name, err)
		}
		acked := time.Now()
		sv.Slice = got
		var wg sync.WaitGroup
		for i, s := range sides {
			if res[i].Missed >= maxMissed {
				continue // its probe is broken: do not wait out every change
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				var at time.Time
				err := pollUntil(timeout, 5*time.Millisecond, func() (bool, string) {
					t, ok, err := s.observe(sv.Name, ip)
					if err != nil {
						return false, err.Error()
					}
					at = t
					return ok, "not yet"
				})
				if err != nil {
					res[i].Missed++
					t.Logf("%s: change %d (%s → %s): %v", s.Name, c, sv.Name, ip, err)
					return
				}
				res[i].WriteToRules = append(res[i].WriteToRules, at.Sub(acked).Seconds())
				res[i].TriggerToRules = append(res[i].TriggerToRules, at.Sub(trigger).Seconds())
			}()
		}
		wg.Wait()
		if (c+1)%max(1, cfg.Changes/5) == 0 {
			progress("changes: %d/%d done", c+1, cfg.Changes)
		}
		<-pace.C
	}
	for i, s := range sides {
		p, err1 := s.hist(ctx, "sync_partial_proxy_rules_duration_seconds")
		g, err2 := s.hist(ctx, "network_programming_duration_seconds")
		if err1 != nil || err2 != nil {
			t.Fatalf("%s metrics: %v %v", s.Name, err1, err2)
		}
		res[i].Partial, res[i].Programming = p.sub(before[i][0]), g.sub(before[i][1])
	}
}

// checkMeasured fails unless every figure was taken.
func checkMeasured(t *testing.T, sides []*side, res []*result, floor floorResult) {
	t.Helper()
	for i, s := range sides {
		r := res[i]
		switch {
		case r.FullSync.Count == 0:
			t.Errorf("%s: no full sync in its metrics", s.Name)
		case r.RSS == 0:
			t.Errorf("%s: RSS not measured", s.Name)
		case r.Partial.Count == 0:
			t.Errorf("%s: no partial sync during the changes", s.Name)
		case r.Programming.Count == 0:
			t.Errorf("%s: no network-programming sample during the changes", s.Name)
		case r.Missed > 0:
			t.Errorf("%s: %d changes never reached its rules", s.Name, r.Missed)
		}
	}
	if floor.Ofctl == 0 || floor.Groups == 0 || floor.Flows == 0 {
		t.Errorf("ovs-ofctl floor not measured: %+v", floor)
	}
	if floor.Native == 0 {
		t.Errorf("native floor not measured: %s", floor.NativeErr)
	}
}
