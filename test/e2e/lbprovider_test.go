//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/antrea-proxy/antrea-proxy/pkg/config"
	"github.com/antrea-proxy/antrea-proxy/pkg/lbapi"
	"github.com/antrea-proxy/antrea-proxy/pkg/loadbalancer/conditions"
	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
	"github.com/antrea-proxy/antrea-proxy/test/e2e/lbstatus"
)

// Pools of the LoadBalancer provider tests. The VIP pool lies inside framework.VIPRange and is
// on-link for the client and the router, so that ARP (the announcing node) decides where its
// traffic goes; the Proxy pool lies inside framework.ProxyRange, whose addresses the router's
// l4proxy instances own.
var (
	providerVIPPool   = netip.MustParsePrefix("172.18.0.192/26")
	providerProxyPool = netip.MustParsePrefix("172.18.1.192/26")
	providerBulkRange = "172.18.2.0-172.18.2.255" // 256 addresses, more than the 200 Services
	providerTinyRange = "172.18.3.1-172.18.3.1"   // one address, for the waiting Service
)

const providerTimeout = 60 * time.Second

type provider struct {
	sb *framework.Sandbox
	lb *framework.LBController
	ns string
	// http is where the controller serves /healthz, /readyz and /metrics once migration
	// restarted it.
	http string
}

// TestLoadBalancerProvider runs the real antrea-controller in the sandbox and checks its
// addresses end to end: status, announcement, traffic, moves, Proxy mode, tri-state skips,
// concurrent allocation and tenant isolation (cross-namespace sharing, reserved addresses).
func TestLoadBalancerProvider(t *testing.T) {
	ctx := context.Background()
	sb := framework.StartSandbox(t, framework.SandboxOptions{Agent: framework.AgentOptions{ProxyLoadBalancerIPs: true}})
	require.NoError(t, sb.Net.RouteOnLink(providerVIPPool))
	lb, err := sb.StartLBController(ctx,
		framework.LBPool{Name: "vip", CIDRs: []netip.Prefix{providerVIPPool}},
		framework.LBPool{Name: "proxy", CIDRs: []netip.Prefix{providerProxyPool}, Proxy: true},
		framework.LBPool{Name: "bulk", Ranges: []string{providerBulkRange}, Proxy: true},
		framework.LBPool{Name: "tiny", Ranges: []string{providerTinyRange}, Proxy: true},
	)
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("---- last 40 lines of antrea-controller.log ----\n%s", lb.LogTail(40))
		}
	})
	p := &provider{sb: sb, lb: lb, ns: "lbprovider"}
	require.NoError(t, sb.CreateNamespace(ctx, p.ns))
	require.NoError(t, sb.CreateNamespace(ctx, tenantNamespace))

	t.Run("VIPServingAndAnnounced", p.vipServing)
	t.Run("LocalEndpointMoves", p.localMoves)
	t.Run("ProxyPool", p.proxyPool)
	t.Run("UnsupportedIsSkipped", p.unsupportedSkipped)
	t.Run("ConcurrentAllocation", p.concurrent)
	t.Run("WaitingServedOnRelease", p.waitingServedOnRelease)
	t.Run("CrossNamespaceSharingRefused", p.crossNamespaceSharing)
	t.Run("DeletedAddressReserved", p.deletedAddressReserved)
	t.Run("MigrationFromAnotherProvider", p.migration)
	t.Run("HealthAndMetrics", p.healthAndMetrics)
	t.Run("UninstallCleanup", p.uninstallCleanup)
}

