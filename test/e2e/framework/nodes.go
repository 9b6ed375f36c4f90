package framework

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/antrea-proxy/antrea-proxy/pkg/config"
	"github.com/antrea-proxy/antrea-proxy/test/ovssandbox"
)

// Inside every node namespace, the kube-apiserver answers on this address (see Relay).
const nodeAPIServerAddr = "127.0.0.1:6443"

// AgentUser is the identity of every node's antrea-agent; the sandbox binds it to ClusterRole
// AgentClusterRole.
const AgentUser = "antrea-agent"

// Node is one sandbox node: a network namespace on the underlay with its own Open vSwitch, the
// real antrea-agent binary with a kubeconfig and an antrea-agent.conf, a Node object, and a
// kubelet stand-in.
type Node struct {
	Name string
	// IP is the node's underlay address, its Node's InternalIP.
	IP netip.Addr
	// IP6 is the node's IPv6 underlay address, its Node's second InternalIP, in a dual-stack
	// sandbox; the zero Addr otherwise.
	IP6 netip.Addr
	NS  *NetNS
	// OVS runs inside NS.
	OVS *ovssandbox.Instance
	// Dir holds the node's kubeconfig, antrea-agent.conf, sockets and CNI state.
	Dir        string
	Kubeconfig string
	ConfPath   string
	// API reads the agent's API socket.
	API *AgentAPI
	// PodCIDR is what nodeipam gave the Node (its first podCIDR).
	PodCIDR string
	// PodCIDRs are all of the Node's podCIDRs (IPv4 and IPv6 in a dual-stack sandbox).
	PodCIDRs []string
	// Kubelet runs the node's pods.
	Kubelet *Kubelet
	// Proxy is the node's kind: antrea-agent over Open vSwitch, or kube-proxy (then OVS and API
	// are nil, and Kubeconfig and ConfPath are kube-proxy's).
	Proxy NodeProxy

	s     *Sandbox
	relay *Relay
	// agent is the node's proxy process: antrea-agent, or kube-proxy.
	agent *process
	// agentConf is the configuration the agent runs with.
	agentConf *config.AgentConfig
}

// Bridge is the OVS bridge the agent programs.
const Bridge = "br-int"

// addNode builds node i: namespace, underlay port, apiserver relay, OVS, Node object (waiting
// for its podCIDR), credentials and configuration. The agent is started by startAgent. A
// kube-proxy node gets its pod bridge instead of OVS; startKubeProxy writes its credentials.
func (s *Sandbox) addNode(t testing.TB, i int) (*Node, error) {
	name := fmt.Sprintf("node%d", i+1)
	ns, err := s.newNS(fmt.Sprintf("n%d", i+1))
	if err != nil {
		return nil, err
	}
	n := &Node{Name: name, IP: NodeIP(i), NS: ns, Dir: filepath.Join(s.Dir, name), Proxy: s.proxyOf(i), s: s}
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("node %s: %w", name, err)
	}
	if err := s.Net.Attach(ns, fmt.Sprintf("n%d", i+1), n.IP); err != nil {
		return nil, err
	}
	if err := ns.MustExec(
		[]string{"ip", "route", "add", "default", "via", RouterIP.String()},
		// No per-peer rate limit on ICMP errors (1/s with a burst of 6 by default): the
		// conformance suite probes rejecting addresses from the same clients much faster, and
		// a rate-limited rejection would look like a drop.
		[]string{"sysctl", "-q", "-w", "net.ipv4.icmp_ratelimit=0"},
	); err != nil {
		return nil, err
	}
	if s.dualStack {
		n.IP6 = NodeIP6(i)
		if err := s.Net.AttachIPv6(ns, n.IP6, RouterIP6); err != nil {
			return nil, err
		}
	}
	apiserver, err := hostPortOf(s.CP.APIServerURL)
	if err != nil {
		return nil, err
	}
	if n.relay, err = StartRelay(ns, nodeAPIServerAddr, apiserver); err != nil {
		return nil, fmt.Errorf("node %s: %w", name, err)
	}
	if n.Proxy == ProxyKubeProxy {
		if err := n.register(); err != nil {
			return nil, err
		}
		return n, n.setupPodBridge()
	}
	n.OVS = ovssandbox.Start(t, ovssandbox.Options{NetNS: ns.Name})
	s.removeOnInterrupt(n.OVS.RunDir)
	// Keep OVS's logs with the other components' (ovssandbox removes its run directory).
	t.Cleanup(func() { n.copyOVSLogs() })
	if err := n.register(); err != nil {
		return nil, err
	}
	kp, err := s.CP.CA.IssueClient(AgentUser, nil)
	if err != nil {
		return nil, err
	}
	n.Kubeconfig = filepath.Join(n.Dir, "kubeconfig")
	if err := WriteKubeconfig(n.Kubeconfig, "https://"+nodeAPIServerAddr, s.CP.CA.CertPEM, kp); err != nil {
		return nil, err
	}
	n.ConfPath = filepath.Join(n.Dir, "antrea-agent.conf")
	n.API = newAgentAPI(filepath.Join(n.Dir, "agent.sock"))
	return n, nil
}

