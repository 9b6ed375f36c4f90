package framework

import "context"

// This file holds sandboxes whose proxies the test starts itself (SandboxOptions.DeferProxies),
// possibly of both kinds (SandboxOptions.NodeProxies): the side-by-side scale benchmark
// (test/bench) starts an antrea-agent node and a kube-proxy node at the same moment.

// proxyOf is the kind of node i.
func (s *Sandbox) proxyOf(i int) NodeProxy {
	if i < len(s.nodeProxies) {
		return s.nodeProxies[i]
	}
	return s.proxy
}

// prepareDeferredProxies does what starting the proxies needs once: kube-proxy's role and the
// routes between kube-proxy nodes' pod networks.
func (s *Sandbox) prepareDeferredProxies() error {
	var kp []*Node
	for _, n := range s.Nodes {
		if n.Proxy == ProxyKubeProxy {
			kp = append(kp, n)
		}
	}
	if len(kp) == 0 {
		return nil
	}
	for _, n := range kp {
		if err := n.routePodCIDRs(kp); err != nil {
			return err
		}
	}
	return grantKubeProxyRBAC(context.Background(), s.CP.Client)
}

// StartProxies starts every node's proxy concurrently (antrea-agent with the sandbox's
// AgentOptions, or kube-proxy) and waits until each reports its first sync. It is for
// sandboxes started with DeferProxies; kubelets are not started.
func (s *Sandbox) StartProxies() error {
	return s.forEachNode(func(n *Node) error {
		if n.Proxy == ProxyKubeProxy {
			return n.startKubeProxy()
		}
		return n.startAgent(s.agent)
	})
}

// ProxyPID is the process ID of the node's proxy (antrea-agent or kube-proxy: `ip netns exec`
// execs it in place), 0 when none runs.
func (n *Node) ProxyPID() int {
	if n.agent == nil || n.agent.cmd.Process == nil {
		return 0
	}
	return n.agent.cmd.Process.Pid
}
