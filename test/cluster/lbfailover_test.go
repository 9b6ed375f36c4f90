//go:build cluster

package cluster

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/antrea-proxy/antrea-proxy/pkg/lbapi"
	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// failoverBound is the longest a VIP-mode address may stay unanswered after an unplanned failure
// of its announcing node (docs/design/failure-handling.md, "LoadBalancer IP failover").
const failoverBound = 3 * time.Second

// failoverNamespace holds the measured Service and its echo Pods.
const failoverNamespace = "failover"

// TestClusterLBFailover is `make test-cluster-failover`: on three real nodes, an outside client
// (the host, from externalClient) opens a TCP connection every 50 ms to a VIP-mode LoadBalancer
// IP while the node announcing it fails or leaves: (a) its antrea-agent and ovs-vswitchd are
// SIGKILLed, (b) the whole node is frozen (cgroup freezer: kubelet, containerd, every container)
// and thawed, (c) it is drained with kubectl drain, (d) its agent Pod is deleted (SIGTERM to the
// agent and antrea-ovs: Lease release and handover). The echo Pods run on the third node, which
// never announces (node.kubernetes.io/exclude-from-external-load-balancers), so what is measured
// is the address's move, not the loss of endpoints; antrea-controller runs there too (a failure of
// the node running it delays every move). Targets: answers again within failoverBound after (a)
// and (b), no failed connection for (c) and (d). Last, (d) again with the antrea-ovs container
// stopping at once (OVS_STOP_WAIT=0), reported for comparison.
func TestClusterLBFailover(t *testing.T) {
	c := Start(t, 3)
	dumpAgentGoroutinesOnFailure(t, c)
	backend := c.Nodes[2].Name
	ctx := context.Background()
	if _, err := c.Kubectl(ctx, "label", "node", backend, corev1.LabelNodeExcludeBalancers+"=true"); err != nil {
		t.Fatal(err)
	}
	// antrea-controller, which moves the addresses, runs on the backend node: a failure of the
	// node running it delays every move until it is back (docs/design/failure-handling.md).
	c.installForOutsideClient(t, "--set-json", fmt.Sprintf(`controller.nodeSelector={"kubernetes.io/hostname":%q}`, backend))
	f := &failover{c: c, backend: backend}
	f.createWorkload(t)
	f.ip = f.waitVIP(t)
	f.addr = net.JoinHostPort(f.ip.String(), "80")
	t.Logf("Service %s/web: VIP %s, echo Pods on %s", failoverNamespace, f.ip, backend)
	for _, n := range c.Nodes {
		mac, err := uplinkMAC(n.Name)
		t.Logf("%s: eth0 %s %v", n.Name, mac, err)
	}

	t.Run("KillAgentAndOVS", f.killAgentAndOVS)
	t.Run("FreezeNode", f.freezeNode)
	t.Run("Drain", f.drain)
	t.Run("DeleteAgentPod", func(t *testing.T) { f.deleteAgentPod(t, true) })
	// The same with the antrea-ovs container stopping at once (the behaviour before start-ovs
	// waited for the agent), for comparison: reported, not checked.
	t.Run("DeleteAgentPodOVSStopsAtOnce", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := c.Kubectl(ctx, "-n", Namespace, "set", "env", "daemonset/antrea-agent", "-c", "antrea-ovs", "OVS_STOP_WAIT=0"); err != nil {
			t.Fatal(err)
		}
		f.deleteAgentPod(t, false)
	})
}

type failover struct {
	c       *Cluster
	backend string
	ip      netip.Addr
	addr    string
}

