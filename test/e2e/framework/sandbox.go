package framework

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/antrea-proxy/antrea-proxy/test/ovssandbox"
)

// SandboxOptions tune StartSandbox. The zero value is two nodes with proxyLoadBalancerIPs=false
// agents; tests usually set Agent.
type SandboxOptions struct {
	// Nodes is the number of nodes; default 2.
	Nodes int
	// Agent configures the node agents; RestartAgents changes it later.
	Agent        AgentOptions
	ControlPlane ControlPlaneOptions
	// DualStack makes an IPv4/IPv6 dual-stack sandbox: the control plane runs dual-stack
	// (ControlPlaneOptions.DualStack), and the nodes, the router and the client also get IPv6
	// underlay addresses (UnderlaySubnet6); Nodes have an InternalIP of each family.
	DualStack bool
	// Proxy is the kind of every node: ProxyAntrea (the default) or ProxyKubeProxy, the
	// reference of the conformance suite (IPv4 only; Agent and RestartAgents do not apply).
	Proxy NodeProxy
	// NodeProxies, when set, is the kind of each node (node i is NodeProxies[i]; Nodes defaults
	// to its length), overriding Proxy: one sandbox can then hold antrea and kube-proxy nodes.
	NodeProxies []NodeProxy
	// DeferProxies makes StartSandbox start no proxy and no kubelet: the caller starts the
	// proxies with StartProxies, e.g. all at the same moment after it created its objects.
	DeferProxies bool
	// KubeProxy configures the kube-proxy nodes.
	KubeProxy KubeProxyOptions
}

// Sandbox is a whole cluster on one machine: the control plane, an underlay with an external
// client and a router/external load balancer, and nodes running the real antrea-agent with a
// kubelet stand-in each. Everything it starts lives in network namespaces it created (named
// NSPrefix + role) and is removed when the test ends, also when it fails. On SIGINT or SIGTERM
// the namespaces (and every process in them) are removed before the process exits; a later
// sandbox removes what a killed test process left behind.
type Sandbox struct {
	CP    *ControlPlane
	Net   *Network
	Nodes []*Node
	Bins  *Binaries
	// ID names this sandbox; NSPrefix ("e2e<ID>-") starts every namespace it creates.
	ID, NSPrefix string
	// Dir holds the binaries and the nodes' files; removed at the end.
	Dir string

	mu    sync.Mutex
	procs []*process
	lbSeq int
	agent AgentOptions
	// kubeProxy is SandboxOptions.KubeProxy.
	kubeProxy KubeProxyOptions
	// dualStack is SandboxOptions.DualStack.
	dualStack bool
	// proxy is SandboxOptions.Proxy.
	proxy NodeProxy
	// nodeProxies is SandboxOptions.NodeProxies.
	nodeProxies []NodeProxy
	// extraDirs are removed, besides Dir, if the process is interrupted (the control plane's
	// and the OVS instances' directories).
	extraDirs []string
}

// removeOnInterrupt adds a directory to remove if the test process is interrupted.
func (s *Sandbox) removeOnInterrupt(dir string) {
	s.mu.Lock()
	s.extraDirs = append(s.extraDirs, dir)
	s.mu.Unlock()
}

const sandboxDirPrefix = "e2e-sb-"