// waitingServedOnRelease exhausts the one-address pool "tiny", and measures how long the
// waiting Service takes to be served once the holder becomes a ClusterIP Service: the release
// must retry it at once (under 5 s), not at the next resync.
func (p *provider) waitingServedOnRelease(t *testing.T) {
	ctx := context.Background()
	cs := p.sb.CP.Client
	tiny := func(s *corev1.Service) { s.Annotations = map[string]string{lbapi.AnnotationPool: "tiny"} }
	p.create(t, p.service("tiny-a", "none", tiny))
	p.serving(t, "tiny-a")
	p.create(t, p.service("tiny-b", "none", tiny))
	framework.WaitFor(t, providerTimeout, "tiny-b to wait for an address", func(ctx context.Context) (bool, string, error) {
		svc, err := cs.CoreV1().Services(p.ns).Get(ctx, "tiny-b", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		c := findCondition(svc, conditions.TypeServing)
		if c == nil {
			return false, "no Serving condition", nil
		}
		return c.Status == metav1.ConditionFalse && c.Reason == conditions.ReasonInfrastructure, c.Reason + ": " + c.Message, nil
	})

	a, err := cs.CoreV1().Services(p.ns).Get(ctx, "tiny-a", metav1.GetOptions{})
	require.NoError(t, err)
	a.Spec.Type = corev1.ServiceTypeClusterIP
	a.Spec.AllocateLoadBalancerNodePorts = nil
	for i := range a.Spec.Ports {
		a.Spec.Ports[i].NodePort = 0
	}
	start := time.Now()
	_, err = cs.CoreV1().Services(p.ns).Update(ctx, a, metav1.UpdateOptions{})
	require.NoError(t, err)
	framework.WaitFor(t, 5*time.Second, "tiny-b to be served after tiny-a released its address", func(ctx context.Context) (bool, string, error) {
		svc, err := cs.CoreV1().Services(p.ns).Get(ctx, "tiny-b", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		c := findCondition(svc, conditions.TypeServing)
		ok := c != nil && c.Status == metav1.ConditionTrue && len(svc.Status.LoadBalancer.Ingress) == 1 &&
			svc.Status.LoadBalancer.Ingress[0].IP == "172.18.3.1"
		return ok, fmt.Sprintf("ingress %v", svc.Status.LoadBalancer.Ingress), nil
	})
	t.Logf("waiting Service served %v after its address was released", time.Since(start).Round(time.Millisecond))
}

func findCondition(svc *corev1.Service, typ string) *metav1.Condition {
	for i := range svc.Status.Conditions {
		if svc.Status.Conditions[i].Type == typ {
			return &svc.Status.Conditions[i]
		}
	}
	return nil
}

func (p *provider) service(name, app string, mutate func(*corev1.Service)) *corev1.Service {
	svc := echoService(p.ns, name, app, corev1.ServiceTypeLoadBalancer)
	if mutate != nil {
		mutate(svc)
	}
	return svc
}

func (p *provider) create(t *testing.T, svc *corev1.Service) *corev1.Service {
	t.Helper()
	got, err := p.sb.CP.Client.CoreV1().Services(p.ns).Create(context.Background(), svc, metav1.CreateOptions{})
	require.NoError(t, err)
	return got
}

// serving waits for the Serving verdict with the tri-state helper and returns the Service.
func (p *provider) serving(t *testing.T, name string, required ...lbstatus.Feature) *corev1.Service {
	t.Helper()
	r, err := lbstatus.WaitForServing(context.Background(), p.sb.CP.Client, p.ns, name, required, providerTimeout)
	require.NoError(t, err)
	lbstatus.Check(t, r)
	return r.Service
}

// announcer returns the node the Service's annotation names for ip.
func announcer(t *testing.T, svc *corev1.Service, ip netip.Addr) string {
	t.Helper()
	as, err := lbapi.ParseAnnouncingNodes(svc.Annotations[lbapi.AnnotationAnnouncingNode])
	require.NoError(t, err)
	for _, a := range as {
		if a.Addr == ip {
			return a.Node
		}
	}
	return ""
}

func ingressIP(t *testing.T, svc *corev1.Service, mode corev1.LoadBalancerIPMode) netip.Addr {
	t.Helper()
	require.Len(t, svc.Status.LoadBalancer.Ingress, 1, "ingress of %s", svc.Name)
	ing := svc.Status.LoadBalancer.Ingress[0]
	require.NotNil(t, ing.IPMode)
	require.Equal(t, mode, *ing.IPMode)
	ip, err := netip.ParseAddr(ing.IP)
	require.NoError(t, err)
	return ip
}

// waitClientARP waits until the external client resolves ip to node's uplink MAC.
func (p *provider) waitClientARP(t *testing.T, ip netip.Addr, node *framework.Node) {
	t.Helper()
	want, err := node.UplinkMAC()
	require.NoError(t, err)
	framework.WaitFor(t, 30*time.Second, fmt.Sprintf("the client to resolve %s to %s (%s)", ip, node.Name, want),
		func(ctx context.Context) (bool, string, error) {
			got, err := p.sb.Net.Client.NeighborMAC(ip)
			return got == want, "resolved to " + got, err
		})
}

func (p *provider) vipServing(t *testing.T) {
	ctx := context.Background()
	labels := map[string]string{"app": "vip"}
	pods, err := p.sb.RunPods(ctx, framework.EchoPod(p.ns, "vip-1", p.sb.Nodes[0], labels), framework.EchoPod(p.ns, "vip-2", p.sb.Nodes[1], labels))
	require.NoError(t, err)
	p.create(t, p.service("vip", "vip", nil))
	require.NoError(t, p.sb.WaitEndpoints(ctx, p.ns, "vip", pods[0].Status.PodIP, pods[1].Status.PodIP))
	svc := p.serving(t, "vip")
	ip := ingressIP(t, svc, corev1.LoadBalancerIPModeVIP)
	require.True(t, providerVIPPool.Contains(ip), "%s from the VIP pool", ip)
	node := p.sb.NodeByName(announcer(t, svc, ip))
	require.NotNil(t, node, "announcing node of %s: %q", ip, svc.Annotations[lbapi.AnnotationAnnouncingNode])

	seen := map[string]bool{}
	for i := 0; i < 20 && len(seen) < 2; i++ {
		r := echoUntil(t, p.sb.Net.Client, "tcp", hostPort(ip.String(), 80), "the client to reach a pod through "+ip.String(),
			func(r framework.EchoReply) (bool, string) {
				return strings.HasPrefix(r.Server, "vip-"), "not a vip pod"
			})
		seen[r.Server] = true
	}
	require.Len(t, seen, 2, "both pods answer through %s", ip)
	p.waitClientARP(t, ip, node)
}

func (p *provider) localMoves(t *testing.T) {
	ctx := context.Background()
	n1, n2 := p.sb.Nodes[0], p.sb.Nodes[1]
	labels := map[string]string{"app": "local"}
	pods, err := p.sb.RunPods(ctx, framework.EchoPod(p.ns, "local-a", n1, labels))
	require.NoError(t, err)
	p.create(t, p.service("local", "local", func(s *corev1.Service) {
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	}))
	require.NoError(t, p.sb.WaitEndpoints(ctx, p.ns, "local", pods[0].Status.PodIP))
	svc := p.serving(t, "local", conditions.FeatureExternalTrafficPolicy)
	ip := ingressIP(t, svc, corev1.LoadBalancerIPModeVIP)
	p.waitAnnouncer(t, "local", ip, n1.Name)
	r := echoUntil(t, p.sb.Net.Client, "tcp", hostPort(ip.String(), 80), "the client to reach local-a through "+n1.Name,
		func(r framework.EchoReply) (bool, string) { return r.Server == "local-a", "" })
	require.Equal(t, framework.ClientIP.String(), r.ClientIP(), "eTP=Local keeps the client address")
	p.waitClientARP(t, ip, n1)

	// Move the only endpoint to node2: the address follows, and the client's traffic with it
	// (node1 has no local endpoint left, so traffic still sent there would fail).
	require.NoError(t, p.sb.CP.Client.CoreV1().Pods(p.ns).Delete(ctx, "local-a", metav1.DeleteOptions{}))
	pods, err = p.sb.RunPods(ctx, framework.EchoPod(p.ns, "local-b", n2, labels))
	require.NoError(t, err)
	require.NoError(t, p.sb.WaitEndpoints(ctx, p.ns, "local", pods[0].Status.PodIP))
	p.waitAnnouncer(t, "local", ip, n2.Name)
	p.waitClientARP(t, ip, n2)
	r = echoUntil(t, p.sb.Net.Client, "tcp", hostPort(ip.String(), 80), "the client to reach local-b through "+n2.Name,
		func(r framework.EchoReply) (bool, string) { return r.Server == "local-b", "" })
	require.Equal(t, framework.ClientIP.String(), r.ClientIP())
}

func (p *provider) waitAnnouncer(t *testing.T, name string, ip netip.Addr, node string) {
	t.Helper()
	framework.WaitFor(t, 30*time.Second, fmt.Sprintf("Service %s to name %s as the announcer of %s", name, node, ip),
		func(ctx context.Context) (bool, string, error) {
			svc, err := p.sb.CP.Client.CoreV1().Services(p.ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			v := svc.Annotations[lbapi.AnnotationAnnouncingNode]
			return announcer(t, svc, ip) == node, "annotation " + v, nil
		})
}

func (p *provider) proxyPool(t *testing.T) {
	ctx := context.Background()
	labels := map[string]string{"app": "px"}
	pods, err := p.sb.RunPods(ctx, framework.EchoPod(p.ns, "px-1", p.sb.Nodes[1], labels))
	require.NoError(t, err)
	created := p.create(t, p.service("px", "px", func(s *corev1.Service) {
		s.Annotations = map[string]string{lbapi.AnnotationPool: "proxy"}
	}))
	require.NoError(t, p.sb.WaitEndpoints(ctx, p.ns, "px", pods[0].Status.PodIP))
	svc := p.serving(t, "px")
	ip := ingressIP(t, svc, corev1.LoadBalancerIPModeProxy)
	require.True(t, providerProxyPool.Contains(ip), "%s from the Proxy pool", ip)
	require.Empty(t, announcer(t, svc, ip), "no node announces a Proxy address")
	proxyLB, err := p.sb.StartProxyLB(ip, 80, hostPort(p.sb.Nodes[0].IP.String(), nodePortOf(t, created, "tcp")))
	require.NoError(t, err)
	echoUntil(t, p.sb.Net.Client, "tcp", hostPort(ip.String(), 80), "the client to reach px-1 through the external proxy",
		func(r framework.EchoReply) (bool, string) { return r.Server == "px-1", "" })
	st, err := proxyLB.Stats(ctx)
	require.NoError(t, err)
	require.Positive(t, st.TCP, "the l4proxy relayed the connection")
}

// recordingTB captures how lbstatus.Check ends a test.
type recordingTB struct {
	skipped, failed string
}

func (r *recordingTB) Helper()                          {}
func (r *recordingTB) Logf(string, ...any)              {}
func (r *recordingTB) Skipf(format string, args ...any) { r.skipped = fmt.Sprintf(format, args...) }
func (r *recordingTB) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
}

func (p *provider) unsupportedSkipped(t *testing.T) {
	// eTP=Local on a Proxy-mode pool cannot keep the client address; required, it is refused.
	p.create(t, p.service("px-local", "px", func(s *corev1.Service) {
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		s.Annotations = map[string]string{lbapi.AnnotationPool: "proxy",
			lbapi.AnnotationRequiredFeatures: string(conditions.FeatureExternalTrafficPolicy)}
	}))
	r, err := lbstatus.WaitForServing(context.Background(), p.sb.CP.Client, p.ns, "px-local",
		[]lbstatus.Feature{conditions.FeatureExternalTrafficPolicy}, providerTimeout)
	require.NoError(t, err)
	require.Equal(t, lbstatus.Skip, r.Outcome, "reason: %s", r.Reason)
	require.Contains(t, r.Reason, "Unsupported")
	require.Contains(t, r.Reason, string(conditions.FeatureExternalTrafficPolicy))
	rec := &recordingTB{}
	lbstatus.Check(rec, r)
	require.Empty(t, rec.failed)
	require.Contains(t, rec.skipped, "skipping: load balancer provider refuses the Service")
	require.Contains(t, rec.skipped, string(conditions.FeatureExternalTrafficPolicy))
	t.Logf("tri-state helper skipped with: %s", rec.skipped)
}

func (p *provider) concurrent(t *testing.T) {
	ctx := context.Background()
	const n = 200
	ns := "lbbulk"
	require.NoError(t, p.sb.CreateNamespace(ctx, ns))
	cs := p.sb.CP.Client
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			no := false
			svc := &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("bulk-%03d", i),
					Annotations: map[string]string{lbapi.AnnotationPool: "bulk"}},
				Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, AllocateLoadBalancerNodePorts: &no,
					Selector: map[string]string{"app": "none"},
					Ports:    []corev1.ServicePort{{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(framework.EchoPort)}}},
			}
			_, errs[i] = cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	var addrs map[string]string
	framework.WaitFor(t, 2*time.Minute, fmt.Sprintf("%d Services to get an address", n), func(ctx context.Context) (bool, string, error) {
		list, err := cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		addrs = map[string]string{}
		with := 0
		for _, s := range list.Items {
			for _, ing := range s.Status.LoadBalancer.Ingress {
				if prev, dup := addrs[ing.IP]; dup {
					return false, "", fmt.Errorf("%s handed to both %s and %s", ing.IP, prev, s.Name)
				}
				addrs[ing.IP] = s.Name
			}
			if len(s.Status.LoadBalancer.Ingress) > 0 {
				with++
			}
		}
		return with == n, fmt.Sprintf("%d/%d have an address", with, n), nil
	})
	require.Len(t, addrs, n, "%d distinct addresses", n)
	t.Logf("%d Services created at once got %d distinct addresses in %v", n, len(addrs), time.Since(start).Round(time.Millisecond))
}

