//go:build e2e

package conformance

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// echoPodOn is one echo pod of a conntrack sandbox: its name (also its app label) and the
// index of its node.
type echoPodOn struct {
	name string
	node int
}

// conntrackSandbox is the set-up the conntrack cases of this package share: an antrea-proxy
// sandbox with one namespace of echo pods, the last of which is the client.
type conntrackSandbox struct {
	*framework.Sandbox
	ns   string
	pods []*corev1.Pod
	// clientNS is the network namespace of the last pod.
	clientNS *framework.NetNS
}

// startConntrackSandbox starts the sandbox, creates namespace ns and runs the pods.
func startConntrackSandbox(t *testing.T, ns string, pods ...echoPodOn) *conntrackSandbox {
	t.Helper()
	sb := framework.StartSandbox(t, framework.SandboxOptions{Proxy: framework.ProxyAntrea})
	ctx := context.Background()
	if err := sb.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	specs := make([]*corev1.Pod, len(pods))
	for i, p := range pods {
		specs[i] = framework.EchoPod(ns, p.name, sb.Nodes[p.node], map[string]string{"app": p.name})
	}
	running, err := sb.RunPods(ctx, specs...)
	if err != nil {
		t.Fatal(err)
	}
	clientNS, err := sb.PodNetNS(running[len(running)-1])
	if err != nil {
		t.Fatal(err)
	}
	return &conntrackSandbox{Sandbox: sb, ns: ns, pods: running, clientNS: clientNS}
}

// createService creates svc in the sandbox's namespace and waits until the agents programmed
// it with its one endpoint.
func (c *conntrackSandbox) createService(t *testing.T, svc *corev1.Service) *corev1.Service {
	t.Helper()
	ctx := context.Background()
	svc, err := c.CP.Client.CoreV1().Services(c.ns).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WaitProgrammed(ctx, c.ns, svc.Name, "with its endpoint", framework.HasEndpoints(1)); err != nil {
		t.Fatal(err)
	}
	return svc
}