// register creates the Node object with its InternalIP and a Ready condition, and waits for
// nodeipam to give it a podCIDR.
func (n *Node) register() error {
	ctx := context.Background()
	cs := n.s.CP.Client
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: map[string]string{
		corev1.LabelHostname: n.Name, corev1.LabelOSStable: "linux",
	}}}
	if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating Node %s: %w", n.Name, err)
	}
	// nodeipam updates the new Node concurrently: retry on conflicts with a fresh copy.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		cur.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.IP.String()}}
		if n.IP6.IsValid() {
			cur.Status.Addresses = append(cur.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: n.IP6.String()})
		}
		cur.Status.Addresses = append(cur.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: n.Name})
		cur.Status.Conditions = []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "e2e sandbox node", LastHeartbeatTime: now, LastTransitionTime: now,
		}}
		_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("setting the status of Node %s: %w", n.Name, err)
	}
	return Poll(ctx, time.Minute, "nodeipam to assign a podCIDR to Node "+n.Name, func(ctx context.Context) (bool, string, error) {
		got, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, "", err
		}
		if err != nil {
			return false, err.Error(), nil
		}
		n.PodCIDR, n.PodCIDRs = got.Spec.PodCIDR, got.Spec.PodCIDRs
		if n.s.dualStack && len(n.PodCIDRs) < 2 {
			return false, fmt.Sprintf("spec.podCIDRs is %v, want one per family", n.PodCIDRs), nil
		}
		return n.PodCIDR != "", "spec.podCIDR is empty", nil
	})
}

// AgentOptions are the per-run settings of the node agents.
type AgentOptions struct {
	// ProxyLoadBalancerIPs is antreaProxy.proxyLoadBalancerIPs.
	ProxyLoadBalancerIPs bool
	// MinSyncInterval is antreaProxy.minSyncInterval; 0 means 200ms.
	MinSyncInterval time.Duration
	// EnablePprof serves the agent's runtime profiles on its API socket (enablePprof).
	EnablePprof bool
	// MaxFlows is antreaProxy.maxFlows; 0 means its default.
	MaxFlows int
}

// agentConfig is the node's antrea-agent.conf for opts.
func (n *Node) agentConfig(opts AgentOptions) *config.AgentConfig {
	lbIPs := opts.ProxyLoadBalancerIPs
	sync := opts.MinSyncInterval
	if sync == 0 {
		sync = 200 * time.Millisecond
	}
	return &config.AgentConfig{
		Kubeconfig:      n.Kubeconfig,
		NodeName:        n.Name,
		OVSBridge:       Bridge,
		OVSDatapathType: config.DatapathNetdev,
		OVSRunDir:       n.OVS.RunDir,
		HostGateway:     config.DefaultHostGateway,
		APISocket:       n.API.Socket,
		EnablePprof:     opts.EnablePprof,
		AntreaProxy: config.AntreaProxyConfig{
			ProxyAll:             true,
			ProxyLoadBalancerIPs: &lbIPs,
			MinSyncInterval:      config.Duration{Duration: sync},
			FullSyncPeriod:       config.Duration{Duration: 30 * time.Second},
			MaxFlows:             opts.MaxFlows,
			// The class of the antrea-controller StartController runs (its default).
			LoadBalancerClass: config.DefaultLoadBalancerClass,
		},
		NodeNetwork: config.NodeNetworkConfig{
			CNISocket:      filepath.Join(n.Dir, "cni.sock"),
			CNIStateDir:    filepath.Join(n.Dir, "cni-state"),
			CNIDelSpoolDir: filepath.Join(n.Dir, "cni-del-spool"),
			ClusterCIDRs:   n.s.CP.ClusterCIDRs(),
		},
	}
}

// startAgent writes antrea-agent.conf for opts and runs antrea-agent inside the node namespace,
// then waits until its API reports a first successful sync with that configuration.
func (n *Node) startAgent(opts AgentOptions) error {
	return n.startAgentGuarded(opts, 2*time.Minute, nil)
}

