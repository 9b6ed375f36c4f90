//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// churnDuration is how long TestChurn replaces endpoint pods, one per second.
const churnDuration = 60 * time.Second

// churnDialTimeout bounds one connection of the churn clients.
const churnDialTimeout = 2 * time.Second

// churnAttempt is one connection of a churn client.
type churnAttempt struct {
	start, end time.Time
	server     string
	err        error
}

// churnClient connects to addr from ns every 50ms and records every attempt.
type churnClient struct {
	name     string
	mu       sync.Mutex
	attempts []churnAttempt
	stop     chan struct{}
	done     chan struct{}
}

func startChurnClient(name string, ns *framework.NetNS, addr string) *churnClient {
	c := &churnClient{name: name, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for {
			start := time.Now()
			r, err := ns.Echo(context.Background(), "tcp", addr, churnDialTimeout)
			c.mu.Lock()
			c.attempts = append(c.attempts, churnAttempt{start: start, end: time.Now(), server: r.Server, err: err})
			c.mu.Unlock()
			select {
			case <-c.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return c
}

func (c *churnClient) halt() []churnAttempt {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]churnAttempt(nil), c.attempts...)
}

// readyChange is the Service's ready endpoints from a point in time on: the pod names (from the
// endpoints' targetRef) by address.
type readyChange struct {
	at    time.Time
	ready map[string]string
}

// lists reports whether the change lists pod as a ready endpoint.
func (c readyChange) lists(pod string) bool {
	for _, name := range c.ready {
		if name == pod {
			return true
		}
	}
	return false
}

// watchReady records every change of the Service's ready endpoints until ctx ends.
func watchReady(t *testing.T, sb *framework.Sandbox, ctx context.Context, namespace, svc string) func() []readyChange {
	t.Helper()
	w, err := sb.CP.Client.DiscoveryV1().EndpointSlices(namespace).Watch(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + svc,
	})
	require.NoError(t, err)
	var mu sync.Mutex
	var changes []readyChange
	done := make(chan struct{})
	go func() {
		defer close(done)
		slices := map[string]*discoveryv1.EndpointSlice{}
		for ev := range w.ResultChan() {
			sl, ok := ev.Object.(*discoveryv1.EndpointSlice)
			if !ok {
				continue
			}
			if ev.Type == watch.Deleted {
				delete(slices, sl.Name)
			} else {
				slices[sl.Name] = sl
			}
			ready := map[string]string{}
			for _, s := range slices {
				for _, ep := range s.Endpoints {
					if ep.Conditions.Ready == nil || !*ep.Conditions.Ready {
						continue
					}
					pod := ""
					if ep.TargetRef != nil {
						pod = ep.TargetRef.Name
					}
					for _, a := range ep.Addresses {
						ready[a] = pod
					}
				}
			}
			mu.Lock()
			changes = append(changes, readyChange{at: time.Now(), ready: ready})
			mu.Unlock()
		}
	}()
	return func() []readyChange {
		w.Stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return changes
	}
}

// window is a time interval during which failures have a known cause.
type window struct{ from, to time.Time }

func (w window) overlaps(a churnAttempt) bool { return !a.end.Before(w.from) && !a.start.After(w.to) }