// createWorkload creates two echo Pods on the backend node and the LoadBalancer Service web.
func (f *failover) createWorkload(t *testing.T) {
	ctx := context.Background()
	cs := f.c.CP.Client
	labels := map[string]string{"app": "web"}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: failoverNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: failoverNamespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"kubernetes.io/hostname": f.backend},
					Containers: []corev1.Container{{
						Name: "echo", Image: f.c.Images["echoserver"], ImagePullPolicy: corev1.PullNever,
						Args: []string{"-name=$(POD_NAME)", fmt.Sprintf("-port=%d", echoTCPPort), fmt.Sprintf("-http-port=%d", echoHTTPPort)},
						Env: []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{
							FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(echoTCPPort)}},
							PeriodSeconds: 2,
						},
					}},
				},
			},
		},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: failoverNamespace},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: labels,
			Ports: []corev1.ServicePort{{Name: "tcp", Port: 80, TargetPort: intstr.FromInt32(echoTCPPort)}}},
	}
	if _, err := cs.AppsV1().Deployments(failoverNamespace).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Services(failoverNamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.c.WaitDeploymentAvailable(t, failoverNamespace, "web", 3*time.Minute)
}

// waitVIP waits for the Service's VIP-mode ingress IP and its announcing node.
func (f *failover) waitVIP(t *testing.T) netip.Addr {
	var ip netip.Addr
	framework.WaitFor(t, 2*time.Minute, "Service web to get an announced VIP", func(ctx context.Context) (bool, string, error) {
		svc, err := f.c.CP.Client.CoreV1().Services(failoverNamespace).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		ing := svc.Status.LoadBalancer.Ingress
		if len(ing) != 1 || ing[0].IPMode == nil || *ing[0].IPMode != corev1.LoadBalancerIPModeVIP {
			return false, fmt.Sprintf("status %+v", svc.Status), nil
		}
		ip, err = netip.ParseAddr(ing[0].IP)
		if err != nil {
			return false, "", err
		}
		return f.announcerOf(svc) != "", "annotation " + svc.Annotations[lbapi.AnnotationAnnouncingNode], nil
	})
	return ip
}