// Addresses "another provider" gave before antrea-controller took over: one inside the VIP
// pool (high, so no earlier subtest's allocation holds it), one outside every pool.
var (
	migratedInPool  = netip.MustParseAddr("172.18.0.250")
	migratedOutside = netip.MustParseAddr("203.0.113.7")
	otherClassIP    = netip.MustParseAddr("172.18.0.251")
)

// migration: while antrea-controller is stopped, another provider serves class-less
// LoadBalancer Services (it set status.loadBalancer.ingress; no finalizer, no conditions, no
// ipMode). When antrea-controller starts, the Service whose address lies in its VIP pool keeps
// that address (now with ipMode VIP, an announcing node, the finalizer and the KEP-4631
// conditions) and answers there; the one whose address lies outside every pool gets a new
// address from the pools; a Service of another class is left alone.
func (p *provider) migration(t *testing.T) {
	ctx := context.Background()
	cs := p.sb.CP.Client
	labels := map[string]string{"app": "mig"}
	pods, err := p.sb.RunPods(ctx, framework.EchoPod(p.ns, "mig-1", p.sb.Nodes[0], labels))
	require.NoError(t, err)

	p.sb.StopLBController(p.lb)
	other := "example.com/other-lb"
	for _, m := range []struct {
		name string
		ip   netip.Addr
		mut  func(*corev1.Service)
	}{
		{"mig-in", migratedInPool, nil},
		{"mig-out", migratedOutside, nil},
		{"mig-other", otherClassIP, func(s *corev1.Service) { s.Spec.LoadBalancerClass = &other }},
	} {
		svc := p.create(t, p.service(m.name, "mig", m.mut))
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: m.ip.String()}}
		_, err := cs.CoreV1().Services(p.ns).UpdateStatus(ctx, svc, metav1.UpdateOptions{})
		require.NoError(t, err, "the other provider's status of %s", m.name)
	}
	require.NoError(t, p.sb.WaitEndpoints(ctx, p.ns, "mig-in", pods[0].Status.PodIP))

	p.http, err = p.sb.RestartLBController(p.lb)
	require.NoError(t, err)

	in := p.serving(t, "mig-in")
	require.Equal(t, migratedInPool, ingressIP(t, in, corev1.LoadBalancerIPModeVIP), "adopted, not replaced")
	require.Contains(t, in.Finalizers, lbapi.Finalizer)
	require.NotNil(t, findCondition(in, conditions.TypeProvisioning))
	node := p.sb.NodeByName(announcer(t, in, migratedInPool))
	require.NotNil(t, node, "announcing node of %s: %q", migratedInPool, in.Annotations[lbapi.AnnotationAnnouncingNode])
	echoUntil(t, p.sb.Net.Client, "tcp", hostPort(migratedInPool.String(), 80), "the client to reach mig-1 through the adopted "+migratedInPool.String(),
		func(r framework.EchoReply) (bool, string) { return r.Server == "mig-1", "" })

	out := p.serving(t, "mig-out")
	ip := ingressIP(t, out, corev1.LoadBalancerIPModeVIP)
	require.NotEqual(t, migratedOutside, ip)
	require.True(t, providerVIPPool.Contains(ip), "%s: a new address from the first pool", ip)

	// Once both are served the controller has seen the other-class one too: untouched.
	o, err := cs.CoreV1().Services(p.ns).Get(ctx, "mig-other", metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, o.Status.LoadBalancer.Ingress, 1)
	require.Equal(t, otherClassIP.String(), o.Status.LoadBalancer.Ingress[0].IP)
	require.Empty(t, o.Status.Conditions)
	require.NotContains(t, o.Finalizers, lbapi.Finalizer)
}