// TestChurn (slow: about 75 s) replaces the endpoint pods of a Service, one pod every second
// for churnDuration, on both nodes, while two eTP=Cluster clients connect every 50ms: the
// external client through node2's NodePort, and a pod through the ClusterIP. It counts the
// failed connections and requires none outside the moments where they have a known cause:
// no ready endpoint (plus one sync), or an endpoint whose pod was deleted and not yet removed
// from the EndpointSlice and the flows (the kubelet stand-in kills a pod at once, without a
// grace period during which it would keep serving).
func TestChurn(t *testing.T) {
	sb := framework.StartSandbox(t, framework.SandboxOptions{Agent: framework.AgentOptions{ProxyLoadBalancerIPs: true}})
	ctx := context.Background()
	const ns = "churn"
	require.NoError(t, sb.CreateNamespace(ctx, ns))
	labels := map[string]string{"app": "churn"}
	pods, err := sb.RunPods(ctx,
		framework.EchoPod(ns, "client", sb.Nodes[0], map[string]string{"app": "client"}),
		framework.EchoPod(ns, "churn-a-0", sb.Nodes[0], labels),
		framework.EchoPod(ns, "churn-b-0", sb.Nodes[1], labels),
	)
	require.NoError(t, err)
	clientNS, err := sb.PodNetNS(pods[0])
	require.NoError(t, err)
	svc := createService(t, sb, echoService(ns, "churn", "churn", corev1.ServiceTypeNodePort))
	require.NoError(t, sb.WaitEndpoints(ctx, ns, "churn", pods[1].Status.PodIP, pods[2].Status.PodIP))
	require.NoError(t, sb.WaitProgrammed(ctx, ns, "churn", "with both endpoints", framework.HasEndpoints(2)))
	np := nodePortOf(t, svc, "tcp")
	require.NoError(t, sb.WaitNodePort(ctx, "tcp", np))
	external := hostPort(sb.Nodes[1].IP.String(), np)
	echoUntil(t, sb.Net.Client, "tcp", external, "the external client to reach node2's NodePort", fromBackend(map[string]bool{"churn-a-0": true, "churn-b-0": true}, ""))

	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	stopTimeline := watchReady(t, sb, watchCtx, ns, "churn")
	clients := []*churnClient{
		startChurnClient("external client -> node2 NodePort", sb.Net.Client, external),
		startChurnClient("pod -> ClusterIP", clientNS, hostPort(svc.Spec.ClusterIP, 80)),
	}

	// Churn: every second, delete the current pod of one slot and create its replacement on the
	// same node, alternating between the slots (node1, node2).
	type slot struct {
		prefix string
		node   *framework.Node
		pod    *corev1.Pod
		seq    int
	}
	slots := []*slot{{"churn-a", sb.Nodes[0], pods[1], 0}, {"churn-b", sb.Nodes[1], pods[2], 0}}
	deleted := map[string]time.Time{} // pod name -> deletion request
	cs := sb.CP.Client.CoreV1().Pods(ns)
	churnStart := time.Now()
	tick := time.NewTicker(time.Second)
	replaced := 0
	for i := 0; time.Since(churnStart) < churnDuration; i++ {
		<-tick.C
		s := slots[i%2]
		deleted[s.pod.Name] = time.Now()
		require.NoError(t, cs.Delete(ctx, s.pod.Name, metav1.DeleteOptions{}))
		s.seq++
		next := framework.EchoPod(ns, fmt.Sprintf("%s-%d", s.prefix, s.seq), s.node, labels)
		s.pod, err = cs.Create(ctx, next, metav1.CreateOptions{})
		require.NoError(t, err)
		replaced++
	}
	tick.Stop()
	churnEnd := time.Now()
	// Let the last replacements become Ready and programmed, then stop.
	var finalIPs []string
	for _, s := range slots {
		framework.WaitFor(t, time.Minute, "pod "+s.pod.Name+" to be Ready", func(ctx context.Context) (bool, string, error) {
			got, err := cs.Get(ctx, s.pod.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			for _, c := range got.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && got.Status.PodIP != "" {
					finalIPs = append(finalIPs, got.Status.PodIP)
					return true, "", nil
				}
			}
			return false, "not Ready", nil
		})
	}
	require.NoError(t, sb.WaitEndpoints(ctx, ns, "churn", finalIPs...))
	require.NoError(t, sb.WaitProgrammed(ctx, ns, "churn", "with the last two endpoints", framework.HasEndpoints(2)))
	time.Sleep(syncBound) // attempts after the final sync must succeed: give the clients time to make some
	results := make([][]churnAttempt, len(clients))
	for i, c := range clients {
		results[i] = c.halt()
	}
	timeline := stopTimeline()

	// The windows with a known cause of failure.
	var zero, stale []window
	var zeroTotal time.Duration
	for i, ch := range timeline {
		if len(ch.ready) != 0 {
			continue
		}
		end := churnEnd.Add(time.Minute)
		if i+1 < len(timeline) {
			end = timeline[i+1].at
		}
		zero = append(zero, window{ch.at, end.Add(syncBound)})
		zeroTotal += end.Sub(ch.at)
	}
	// A deleted pod: from its deletion until the EndpointSlice stops listing it as ready, plus
	// one sync for the agents to remove it. A pod deleted before it was ever ready has none.
	for name, at := range deleted {
		wasReady, gone := false, at
		for _, ch := range timeline {
			if !ch.at.After(at) {
				wasReady = ch.lists(name)
				continue
			}
			if !ch.lists(name) {
				gone = ch.at
				break
			}
		}
		if wasReady {
			stale = append(stale, window{at, gone.Add(syncBound)})
		}
	}

	for i, c := range clients {
		var ok, inZero, inStale, other int
		var others []string
		for _, a := range results[i] {
			if a.err == nil {
				ok++
				continue
			}
			switch {
			case anyOverlaps(zero, a):
				inZero++
			case anyOverlaps(stale, a):
				inStale++
			default:
				other++
				if len(others) < 10 {
					others = append(others, fmt.Sprintf("%s (+%v): %v", a.start.Format("15:04:05.000"), a.end.Sub(a.start).Round(time.Millisecond), a.err))
				}
			}
		}
		t.Logf("%s: %d connections over %v: %d answered, %d failed with no ready endpoint, %d failed towards a just-deleted pod, %d failed otherwise",
			c.name, len(results[i]), churnEnd.Sub(churnStart).Round(time.Second), ok, inZero, inStale, other)
		require.Zero(t, other, "%s: failed connections outside the windows with no ready endpoint or a just-deleted pod: %v", c.name, others)
		require.Positive(t, ok)
	}
	t.Logf("%d pods replaced in %v; %d EndpointSlice changes; %d windows with zero ready endpoints lasting %v in total",
		replaced, churnEnd.Sub(churnStart).Round(time.Second), len(timeline), len(zero), zeroTotal.Round(time.Millisecond))
	sort.Slice(stale, func(i, j int) bool { return stale[i].from.Before(stale[j].from) })
	var staleTotal time.Duration
	for _, w := range stale {
		staleTotal += w.to.Sub(w.from) - syncBound
	}
	t.Logf("deleted pods stayed ready endpoints for %v in total (%d pods, %v on average)", staleTotal.Round(time.Millisecond), len(stale), (staleTotal / time.Duration(max(len(stale), 1))).Round(time.Millisecond))
}

func anyOverlaps(ws []window, a churnAttempt) bool {
	for _, w := range ws {
		if w.overlaps(a) {
			return true
		}
	}
	return false
}
