//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver/apiv1"
	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// Helpers of the tenant-safety tests (tenant_*_test.go): what a namespace user may claim with
// a Service (externalIPs, LoadBalancer ingress) must never take traffic that is not the
// Service's own.

// Problem reasons the tenant tests expect in the servicemap: FlowConflict for a Service whose
// claim on another Service's (address, protocol, port) tuple is refused, AddressRefused for a
// Service address the agent never programs (one of its own virtual addresses).
const (
	reasonFlowConflict   = apiv1.ProblemFlowConflict
	reasonAddressRefused = "AddressRefused"
)

// tenantLBClass keeps every LoadBalancer controller away from the tenant tests' LoadBalancer
// Services: a test writes their ingress itself, or leaves them without one.
const tenantLBClass = "tenant.e2e/manual"

// tenantProbeTimeout bounds one connection of the tenant tests: answers come in milliseconds, so a
// connection that takes this long was dropped.
const tenantProbeTimeout = 2 * time.Second

// tcpService is a Service of type typ with one TCP port, port, to the echo port of the pods
// labelled app=<app>.
func tcpService(namespace, name, app string, typ corev1.ServiceType, port int32) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.ServiceSpec{
			Type:     typ,
			Selector: map[string]string{"app": app},
			Ports: []corev1.ServicePort{
				{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: port, TargetPort: intstr.FromInt32(framework.EchoPort)},
			},
		},
	}
}

// manualLB makes svc a LoadBalancer Service no controller serves.
func manualLB(svc *corev1.Service) *corev1.Service {
	class := tenantLBClass
	svc.Spec.Type = corev1.ServiceTypeLoadBalancer
	svc.Spec.LoadBalancerClass = &class
	return svc
}

// outcome connects once from ns to addr over TCP and names what happened: "answered by
// <server>", "refused", "dropped" (no answer within tenantProbeTimeout) or the error.
func outcome(ns *framework.NetNS, addr string) string {
	r, err := ns.Echo(context.Background(), "tcp", addr, tenantProbeTimeout)
	switch {
	case err == nil:
		return answeredOutcome(r.Server)
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case isTimeout(err):
		return "dropped"
	}
	return "error: " + err.Error()
}

// answeredOutcome is the outcome of a connection answered by server.
func answeredOutcome(server string) string { return answeredPrefix + server }

const answeredPrefix = "answered by "

// requireAnsweredBy makes n TCP connections from ns to addr and requires every one to be
// answered by one of servers; promise names what is broken otherwise.
func requireAnsweredBy(t *testing.T, ns *framework.NetNS, addr string, n int, servers map[string]bool, promise string) {
	t.Helper()
	got := map[string]int{}
	for i := 0; i < n; i++ {
		got[outcome(ns, addr)]++
	}
	bad := 0
	for o, c := range got {
		if server, ok := strings.CutPrefix(o, answeredPrefix); !ok || !servers[server] {
			bad += c
		}
	}
	require.Zero(t, bad, "%s: %d of %d connections from netns %s to %s went elsewhere, want every one answered by %v; outcomes %v",
		promise, bad, n, ns.Name, addr, serverList(servers), got)
}

// waitOutcome polls connections from ns to addr until one has outcome want; it returns how
// many connections that took and fails naming promise and the last outcome.
func waitOutcome(t *testing.T, ns *framework.NetNS, addr, want, promise string, timeout time.Duration) int {
	t.Helper()
	tries := 0
	framework.WaitFor(t, timeout, fmt.Sprintf("%s (%s from netns %s: %s)", promise, addr, ns.Name, want), func(context.Context) (bool, string, error) {
		tries++
		got := outcome(ns, addr)
		return got == want, "last outcome: " + got, nil
	})
	return tries
}

// vantage is where a tenant test connects from: a node's host network or a pod's namespace.
type vantage struct {
	what string // "node1 host", "pod on node1"
	ns   *framework.NetNS
}

// hostAndPod are the vantages of node n's host network and of the pod whose namespace is pod.
func hostAndPod(n *framework.Node, pod *framework.NetNS) []vantage {
	return []vantage{{n.Name + " host", n.NS}, {"pod on " + n.Name, pod}}
}

// anyRows is a servicemap condition that only needs the Service to be listed.
func anyRows([]apiv1.ServicePort) (bool, string) { return true, "" }

// waitClockPast waits until the wall clock is in a later second than ts, so that an object
// created now has a strictly later creationTimestamp (which has a resolution of one second).
func waitClockPast(t *testing.T, ts metav1.Time) {
	t.Helper()
	next := ts.Time.Truncate(time.Second).Add(time.Second)
	framework.WaitFor(t, 3*time.Second, "the clock to pass "+next.Format(time.RFC3339), func(context.Context) (bool, string, error) {
		return !time.Now().Before(next), "", nil
	})
}

func serverList(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
