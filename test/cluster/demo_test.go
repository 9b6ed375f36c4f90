//go:build cluster && clusterdemo

package cluster

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDemoCluster is `make demo-cluster`: the cluster of TestRealCluster with the chart and the
// demo workloads installed, left running until SIGTERM/SIGINT (`make demo-cluster-down`). It
// writes the kubeconfig and the commands to try to $CLUSTER_DEMO_READY.
func TestDemoCluster(t *testing.T) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	c := Start(t, nodeCount(t))
	c.Helm(t, append([]string{"install", "antrea-proxy", c.ChartPath(), "--namespace", Namespace}, c.InstallArgs()...)...)
	c.WaitAgentsRolled(t, 5*time.Minute)
	c.WaitDeploymentAvailable(t, Namespace, "antrea-controller", 3*time.Minute)
	c.WaitNodesReady(t)
	c.CreateWorkloads(t)
	c.WaitDeploymentAvailable(t, DemoNamespace, "echo", 3*time.Minute)
	waitPodRunning(t, c, DemoNamespace, "client")
	svc := getService(t, c, "echo")
	vip := waitLoadBalancer(t, c, "echo-lb")
	probeUntilAnswer(t, c, vip, 80)
	agent := c.AgentPod(t, c.Nodes[0].Name).Name
	kubectl := "_output/bin/kubectl --kubeconfig " + c.Kubeconfig
	nodes, _ := c.Kubectl(ctx, "get", "nodes", "-o", "wide")
	pods, _ := c.Kubectl(ctx, "get", "pods", "-A", "-o", "wide")
	var b strings.Builder
	fmt.Fprintf(&b, "A %d-node cluster is running, the antrea-proxy chart installed.\n\n", len(c.Nodes))
	fmt.Fprintf(&b, "export KUBECONFIG=%s\n\n%s\n%s\n", c.Kubeconfig, nodes, pods)
	fmt.Fprintf(&b, "Try:\n")
	fmt.Fprintf(&b, "  %s -n demo exec client -- bash -c 'exec 3<>/dev/tcp/%s/80; head -n1 <&3'   # ClusterIP\n", kubectl, svc.Spec.ClusterIP)
	fmt.Fprintf(&b, "  %s -n demo exec client -- bash -c 'exec 3<>/dev/tcp/%s/80; head -n1 <&3'   # LoadBalancer VIP\n", kubectl, vip)
	fmt.Fprintf(&b, "  %s -n kube-system exec %s -c antrea-agent -- antctl get servicemap -A\n", kubectl, agent)
	fmt.Fprintf(&b, "  _output/bin/helm --kubeconfig %s -n kube-system upgrade antrea-proxy build/charts/antrea-proxy --reuse-values --set antreaProxy.proxyLoadBalancerIPs=false\n", c.Kubeconfig)
	fmt.Fprintf(&b, "Stop it with: make demo-cluster-down\n")
	if err := os.WriteFile(os.Getenv("CLUSTER_DEMO_READY"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	<-ctx.Done()
	t.Log("stopping the demo cluster")
}