// startAgentGuarded is startAgent waiting at most timeout; guard, when set, is checked on every
// poll and fails the wait at once with its error (e.g. ovs-vswitchd died).
func (n *Node) startAgentGuarded(opts AgentOptions, timeout time.Duration, guard func() error) error {
	p, err := n.launchAgent(opts)
	if err != nil {
		return err
	}
	what := fmt.Sprintf("antrea-agent on %s to sync with proxyLoadBalancerIPs=%v (log %s)", n.Name, opts.ProxyLoadBalancerIPs, p.LogPath)
	return waitReadyOrFail(p, timeout, what, func(ctx context.Context) (bool, string, error) {
		if guard != nil {
			if err := guard(); err != nil {
				return false, "", err
			}
		}
		ok, status := n.agentSynced(ctx, opts)
		return ok, status, nil
	})
}

// agentSynced reports whether the agent answers with opts in effect, has synced without error
// and serves CNI requests.
func (n *Node) agentSynced(ctx context.Context, opts AgentOptions) (bool, string) {
	info, err := n.API.AgentInfo(ctx)
	if err != nil {
		return false, err.Error()
	}
	switch {
	case info.AntreaProxy.ProxyLoadBalancerIPs != opts.ProxyLoadBalancerIPs:
		return false, fmt.Sprintf("proxyLoadBalancerIPs is %v", info.AntreaProxy.ProxyLoadBalancerIPs)
	case info.Sync.Syncs == 0:
		return false, "no sync yet"
	case info.Sync.LastError != "":
		return false, "last sync failed: " + info.Sync.LastError
	}
	return n.cniReady()
}

// cniReady reports whether the agent's CNI server accepts connections.
func (n *Node) cniReady() (bool, string) {
	sock := n.agentConf.NodeNetwork.CNISocket
	c, err := net.DialTimeout("unix", sock, time.Second)
	if err != nil {
		return false, "CNI server: " + err.Error()
	}
	_ = c.Close()
	return true, ""
}

// stopAgent stops the agent (SIGTERM, then SIGKILL after the grace period).
func (n *Node) stopAgent() {
	if n.agent != nil {
		n.agent.Stop()
		n.agent = nil
	}
}

// AgentLog is the path of the agent's log.
func (n *Node) AgentLog() string { return filepath.Join(n.s.CP.LogDir, "antrea-agent-"+n.Name+".log") }

// ProxyLoadBalancerIPs is the setting the agent runs with.
func (n *Node) ProxyLoadBalancerIPs() bool {
	return n.agentConf != nil && n.agentConf.AntreaProxy.ProxyLoadBalancerIPsEnabled()
}

// Flows dumps the node's bridge, for failure messages.
func (n *Node) Flows() string {
	out, err := n.OVS.Ofctl("dump-flows", Bridge, "--no-stats")
	if err != nil {
		return err.Error()
	}
	return out
}

// HostIPs are the node's underlay addresses: IP, then IP6 in a dual-stack sandbox.
func (n *Node) HostIPs() []netip.Addr {
	if n.IP6.IsValid() {
		return []netip.Addr{n.IP, n.IP6}
	}
	return []netip.Addr{n.IP}
}

// copyOVSLogs copies the OVS daemons' logs into the sandbox's log directory.
func (n *Node) copyOVSLogs() {
	for _, f := range []string{"ovs-vswitchd.log", "ovsdb-server.log"} {
		src, err := os.Open(filepath.Join(n.OVS.RunDir, f))
		if err != nil {
			continue
		}
		dst, err := os.Create(filepath.Join(n.s.CP.LogDir, n.Name+"-"+f))
		if err == nil {
			_, _ = io.Copy(dst, src)
			_ = dst.Close()
		}
		_ = src.Close()
	}
}

// agentRouteProtocol is the rtm_protocol of the host routes antrea-agent owns
// (nodenet.RouteProtocol).
const agentRouteProtocol = "0x61"

// HostRoutesInto lists the destinations of the agent's host routes in the node's namespace:
// the podCIDRs of other nodes and the addresses it sends into OVS through the gateway.
func (n *Node) HostRoutesInto() (map[string]bool, error) {
	out, err := n.NS.Exec("ip", "-4", "route", "show", "table", "main", "proto", agentRouteProtocol)
	if err != nil {
		return nil, fmt.Errorf("node %s: listing host routes: %w: %s", n.Name, err, out)
	}
	dsts := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			dsts[strings.TrimSuffix(f[0], "/32")] = true
		}
	}
	return dsts, nil
}
