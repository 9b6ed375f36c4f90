//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// Flow budget: one Service object that asks for millions of flows costs the agents nothing.

// budgetExternalIPs holds the huge Service's externalIPs: the test routes it from the router
// and the external client to node1, so every address it names lives in the sandbox.
var budgetExternalIPs = netip.MustParsePrefix("172.18.32.0/19")

const (
	budgetNS = "budget"
	// hugePorts × hugeExternalIPs with externalTrafficPolicy=Local is ~15 M flows if built.
	hugePorts, hugeExternalIPs = 1000, 5000
	// budgetRSSSlack is how much an agent's resident size may grow over its baseline.
	budgetRSSSlack     = 50 << 20
	reasonTooManyFlows = "TooManyFlows"
	// budgetFullSyncPeriod is the sandbox agents' antreaProxy.fullSyncPeriod.
	budgetFullSyncPeriod = 30 * time.Second
)

// hugeService is a ClusterIP Service with hugePorts TCP ports, hugeExternalIPs externalIPs and
// externalTrafficPolicy=Local, to the pods labelled app=web.
func hugeService() *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: budgetNS, Name: "huge"},
		Spec: corev1.ServiceSpec{
			Selector:              map[string]string{"app": "web"},
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
		},
	}
	for i := 1; i <= hugePorts; i++ {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "p" + strconv.Itoa(i), Protocol: corev1.ProtocolTCP,
			Port: int32(10000 + i), TargetPort: intstr.FromInt32(framework.EchoPort)})
	}
	a := budgetExternalIPs.Addr().Next()
	for range hugeExternalIPs {
		svc.Spec.ExternalIPs = append(svc.Spec.ExternalIPs, a.String())
		a = a.Next()
	}
	return svc
}

// vmRSS returns the resident size of process pid in bytes (/proc/<pid>/status VmRSS).
func vmRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// rssGuard fails (returns an error) as soon as an agent's resident size is more than
// budgetRSSSlack over its baseline, and records the largest growth seen.
type rssGuard struct {
	base map[*framework.Node]int64
	peak map[*framework.Node]int64
}

func newRSSGuard(t *testing.T, nodes []*framework.Node) *rssGuard {
	g := &rssGuard{base: map[*framework.Node]int64{}, peak: map[*framework.Node]int64{}}
	for _, n := range nodes {
		rss, err := vmRSS(n.ProxyPID())
		require.NoError(t, err)
		g.base[n] = rss
		t.Logf("%s's agent: baseline VmRSS %d MB", n.Name, rss>>20)
	}
	return g
}

func (g *rssGuard) check() error {
	for n, base := range g.base {
		rss, err := vmRSS(n.ProxyPID())
		if err != nil {
			return fmt.Errorf("%s's agent: %w", n.Name, err)
		}
		g.peak[n] = max(g.peak[n], rss-base)
		if rss-base > budgetRSSSlack {
			return fmt.Errorf("%s's agent grew from %d MB to %d MB (more than %d MB over its baseline)",
				n.Name, base>>20, rss>>20, budgetRSSSlack>>20)
		}
	}
	return nil
}

// pollGuarded is framework.WaitFor that also fails at once when the guard does.
func pollGuarded(t *testing.T, g *rssGuard, timeout time.Duration, what string, cond func(ctx context.Context) (bool, string, error)) {
	t.Helper()
	framework.WaitFor(t, timeout, what, func(ctx context.Context) (bool, string, error) {
		if err := g.check(); err != nil {
			return false, "", err
		}
		return cond(ctx)
	})
}