// healthAndMetrics checks the restarted controller's endpoints: /readyz is 200 once it has
// synced, /healthz is 200, and /metrics counts what the Services show: the addresses in use per
// pool, the Services by Serving condition, and the one address allocated since the restart
// (mig-out's; restored and adopted addresses are not allocations).
func (p *provider) healthAndMetrics(t *testing.T) {
	require.NotEmpty(t, p.http, "needs MigrationFromAnotherProvider, which restarts the controller")
	framework.WaitFor(t, providerTimeout, "antrea-controller /readyz to be 200", func(ctx context.Context) (bool, string, error) {
		code, body, err := framework.HTTPGet(ctx, p.http, "/readyz?verbose")
		return err == nil && code == http.StatusOK, fmt.Sprintf("%d %s %v", code, body, err), nil
	})
	for _, path := range []string{"/healthz", "/readyz/leader"} {
		code, body, err := framework.HTTPGet(context.Background(), p.http, path)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code, "%s: %s", path, body)
	}
	framework.WaitFor(t, providerTimeout, "/metrics to match the Services", func(ctx context.Context) (bool, string, error) {
		want, err := p.expectedMetrics(ctx)
		if err != nil {
			return false, "", err
		}
		code, body, err := framework.HTTPGet(ctx, p.http, "/metrics")
		if err != nil || code != http.StatusOK {
			return false, fmt.Sprintf("/metrics: %d %v", code, err), nil
		}
		got := parseSamples(body)
		var diffs []string
		for name, v := range want {
			if got[name] != v {
				diffs = append(diffs, fmt.Sprintf("%s = %v, want %v", name, got[name], v))
			}
		}
		slices.Sort(diffs)
		return len(diffs) == 0, strings.Join(diffs, "; "), nil
	})
}

