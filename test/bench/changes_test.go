//go:build bench

package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// triggerTimeAnnotation is what both proxies' network-programming metric measures from.
const triggerTimeAnnotation = "endpoints.kubernetes.io/last-change-trigger-time"

// measureChanges replaces one endpoint of cfg.Changes Services spread over svcs, one change at
// a time (at most one every cfg.Pace), and polls both proxies' rules from outside until each
// holds the new endpoint; the partial-sync and network-programming histograms are the
// proxies' own, over the same changes.
func measureChanges(t *testing.T, ctx context.Context, cs kubernetes.Interface, sides []*side, res []*result, svcs []benchService, cfg config, progress func(string, ...any)) {
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
		sl.Annotations[triggerTimeAnnotation] = time.Now().UTC().Format(time.RFC3339Nano)
		got, err := cs.DiscoveryV1().EndpointSlices(benchNamespace).Update(ctx, sl, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("change %d (%s): %v", c, sv.Name, err)
		}
		acked := time.Now()
		sv.Slice = got
		var wg sync.WaitGroup
		for i, s := range sides {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := pollUntil(30*time.Second, 5*time.Millisecond, func() (bool, string) {
					ok, err := s.observe(sv.Name, ip)
					if err != nil {
						return false, err.Error()
					}
					return ok, "not yet"
				})
				if err != nil {
					res[i].Missed++
					t.Logf("%s: change %d (%s → %s): %v", s.Name, c, sv.Name, ip, err)
					return
				}
				res[i].WriteToRules = append(res[i].WriteToRules, time.Since(acked).Seconds())
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

// floorResult is the raw OVS floor: the agent's groups and flows in one bundle.
type floorResult struct {
	Groups, Flows int
	Bytes         int
	Took          time.Duration
}

// floorBridge is the fresh bridge the floor is measured on.
const floorBridge = "br-floor"

// measureFloor dumps the agent's groups and flows and replays them with one `ovs-ofctl bundle`
// into a fresh bridge of the same ovs-vswitchd, timing the bundle.
func measureFloor(t *testing.T, n *framework.Node, progress func(string, ...any)) floorResult {
	groups, err := n.OVS.Ofctl("dump-groups", framework.Bridge)
	if err != nil {
		t.Fatal(err)
	}
	flows, err := n.OVS.Ofctl("dump-flows", framework.Bridge, "--no-stats", "--no-names")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	var fr floorResult
	for _, line := range strings.Split(groups, "\n") {
		if line = strings.TrimSpace(line); strings.HasPrefix(line, "group_id=") {
			b.WriteString("group add " + line + "\n")
			fr.Groups++
		}
	}
	for _, line := range strings.Split(flows, "\n") {
		if line = strings.TrimSpace(line); strings.Contains(line, "actions=") && !strings.HasPrefix(line, "OFPST") {
			b.WriteString("flow add " + line + "\n")
			fr.Flows++
		}
	}
	fr.Bytes = b.Len()
	file := filepath.Join(n.Dir, "floor.bundle")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := n.OVS.Vsctl("add-br", floorBridge, "--", "set", "bridge", floorBridge,
		"datapath_type=netdev", "protocols=OpenFlow13,OpenFlow15", "fail_mode=secure"); err != nil {
		t.Fatal(err)
	}
	if err := n.OVS.WaitForBridge(floorBridge); err != nil {
		t.Fatal(err)
	}
	progress("floor: replaying %d groups + %d flows (%d MB) in one bundle", fr.Groups, fr.Flows, fr.Bytes>>20)
	start := time.Now()
	if out, err := n.OVS.Ofctl("bundle", floorBridge, file); err != nil {
		t.Fatalf("floor bundle: %v: %s", err, out)
	}
	fr.Took = time.Since(start)
	if _, err := n.OVS.Vsctl("del-br", floorBridge); err != nil {
		t.Error(err)
	}
	return fr
}

// checkMeasured fails unless every figure was taken.
func checkMeasured(t *testing.T, sides []*side, res []*result, floor floorResult) {
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
	if floor.Took == 0 || floor.Groups == 0 || floor.Flows == 0 {
		t.Errorf("floor not measured: %+v", floor)
	}
}

// ms formats seconds as milliseconds.
func ms(s float64) string { return fmt.Sprintf("%.0f ms", s*1000) }