// TestBudgetHugeService: a Service of 1,000 ports × 5,000 externalIPs with
// externalTrafficPolicy=Local (a ~150 KB object asking every agent for ~15 M flows) is refused
// by the flow budget before anything is built: every agent's resident size stays within 50 MB
// of its baseline, its servicemap rows show TooManyFlows, each agent raises one Warning Event,
// a ClusterIP Service created right after it answers within seconds, and the agents keep
// syncing and stay healthy (/healthz and /livez answer 200).
func TestBudgetHugeService(t *testing.T) {
	sb := framework.StartSandbox(t, framework.SandboxOptions{})
	ctx := context.Background()
	require.NoError(t, sb.CreateNamespace(ctx, budgetNS))
	n1, n2 := sb.Nodes[0], sb.Nodes[1]
	pods, err := sb.RunPods(ctx,
		framework.EchoPod(budgetNS, "web-1", n1, map[string]string{"app": "web"}),
		framework.EchoPod(budgetNS, "client-1", n2, map[string]string{"app": "client"}),
	)
	require.NoError(t, err)
	clientNS, err := sb.PodNetNS(pods[1])
	require.NoError(t, err)
	for _, ns := range []*framework.NetNS{sb.Net.Router, sb.Net.Client} {
		require.NoError(t, ns.MustExec([]string{"ip", "route", "replace", budgetExternalIPs.String(), "via", n1.IP.String()}))
	}
	guard := newRSSGuard(t, sb.Nodes)
	defer func() {
		for n, p := range guard.peak {
			t.Logf("%s's agent: largest VmRSS growth seen %d MB", n.Name, p>>20)
		}
	}()

	huge := hugeService()
	body, err := json.Marshal(huge)
	require.NoError(t, err)
	t.Logf("the huge Service object is %d KB", len(body)>>10)
	createService(t, sb, huge)
	hugeCreated := time.Now()
	pollGuarded(t, guard, 2*time.Minute, "every agent to show TooManyFlows for budget/huge", func(ctx context.Context) (bool, string, error) {
		return servicemapProblem(ctx, sb, "huge", reasonTooManyFlows)
	})

	t.Run("OtherServiceAnswers", func(t *testing.T) {
		start := time.Now()
		small := createService(t, sb, tcpService(budgetNS, "small", "web", corev1.ServiceTypeClusterIP, 80))
		addr := hostPort(small.Spec.ClusterIP, 80)
		pollGuarded(t, guard, 10*time.Second, "a ClusterIP Service created after the huge one to answer", func(context.Context) (bool, string, error) {
			got := outcome(clientNS, addr)
			return got == answeredOutcome("web-1"), "last outcome: " + got, nil
		})
		t.Logf("budget/small answered %v after it was created", time.Since(start).Round(time.Millisecond))
	})
	t.Run("OneWarningEventPerAgent", func(t *testing.T) {
		pollGuarded(t, guard, 30*time.Second, "one TooManyFlows Warning Event from each agent", func(ctx context.Context) (bool, string, error) {
			return tooManyFlowsEvents(ctx, sb)
		})
	})
	t.Run("AgentsKeepSyncingWithinMemory", func(t *testing.T) {
		// Two more syncs of every agent with the huge Service still there (a new Service and
		// its endpoints), and a full resync period (30 s) passed since the huge Service came:
		// the memory guard holds through a periodic full resync too.
		before := map[string]int{}
		for _, n := range sb.Nodes {
			info, err := n.API.AgentInfo(ctx)
			require.NoError(t, err)
			before[n.Name] = info.Sync.Syncs
		}
		createService(t, sb, tcpService(budgetNS, "small2", "web", corev1.ServiceTypeClusterIP, 80))
		pollGuarded(t, guard, 90*time.Second, "every agent to sync twice more without error", func(ctx context.Context) (bool, string, error) {
			for _, n := range sb.Nodes {
				info, err := n.API.AgentInfo(ctx)
				if err != nil {
					return false, n.Name + ": " + err.Error(), nil
				}
				if info.Sync.LastError != "" {
					return false, "", fmt.Errorf("%s: last sync failed: %s", n.Name, info.Sync.LastError)
				}
				if info.Sync.Syncs < before[n.Name]+2 {
					return false, fmt.Sprintf("%s: %d syncs, want %d", n.Name, info.Sync.Syncs, before[n.Name]+2), nil
				}
			}
			if d := time.Since(hugeCreated); d < budgetFullSyncPeriod+5*time.Second {
				return false, fmt.Sprintf("%v since the huge Service came", d.Round(time.Second)), nil
			}
			return true, "", nil
		})
		require.NoError(t, guard.check())
		ok, why, err := servicemapProblem(ctx, sb, "huge", reasonTooManyFlows)
		require.NoError(t, err)
		require.True(t, ok, why)
		for _, n := range sb.Nodes {
			// The host captures none of the refused Service's addresses (nft service-ports).
			addrs, err := n.ServicePortAddrs()
			require.NoError(t, err)
			for a := range addrs {
				ip, err := netip.ParseAddr(a)
				require.NoError(t, err)
				require.False(t, budgetExternalIPs.Contains(ip), "%s's host captures %s of the refused Service", n.Name, a)
			}
			for _, path := range []string{"/healthz", "/livez"} {
				code, raw, err := n.NS.HTTPStatus(ctx, "http://127.0.0.1:10256"+path)
				require.NoError(t, err)
				require.Equal(t, 200, code, "%s's agent %s: %s", n.Name, path, raw)
			}
		}
	})
}

// servicemapProblem reports whether every agent's servicemap lists Service budget/name with
// problem reason.
func servicemapProblem(ctx context.Context, sb *framework.Sandbox, name, reason string) (bool, string, error) {
	for _, n := range sb.Nodes {
		m, err := n.API.ServiceMap(ctx, budgetNS, name)
		if err != nil {
			return false, n.Name + ": " + err.Error(), nil
		}
		if len(m.Items) == 0 {
			return false, n.Name + ": not in the servicemap", nil
		}
		for _, it := range m.Items {
			if it.Problem == nil || it.Problem.Reason != reason {
				return false, fmt.Sprintf("%s: row %s shows problem %+v, want %s", n.Name, it.PortName, it.Problem, reason), nil
			}
		}
	}
	return true, "", nil
}

// tooManyFlowsEvents reports whether each agent has raised exactly one TooManyFlows Warning
// Event on budget/huge (an Event object from its node with count 1); more is an error.
func tooManyFlowsEvents(ctx context.Context, sb *framework.Sandbox) (bool, string, error) {
	evs, err := sb.CP.Client.CoreV1().Events(budgetNS).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=huge"})
	if err != nil {
		return false, err.Error(), nil
	}
	count := map[string]int32{}
	for _, e := range evs.Items {
		if e.Type == corev1.EventTypeWarning && e.Reason == reasonTooManyFlows {
			count[e.Source.Host] += max(e.Count, 1)
		}
	}
	for _, n := range sb.Nodes {
		switch c := count[n.Name]; {
		case c > 1:
			return false, "", fmt.Errorf("%s raised %d TooManyFlows Events on budget/huge, want one", n.Name, c)
		case c == 0:
			return false, fmt.Sprintf("no Event from %s yet (%v)", n.Name, count), nil
		}
	}
	return true, "", nil
}