// StartSandbox starts a sandbox and tears it down when the test ends.
func StartSandbox(t testing.TB, opts SandboxOptions) *Sandbox {
	t.Helper()
	ovssandbox.Require(t)
	if opts.Nodes == 0 {
		opts.Nodes = max(2, len(opts.NodeProxies))
	}
	sweepOrphanedSandboxes(t)
	id := randomHex(4)
	dir := filepath.Join(os.TempDir(), sandboxDirPrefix+id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("creating the sandbox directory: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ownerPIDFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		t.Fatalf("writing the sandbox owner pid: %v", err)
	}
	if opts.Proxy == ProxyKubeProxy && opts.DualStack {
		t.Fatal("the kube-proxy node kind is IPv4 only")
	}
	s := &Sandbox{ID: id, NSPrefix: "e2e" + id + "-", Dir: dir, agent: opts.Agent, kubeProxy: opts.KubeProxy, dualStack: opts.DualStack, proxy: opts.Proxy, nodeProxies: opts.NodeProxies}
	if opts.DualStack {
		opts.ControlPlane.DualStack = true
	}
	// Registered first, so it runs last: after every process is stopped, remove the namespaces.
	t.Cleanup(func() {
		for _, name := range listNetNS(s.NSPrefix) {
			if err := deleteNetNS(name); err != nil {
				t.Errorf("sandbox cleanup: %v", err)
			}
		}
		_ = os.RemoveAll(dir)
	})
	stopSignals := s.removeOnSignal()
	t.Cleanup(stopSignals)

	type built struct {
		b   *Binaries
		err error
	}
	buildDone := make(chan built, 1)
	go func() {
		b, err := BuildBinaries(filepath.Join(dir, "bin"))
		buildDone <- built{b, err}
	}()
	s.CP = StartControlPlane(t, opts.ControlPlane)
	s.removeOnInterrupt(s.CP.Dir)
	res := <-buildDone
	if res.err != nil {
		t.Fatal(res.err)
	}
	s.Bins = res.b
	start := time.Now()
	if err := s.start(t, opts); err != nil {
		t.Fatalf("starting the sandbox (logs in %s): %v", s.CP.LogDir, err)
	}
	t.Logf("sandbox %s ready in %v: %d nodes, logs in %s", s.ID, time.Since(start).Round(time.Millisecond), len(s.Nodes), s.CP.LogDir)
	return s
}

func (s *Sandbox) start(t testing.TB, opts SandboxOptions) error {
	if err := grantAgentRBAC(context.Background(), s.CP.Client); err != nil {
		return err
	}
	var err error
	if s.Net, err = newNetwork(s.newNS); err != nil {
		return err
	}
	if s.dualStack {
		if err := s.Net.EnableIPv6(); err != nil {
			return err
		}
	}
	for i := 0; i < opts.Nodes; i++ {
		n, err := s.addNode(t, i)
		if err != nil {
			return err
		}
		s.Nodes = append(s.Nodes, n)
	}
	if err := s.Net.RouteVIPs(s.Nodes[0].IP); err != nil {
		return err
	}
	// Registered after OVS, so it runs before OVS stops: kubelets (CNI DEL while the agents
	// still answer), then agents and every other process; failed tests get the logs' tails.
	t.Cleanup(func() { s.stop(t) })
	if opts.DeferProxies {
		return s.prepareDeferredProxies()
	}
	if s.proxy == ProxyKubeProxy {
		if err := s.startKubeProxies(); err != nil {
			return err
		}
		return s.forEachNode(func(n *Node) error { return n.startKubelet() })
	}
	if err := s.forEachNode(func(n *Node) error { return n.startAgent(s.agent) }); err != nil {
		return err
	}
	return s.forEachNode(func(n *Node) error { return n.startKubelet() })
}

// forEachNode runs fn for every node concurrently and joins the errors.
func (s *Sandbox) forEachNode(fn func(n *Node) error) error {
	errs := make([]error, len(s.Nodes))
	var wg sync.WaitGroup
	for i, n := range s.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(n)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// RestartAgents stops every node's agent and starts it again with opts (a new
// antrea-agent.conf), waiting until each has synced. Pods keep running.
func (s *Sandbox) RestartAgents(opts AgentOptions) error {
	if s.proxy == ProxyKubeProxy {
		return fmt.Errorf("sandbox %s runs kube-proxy nodes, not antrea-agents", s.ID)
	}
	s.agent = opts
	return s.forEachNode(func(n *Node) error {
		n.stopAgent()
		return n.startAgent(opts)
	})
}

// Agent is the configuration the agents currently run with.
func (s *Sandbox) Agent() AgentOptions { return s.agent }

func (s *Sandbox) stop(t testing.TB) {
	for _, n := range s.Nodes {
		if n.Kubelet != nil {
			n.Kubelet.stop()
		}
	}
	for _, n := range s.Nodes {
		n.stopAgent()
		if n.relay != nil {
			_ = n.relay.Close()
		}
	}
	s.mu.Lock()
	procs := s.procs
	s.procs = nil
	s.mu.Unlock()
	for _, p := range procs {
		p.Stop()
	}
	if t.Failed() {
		for _, n := range s.Nodes {
			proxyLog := "antrea-agent-" + n.Name + ".log"
			if n.Proxy == ProxyKubeProxy {
				proxyLog = "kube-proxy-" + n.Name + ".log"
			}
			for _, f := range []string{proxyLog, "kubelet-" + n.Name + ".log"} {
				p := &process{LogPath: filepath.Join(s.CP.LogDir, f)}
				t.Logf("---- %s: last 40 lines of %s ----\n%s", n.Name, p.LogPath, lastLines(p.logTail(256<<10), 40))
			}
		}
	}
}

// newNS creates the namespace NSPrefix+role.
func (s *Sandbox) newNS(role string) (*NetNS, error) { return createNetNS(s.NSPrefix + role) }

// startInNS runs path with args inside ns, logging to <LogDir>/<name>.log; the sandbox stops it
// at the end unless the caller does first.
func (s *Sandbox) startInNS(name string, ns *NetNS, path string, args ...string) (*process, error) {
	logName := strings.NewReplacer("/", "_", ":", "_").Replace(name) + ".log"
	p, err := startProcess(name, filepath.Join(s.CP.LogDir, logName), "ip", append([]string{"netns", "exec", ns.Name, path}, args...)...)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.procs = append(s.procs, p)
	s.mu.Unlock()
	return p, nil
}

// removeOnSignal removes the sandbox's namespaces (and every process in them) and its directory
// if the test process gets SIGINT or SIGTERM, then exits; the control plane's processes die
// with the test process (see startProcess). The returned function disarms it.
func (s *Sandbox) removeOnSignal() func() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-ch:
			fmt.Fprintf(os.Stderr, "e2e sandbox %s: %v: removing its namespaces and processes\n", s.ID, sig)
			for _, name := range listNetNS(s.NSPrefix) {
				_ = deleteNetNS(name)
			}
			_ = os.RemoveAll(s.Dir)
			s.mu.Lock()
			dirs := s.extraDirs
			s.mu.Unlock()
			for _, d := range dirs {
				_ = os.RemoveAll(d)
			}
			os.Exit(130)
		case <-done:
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
	}
}