func (f *failover) node(name string) *Node {
	for _, n := range f.c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

func (f *failover) announcerOf(svc *corev1.Service) string {
	as, _ := lbapi.ParseAnnouncingNodes(svc.Annotations[lbapi.AnnotationAnnouncingNode])
	for _, a := range as {
		if a.Addr == f.ip || !f.ip.IsValid() {
			return a.Node
		}
	}
	return ""
}

func (f *failover) announcer(t *testing.T) string {
	svc, err := f.c.CP.Client.CoreV1().Services(failoverNamespace).Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return f.announcerOf(svc)
}

// waitMoved waits until the Service names another announcer than from, and returns it.
func (f *failover) waitMoved(t *testing.T, from string) string {
	var to string
	framework.WaitFor(t, time.Minute, "the VIP to move away from "+from, func(ctx context.Context) (bool, string, error) {
		to = f.announcer(t)
		return to != "" && to != from, "announcer " + to, nil
	})
	return to
}

// clientARP waits, at most 10 s, until the host resolves the VIP to node's uplink MAC address,
// and logs it when it does not: the measurement is the traffic, this only explains it.
func (f *failover) clientARP(t *testing.T, node string) {
	want, err := uplinkMAC(node)
	if err != nil {
		t.Logf("the MAC address of %s: %v", node, err)
		return
	}
	err = framework.Poll(context.Background(), 10*time.Second, fmt.Sprintf("the host to resolve %s to %s (%s)", f.ip, node, want),
		func(context.Context) (bool, string, error) {
			got := neighborMAC(f.ip)
			return got == want, "resolved to " + got, nil
		})
	if err != nil {
		t.Logf("note: %v", err)
	}
}

// waitLeaseRenewed waits until node's announcer Lease was renewed in the last leaseDuration.
func (f *failover) waitLeaseRenewed(t *testing.T, node string) {
	name := "antrea-proxy-announcer-" + node
	framework.WaitFor(t, 3*time.Minute, "Lease "+name+" to be renewed", func(ctx context.Context) (bool, string, error) {
		l, err := f.c.CP.Client.CoordinationV1().Leases(Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" || l.Spec.RenewTime == nil {
			return false, fmt.Sprintf("%+v", l.Spec), nil
		}
		age := time.Since(l.Spec.RenewTime.Time)
		return age < 2*time.Second, fmt.Sprintf("holder %s, renewed %v ago", *l.Spec.HolderIdentity, age), nil
	})
}

// steady waits until every agent runs and renews its Lease and the client reaches the VIP
// through its announcer; it returns the announcer and a running prober.
func (f *failover) steady(t *testing.T, timeout time.Duration) (string, *framework.Prober) {
	f.c.WaitAgentsRolled(t, 5*time.Minute)
	f.c.WaitNodesReady(t)
	for _, n := range f.c.Nodes {
		f.waitLeaseRenewed(t, n.Name)
	}
	from := f.announcer(t)
	f.c.watchNeighbors(t, f.ip)
	p := hostProbe(f.addr, 50*time.Millisecond, timeout)
	if err := p.WaitHealthy(context.Background(), time.Now(), time.Second, time.Minute); err != nil {
		p.Stop()
		t.Fatal(err)
	}
	f.clientARP(t, from)
	if now := f.announcer(t); now != from {
		p.Stop()
		t.Fatalf("the announcer changed from %s to %s while the cluster was settling", from, now)
	}
	return from, p
}

// report logs what the prober saw since at and returns the summary.
func report(t *testing.T, what string, p *framework.Prober, at time.Time) framework.ProbeSummary {
	as := p.Stop()
	s := framework.Summarize(as, at)
	worst, slow := slowest(as)
	t.Logf("%s: %s; slowest answered connection %v, %d took over 1 s", what, s, worst.Round(time.Millisecond), slow)
	return s
}

// killAgentAndOVS: (a) SIGKILL the announcer's antrea-agent and ovs-vswitchd.
func (f *failover) killAgentAndOVS(t *testing.T) {
	from, p := f.steady(t, time.Second)
	pids, err := killNodeProcesses(from, "antrea-agent", "ovs-vswitchd")
	at := time.Now()
	if err != nil {
		p.Stop()
		t.Fatal(err)
	}
	to := f.waitMoved(t, from)
	moved := time.Since(at)
	if err := p.WaitHealthy(context.Background(), at, 2*time.Second, time.Minute); err != nil {
		t.Error(err)
	}
	s := report(t, fmt.Sprintf("SIGKILL of antrea-agent and ovs-vswitchd on %s (PIDs %v); the VIP moved to %s %v later", from, pids, to, moved.Round(time.Millisecond)), p, at)
	if !s.Recovered || s.Recovery > failoverBound {
		t.Errorf("answers again %v after the kill (recovered: %v), want at most %v", s.Recovery, s.Recovered, failoverBound)
	}
}

// freezeNode: (b) freeze every process of the announcer, then thaw it and check it settles.
func (f *failover) freezeNode(t *testing.T) {
	from, p := f.steady(t, time.Second)
	if err := setFrozen(from, true); err != nil {
		p.Stop()
		t.Fatal(err)
	}
	at := time.Now()
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			if err := setFrozen(from, false); err != nil {
				t.Error(err)
			}
		}
	}
	defer thaw()
	to := f.waitMoved(t, from)
	moved := time.Since(at)
	if err := p.WaitHealthy(context.Background(), at, 2*time.Second, time.Minute); err != nil {
		t.Error(err)
	}
	s := report(t, fmt.Sprintf("node %s frozen (cgroup freezer); the VIP moved to %s %v later", from, to, moved.Round(time.Millisecond)), p, at)
	if !s.Recovered || s.Recovery > failoverBound {
		t.Errorf("answers again %v after the freeze (recovered: %v), want at most %v", s.Recovery, s.Recovered, failoverBound)
	}

	p = hostProbe(f.addr, 50*time.Millisecond, time.Second)
	if err := p.WaitHealthy(context.Background(), time.Now(), time.Second, time.Minute); err != nil {
		p.Stop()
		t.Fatal(err)
	}
	thaw()
	at = time.Now()
	f.waitLeaseRenewed(t, from)
	if err := p.WaitHealthy(context.Background(), time.Now(), 3*time.Second, time.Minute); err != nil {
		t.Error(err)
	}
	now := f.announcer(t)
	f.clientARP(t, now)
	s = report(t, fmt.Sprintf("after thawing %s (its Lease renewed again; announcer now %s)", from, now), p, at)
	if s.Failed > 0 {
		t.Errorf("%d connections failed after the thaw, want 0: %s", s.Failed, s.LastError)
	}
}

