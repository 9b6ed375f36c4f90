//go:build cluster && upstream

package cluster

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// TestUpstreamE2E is `make test-upstream-e2e`: the upstream Kubernetes e2e suite's Services and
// LoadBalancers specs (UpstreamOptions) against a real cluster: no kube-proxy, the chart's
// antrea-agent with proxyAll, its antrea-controller as the LoadBalancer provider with the VIP
// pool LBPool (UPSTREAM_E2E_IPMODE=Proxy: the Proxy pool ProxyPool, which ProxyLB in the switch
// namespace relays to the nodes' NodePorts, as a cloud's proxy load balancer does), CoreDNS as
// kube-dns and kube-controller-manager with its default controllers. It
// prints "N passed, N failed, N skipped" and one line per spec, and fails when a spec failed.
// The output, JUnit report and summary stay in _output/upstream-e2e/<time>.
func TestUpstreamE2E(t *testing.T) {
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	o, err := UpstreamOptionsFromEnv(upstreamOutDir(root, time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "_output", "bin")
	for _, b := range []string{"e2e.test", "ginkgo"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			t.Fatalf("%v: run hack/build-e2e.sh first", err)
		}
	}
	c := StartWith(t, Options{Nodes: nodeCount(t), DefaultControllers: true})
	start := time.Now()
	pool := LBPool
	if o.IPMode == IPModeProxy {
		pool = ProxyPool
	}
	c.Helm(t, append([]string{"install", "antrea-proxy", c.ChartPath(), "--namespace", Namespace}, c.InstallArgsWithPool(pool, o.IPMode)...)...)
	c.WaitAgentsRolled(t, 5*time.Minute)
	c.WaitDeploymentAvailable(t, Namespace, "antrea-controller", 3*time.Minute)
	c.WaitNodesReady(t)
	c.WaitDeploymentAvailable(t, Namespace, "coredns", 3*time.Minute)
	t.Logf("cluster up with the chart and kube-dns in %v", time.Since(start).Round(time.Second))
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Before the first spec: the host reaches the LoadBalancer addresses only on the underlay,
	// from an address outside the nodes' network: the VIPs on-link, the Proxy pool via the
	// switch, whose load balancer relays them.
	if err := c.AddExternalClient(); err != nil {
		t.Fatal(err)
	}
	if o.IPMode == IPModeProxy {
		startProxyLB(t, c, o.OutDir)
	} else if err := RouteIntoUnderlay(LBPool); err != nil {
		t.Fatal(err)
	}
	// And kube-apiserver reaches the Pods, as on a control-plane node.
	if err := c.RoutePodCIDRs(context.Background()); err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(o.OutDir, "repo-list.yaml")
	if err := os.WriteFile(repo, []byte(repoList()), 0o644); err != nil {
		t.Fatal(err)
	}
	runErr := runUpstream(t, o, root, upstreamArgs(o, filepath.Join(bin, "e2e.test"), c.Kubeconfig, len(c.Nodes)), repo)
	junit, err := os.ReadFile(filepath.Join(o.OutDir, "junit_01.xml"))
	if err != nil {
		t.Fatalf("the suite wrote no JUnit report (%v): %v; see %s", runErr, err, o.OutDir)
	}
	results, err := ParseJUnit(junit, o.Focus, o.Skip)
	if err != nil {
		t.Fatal(err)
	}
	summary := Summary(results)
	if err := os.WriteFile(filepath.Join(o.OutDir, "summary.txt"), []byte(summary), 0o644); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("\n==== upstream e2e: %s", summary)
	fmt.Printf("==== output, JUnit report and summary in %s\n", o.OutDir)
	if runErr != nil || strings.Contains(summary, "\nFAILED") {
		t.Errorf("the upstream suite failed (ginkgo: %v); see %s", runErr, o.OutDir)
	}
}

// startProxyLB routes ProxyPool into the switch namespace and starts its ProxyLB there, logging
// to OutDir/proxylb.log; it stops when the test ends.
func startProxyLB(t *testing.T, c *Cluster, outDir string) {
	if err := RouteProxyPool(ProxyPool); err != nil {
		t.Fatal(err)
	}
	if err := c.RoutePodCIDRsFromSwitch(context.Background()); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(outDir, "proxylb.log"))
	if err != nil {
		t.Fatal(err)
	}
	logger := log.New(f, "", log.LstdFlags|log.Lmicroseconds|log.LUTC)
	lb, err := StartProxyLB(c.CP.Client, ProxyPool, nsOps{ns: &framework.NetNS{Name: switchNS}}, logger.Printf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		lb.Stop()
		_ = f.Close()
	})
	t.Logf("Proxy pool %s: the switch namespace's load balancer relays it to the nodes (log: %s)", ProxyPool, f.Name())
}

// runUpstream runs ginkgo with its output in OutDir/e2e.log and on stdout, sampling the load
// average every minute into OutDir/load.txt.
func runUpstream(t *testing.T, o UpstreamOptions, root string, args []string, repoList string) error {
	logFile, err := os.Create(filepath.Join(o.OutDir, "e2e.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(filepath.Join(root, "_output", "bin", "ginkgo"), args...)
	cmd.Dir = o.OutDir
	// GOFLAGS: ginkgo compares its version with the suite's module's (go list -m in e2e.test's
	// directory, which is inside this repository's module); the suite's module is hack/tools/e2e.
	cmd.Env = append(os.Environ(), "KUBE_TEST_REPO_LIST="+repoList,
		"GOFLAGS=-modfile="+filepath.Join(root, "hack", "tools", "e2e", "go.mod"))
	cmd.Stdout = io.MultiWriter(logFile, os.Stdout)
	cmd.Stderr = cmd.Stdout
	// In the caller's process group, so a ^C reaches ginkgo and its e2e.test processes too; ginkgo
	// dies with the test binary.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	fmt.Fprintf(logFile, "ginkgo %s\n", strings.Join(args, " "))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// If the test ends first, SIGTERM lets ginkgo stop its e2e.test processes.
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM) })
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go sampleLoad(ctx, filepath.Join(o.OutDir, "load.txt"))
	start := time.Now()
	err = cmd.Wait()
	t.Logf("the upstream suite ran for %v (ginkgo: %v)", time.Since(start).Round(time.Second), err)
	return err
}

// sampleLoad appends the time and /proc/loadavg to path every minute until ctx ends.
func sampleLoad(ctx context.Context, path string) {
	f, err := os.Create(path)
	if err != nil {
		return
	}
	defer f.Close()
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	for {
		if b, err := os.ReadFile("/proc/loadavg"); err == nil {
			fmt.Fprintf(f, "%s %s", time.Now().UTC().Format(time.TimeOnly), b)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