// sweepOrphanedSandboxes removes the namespaces and directories of sandboxes whose test process
// was killed before its cleanups ran.
func sweepOrphanedSandboxes(t testing.TB) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), sandboxDirPrefix+"*"))
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, ownerPIDFile))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			continue
		}
		id := strings.TrimPrefix(filepath.Base(d), sandboxDirPrefix)
		for _, name := range listNetNS("e2e" + id + "-") {
			if err := deleteNetNS(name); err != nil {
				t.Logf("removing namespace %s of killed test process %d: %v", name, pid, err)
			}
		}
		if err := os.RemoveAll(d); err == nil {
			t.Logf("removed sandbox %s, left behind by killed test process %d", id, pid)
		}
	}
}

func randomHex(n int) string {
	b := make([]byte, (n+1)/2)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)[:n]
}

// hostPortOf returns the host:port of a URL.
func hostPortOf(u string) (string, error) {
	parsed, err := url.Parse(u)
	if err != nil || parsed.Host == "" {
		return "", fmt.Errorf("no host:port in URL %q", u)
	}
	return parsed.Host, nil
}

// Binaries are the sandbox's own binaries, built from this checkout.
type Binaries struct {
	Dir string
}

// binaryPackages are built into Binaries.Dir, each named after its directory.
var binaryPackages = []string{"./cmd/antrea-agent", "./cmd/antrea-cni", "./cmd/antctl", "./test/e2e/echoserver", "./test/e2e/l4proxy"}

// BuildBinaries builds antrea-agent, antrea-cni, antctl, the echo server and l4proxy into dir.
// The Go build cache makes it take seconds after the first time.
func BuildBinaries(dir string) (*Binaries, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	args := append([]string{"build", "-o", dir + "/"}, binaryPackages...)
	cmd := exec.CommandContext(ctx, goTool(), args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building the sandbox binaries (go %s): %w\n%s", strings.Join(args, " "), err, out)
	}
	return &Binaries{Dir: dir}, nil
}

// goTool finds the go command (ovssandbox.GoTool).
func goTool() string { return ovssandbox.GoTool() }