// drain: (c) kubectl drain of the announcer under 20 connections/s.
func (f *failover) drain(t *testing.T) {
	from, p := f.steady(t, 2*time.Second)
	at := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := f.c.Kubectl(ctx, "drain", from, "--ignore-daemonsets", "--delete-emptydir-data", "--force", "--timeout=150s")
	defer func() {
		if _, err := f.c.Kubectl(context.Background(), "uncordon", from); err != nil {
			t.Error(err)
		}
	}()
	drained := time.Since(at)
	if err != nil {
		p.Stop()
		t.Fatal(err)
	}
	to := f.waitMoved(t, from)
	f.clientARP(t, to)
	switched := time.Since(at)
	if err := p.WaitHealthy(context.Background(), time.Now(), 2*time.Second, time.Minute); err != nil {
		t.Error(err)
	}
	s := report(t, fmt.Sprintf("kubectl drain %s (done in %v: %s); the VIP moved to %s, the host followed %v after the drain started",
		from, drained.Round(time.Millisecond), lastLine(out), to, switched.Round(time.Millisecond)), p, at)
	if s.Failed > 0 {
		t.Errorf("%d of %d connections failed during the drain, want 0: %s", s.Failed, s.Attempts, s.LastError)
	}
}

// deleteAgentPod: (d) delete the announcer's agent Pod (SIGTERM to antrea-agent and antrea-ovs);
// check: no connection may fail.
func (f *failover) deleteAgentPod(t *testing.T, check bool) {
	from, p := f.steady(t, 2*time.Second)
	pod := f.c.AgentPod(t, from)
	logs := map[string]*logFollower{}
	for _, ctr := range []string{"antrea-agent", "antrea-ovs"} {
		logs[ctr] = f.c.followLogs(f.node(from), pod, ctr)
	}
	at := time.Now()
	if err := f.c.CP.Client.CoreV1().Pods(Namespace).Delete(context.Background(), pod.Name, metav1.DeleteOptions{}); err != nil {
		p.Stop()
		t.Fatal(err)
	}
	to := f.waitMoved(t, from)
	moved := time.Since(at)
	f.clientARP(t, to)
	f.c.WaitAgentsRolled(t, 5*time.Minute)
	// The new agent Pod renews the node's Lease again; the controller may give the address back.
	f.waitLeaseRenewed(t, from)
	if err := p.WaitHealthy(context.Background(), time.Now(), 2*time.Second, time.Minute); err != nil {
		t.Error(err)
	}
	s := report(t, fmt.Sprintf("agent Pod %s of %s deleted; the VIP moved to %s %v later; announcer at the end %s",
		pod.Name, from, to, moved.Round(time.Millisecond), f.announcer(t)), p, at)
	t.Logf("while it stopped, the deleted Pod's antrea-ovs said:\n%s\nits antrea-agent said:\n%s",
		logs["antrea-ovs"].lines("start-ovs:"), logs["antrea-agent"].lines("LoadBalancer", "Lease", "announc", "Stopping", "exit"))
	if check && s.Failed > 0 {
		t.Errorf("%d of %d connections failed while the agent Pod was replaced, want 0: %s", s.Failed, s.Attempts, s.LastError)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
