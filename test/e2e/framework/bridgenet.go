package framework

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// This file holds the pod network of kube-proxy nodes: a plain Linux bridge (podBridge) owning
// the first address of the node's podCIDR, one veth pair per pod on it, and a route to every
// other node's podCIDR through that node's underlay address (what kubenet or the bridge CNI
// plugin with host-local IPAM and static routes set up). br_netfilter is on
// (bridge-nf-call-iptables), as kube-proxy requires with a bridge: traffic between two pods of
// the same bridge is then seen by netfilter, so replies of a Service connection whose backend is
// on the client's own bridge are translated back.

// podBridge is the kube-proxy nodes' pod bridge.
const podBridge = "cbr0"

// podNetwork connects a pod's namespace to its node's network and back.
type podNetwork interface {
	// add plumbs the pod (the seq-th pod of its node) and returns its IPs.
	add(pod *corev1.Pod, rt *podRuntime, seq int) ([]string, error)
	// del undoes add; a pod that add never finished is not an error.
	del(pod *corev1.Pod, rt *podRuntime) error
}

// bridgeGateway is the bridge's address: the first address of the podCIDR.
func bridgeGateway(podCIDR string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(podCIDR)
	if err != nil || !p.Addr().Is4() {
		return netip.Prefix{}, fmt.Errorf("podCIDR %q: want an IPv4 prefix", podCIDR)
	}
	return netip.PrefixFrom(p.Masked().Addr().Next(), p.Bits()), nil
}

// setupPodBridge creates the node's pod bridge with the gateway address and turns on forwarding
// and br_netfilter in the node's namespace.
func (n *Node) setupPodBridge() error {
	gw, err := bridgeGateway(n.PodCIDR)
	if err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	// A fixed MAC: a bridge otherwise takes the lowest MAC of its ports, which changes as pods
	// come and go (and the pods' neighbour entries of the gateway go stale).
	mac := fmt.Sprintf("02:00:0a:00:00:%02x", n.IP.As4()[3])
	if err := n.NS.MustExec(
		[]string{"ip", "link", "add", podBridge, "type", "bridge"},
		[]string{"ip", "link", "set", podBridge, "address", mac},
		[]string{"ip", "addr", "add", gw.String(), "dev", podBridge},
		[]string{"ip", "link", "set", podBridge, "up"},
		[]string{"sysctl", "-q", "-w", "net.ipv4.ip_forward=1"},
		[]string{"sysctl", "-q", "-w", "net.bridge.bridge-nf-call-iptables=1"},
	); err != nil {
		return fmt.Errorf("node %s: pod bridge: %w", n.Name, err)
	}
	return n.masqueradePodEgress()
}

// podEgressTable is the kube-proxy nodes' own nftables table: the pod network's egress
// masquerade.
const podEgressTable = "e2e-podnet"

// masqueradePodEgress masquerades traffic of the node's pods to destinations outside the
// cluster CIDR (the router, the external client, node addresses), as the bridge CNI plugin's
// ipMasq and kubenet do: without it the underlay has no route back to the pods.
func (n *Node) masqueradePodEgress() error {
	cluster := strings.Join(n.s.CP.ClusterCIDRs(), ", ")
	ruleset := fmt.Sprintf(`table ip %s {
	chain postrouting {
		type nat hook postrouting priority srcnat + 10; policy accept;
		ip saddr %s ip daddr != { %s } masquerade
	}
}
`, podEgressTable, n.PodCIDR, cluster)
	out, err := n.NS.ExecStdin(ruleset, "nft", "-f", "-")
	if err != nil {
		return fmt.Errorf("node %s: pod egress masquerade: %w: %s", n.Name, err, out)
	}
	return nil
}

// routePodCIDRs routes every other node's podCIDR through its underlay address.
func (n *Node) routePodCIDRs(nodes []*Node) error {
	for _, m := range nodes {
		if m == n {
			continue
		}
		if err := n.NS.MustExec([]string{"ip", "route", "replace", m.PodCIDR, "via", m.IP.String()}); err != nil {
			return fmt.Errorf("node %s: route to %s's pods: %w", n.Name, m.Name, err)
		}
	}
	return nil
}

// bridgeNetwork is the podNetwork of kube-proxy nodes.
type bridgeNetwork struct {
	node *Node
}

// vethName is the node-side name of the seq-th pod's veth.
func vethName(seq int) string { return "veth" + strconv.Itoa(seq) }

// add gives the pod the podCIDR's address number seq+1 (the gateway is number 1).
func (b bridgeNetwork) add(_ *corev1.Pod, rt *podRuntime, seq int) ([]string, error) {
	gw, err := bridgeGateway(b.node.PodCIDR)
	if err != nil {
		return nil, err
	}
	ip := gw.Addr()
	for i := 0; i < seq; i++ {
		ip = ip.Next()
	}
	if !gw.Contains(ip) || ip == gw.Masked().Addr() {
		return nil, fmt.Errorf("node %s: podCIDR %s has no address for pod number %d", b.node.Name, b.node.PodCIDR, seq)
	}
	veth := vethName(seq)
	rt.hostIf = veth
	if err := b.node.NS.MustExec(
		[]string{"ip", "link", "add", veth, "type", "veth", "peer", "name", cniIfName, "netns", rt.ns.Name},
		[]string{"ip", "link", "set", veth, "master", podBridge},
		[]string{"ip", "link", "set", veth, "up"},
	); err != nil {
		return nil, err
	}
	if err := rt.ns.MustExec(
		[]string{"ip", "addr", "add", fmt.Sprintf("%s/%d", ip, gw.Bits()), "dev", cniIfName},
		[]string{"ip", "link", "set", cniIfName, "up"},
		[]string{"ip", "route", "add", "default", "via", gw.Addr().String()},
	); err != nil {
		return nil, err
	}
	return []string{ip.String()}, nil
}

func (b bridgeNetwork) del(_ *corev1.Pod, rt *podRuntime) error {
	if rt.hostIf == "" {
		return nil
	}
	if _, err := b.node.NS.Exec("ip", "link", "show", rt.hostIf); err != nil {
		return nil // gone with the pod's namespace
	}
	return b.node.NS.MustExec([]string{"ip", "link", "del", rt.hostIf})
}

// antreaCNI is the podNetwork of antrea nodes: the real antrea-cni binary, called as a
// container runtime does.
type antreaCNI struct {
	k *Kubelet
}

func (a antreaCNI) add(pod *corev1.Pod, rt *podRuntime, _ int) ([]string, error) {
	return a.k.cniAdd(pod, rt)
}

func (a antreaCNI) del(pod *corev1.Pod, rt *podRuntime) error { return a.k.cni("DEL", pod, rt) }