// expectedMetrics derives, from every Service in the cluster, the samples /metrics must show.
func (p *provider) expectedMetrics(ctx context.Context) (map[string]float64, error) {
	list, err := p.sb.CP.Client.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	used := map[string]map[string]bool{}
	want := map[string]float64{`antrea_controller_lb_allocations_total{pool="vip"}`: 1}
	serving := 0.0
	for _, pool := range p.lb.Config.IPPools {
		used[pool.Name] = map[string]bool{}
	}
	for i := range list.Items {
		svc := &list.Items[i]
		class := p.lb.Config.LoadBalancerClass
		if class == "" {
			class = config.DefaultLoadBalancerClass
		}
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || (svc.Spec.LoadBalancerClass != nil && *svc.Spec.LoadBalancerClass != class) {
			continue
		}
		if c := findCondition(svc, conditions.TypeServing); c != nil && c.Status == metav1.ConditionTrue {
			serving++
		}
		for _, ing := range svc.Status.LoadBalancer.Ingress {
			ip, err := netip.ParseAddr(ing.IP)
			if err != nil {
				continue
			}
			if pool := poolOf(p.lb.Config.IPPools, ip); pool != "" {
				used[pool][ing.IP] = true
			}
		}
	}
	for pool, ips := range used {
		want[fmt.Sprintf(`antrea_controller_lb_pool_addresses_used{pool=%q}`, pool)] = float64(len(ips))
	}
	want[`antrea_controller_lb_services{condition="LoadBalancerServing",reason="Serving",status="True"}`] = serving
	want["antrea_controller_leader"] = 1
	return want, nil
}

func poolOf(pools []config.IPPool, ip netip.Addr) string {
	for _, p := range pools {
		ranges, _ := p.AddressRanges()
		for _, r := range ranges {
			if r.Contains(ip) {
				return p.Name
			}
		}
	}
	return ""
}

// parseSamples reads the samples of a Prometheus text exposition: "name{labels}" → value.
func parseSamples(body string) map[string]float64 {
	out := map[string]float64{}
	for _, l := range strings.Split(body, "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(l[i+1:], 64); err == nil {
			out[l[:i]] = v
		}
	}
	return out
}
