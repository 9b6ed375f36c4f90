package nodenet

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"k8s.io/klog/v2"
	"sigs.k8s.io/knftables"
)

// DefaultNFTablesTable is the name of the agent's nftables table (family inet).
const DefaultNFTablesTable = "antrea-proxy"

// Names inside the agent's table.
const (
	setNodePortsV4   = "nodeports-v4"
	setNodePortsV6   = "nodeports-v6"
	setNoMasqV4      = "no-masquerade-v4"
	setNoMasqV6      = "no-masquerade-v6"
	setSvcPortsV4    = "service-ports-v4"
	setSvcPortsV6    = "service-ports-v6"
	chainPrerouting  = "prerouting"
	chainOutput      = "output"
	chainPostrouting = "postrouting"
	chainNodePorts   = "nodeports"
	chainMarkPre     = "mark-prerouting"
	chainMarkOut     = "mark-output"
)

// NodePort is one address, protocol and port on which the node serves a NodePort.
type NodePort = AddrPortProto

// NFTConfig is the content of the agent's nftables table.
type NFTConfig struct {
	// Gateway is the host gateway's interface name.
	Gateway string
	// PodCIDRs are this Node's podCIDRs: their traffic leaving the node is masqueraded.
	PodCIDRs []netip.Prefix
	// NoMasquerade are destinations that see pods' own addresses: the cluster CIDRs and every
	// Node's podCIDRs.
	NoMasquerade []netip.Prefix
	// SNATVirtualIPs are the sources OVS gives external Service connections (ServiceSNAT); they
	// are masqueraded when the connection leaves the node towards a remote endpoint.
	SNATVirtualIPs []netip.Addr
	// NodePortVirtualIPs are the DNAT targets of NodePort traffic, at most one per family;
	// the host routes them into OVS through the gateway.
	NodePortVirtualIPs []netip.Addr
	// NodePorts are the node addresses, protocols and ports to DNAT.
	NodePorts []NodePort
	// ServicePorts are the LB IP and ExternalIP tuples to send into OVS: packets to them from
	// outside the node (not from the gateway) and from the node itself get ServicePortMark,
	// which a policy rule routes into the gateway.
	ServicePorts []AddrPortProto
	// MarkServicePorts adds the rules that mark ServicePorts (with proxyAll).
	MarkServicePorts bool
	// HostSources are, per family, the gateway's address (of the first local podCIDR): the
	// node's own connections into OVS through the gateway, other than to a local pod, that
	// have another local source address (a NodePort reached through a node address, a socket
	// bound to one) are SNATed to it, the address OVS takes for the node itself.
	HostSources []netip.Addr
}

// BuildNFT adds to tx the complete content of the agent's table for cfg. The chains and sets
// are created if missing and flushed, then filled again, so that running tx (atomically)
// replaces whatever an earlier run left.

// markPriority (-90) runs the ServicePortMark chains after every DNAT of the node (dstnat, -100):
// a packet another proxier already translated (kube-proxy's rules while a cluster migrates to
// antrea-proxy) no longer has the Service's address and is routed where that proxier sent it;
// without such rules the packet reaches the chain unchanged and is marked. The routing decision
// still follows the whole prerouting hook (and a route chain reroutes the node's own packets).
const markPriority knftables.BaseChainPriority = "-90"

func BuildNFT(tx *knftables.Transaction, cfg NFTConfig) {
	tx.Add(&knftables.Table{Comment: knftables.PtrTo("antrea-agent: NodePort DNAT and Service port marks into OVS, pod masquerade")})
	sets := []*knftables.Set{
		{Name: setNodePortsV4, Type: "ipv4_addr . inet_proto . inet_service", Comment: knftables.PtrTo("NodePort address, protocol, port")},
		{Name: setNodePortsV6, Type: "ipv6_addr . inet_proto . inet_service", Comment: knftables.PtrTo("NodePort address, protocol, port")},
		{Name: setNoMasqV4, Type: "ipv4_addr", Flags: []knftables.SetFlag{knftables.IntervalFlag}, Comment: knftables.PtrTo("destinations that see pod addresses")},
		{Name: setNoMasqV6, Type: "ipv6_addr", Flags: []knftables.SetFlag{knftables.IntervalFlag}, Comment: knftables.PtrTo("destinations that see pod addresses")},
		{Name: setSvcPortsV4, Type: "ipv4_addr . inet_proto . inet_service", Comment: knftables.PtrTo("LB IP and ExternalIP address, protocol, port")},
		{Name: setSvcPortsV6, Type: "ipv6_addr . inet_proto . inet_service", Comment: knftables.PtrTo("LB IP and ExternalIP address, protocol, port")},
	}
	for _, s := range sets {
		tx.Add(s)
		tx.Flush(&knftables.Set{Name: s.Name})
	}
	chains := []*knftables.Chain{
		{Name: chainPrerouting, Type: knftables.PtrTo(knftables.NATType), Hook: knftables.PtrTo(knftables.PreroutingHook), Priority: knftables.PtrTo(knftables.DNATPriority)},
		{Name: chainOutput, Type: knftables.PtrTo(knftables.NATType), Hook: knftables.PtrTo(knftables.OutputHook), Priority: knftables.PtrTo(knftables.DNATPriority)},
		{Name: chainPostrouting, Type: knftables.PtrTo(knftables.NATType), Hook: knftables.PtrTo(knftables.PostroutingHook), Priority: knftables.PtrTo(knftables.SNATPriority)},
		{Name: chainNodePorts},
		// Before the routing decision, which the mark chooses, and after every DNAT (markPriority).
		{Name: chainMarkPre, Type: knftables.PtrTo(knftables.FilterType), Hook: knftables.PtrTo(knftables.PreroutingHook), Priority: knftables.PtrTo(markPriority)},
		// A route chain routes the node's own packet again when it changes the mark.
		{Name: chainMarkOut, Type: knftables.PtrTo(knftables.RouteType), Hook: knftables.PtrTo(knftables.OutputHook), Priority: knftables.PtrTo(markPriority)},
	}
	for _, c := range chains {
		tx.Add(c)
		tx.Flush(&knftables.Chain{Name: c.Name})
	}
	rule := func(chain, r, comment string) {
		tx.Add(&knftables.Rule{Chain: chain, Rule: r, Comment: knftables.PtrTo(comment)})
	}
	rule(chainPrerouting, "jump "+chainNodePorts, "NodePorts from outside the node")
	rule(chainOutput, "jump "+chainNodePorts, "NodePorts from the node itself")
	for _, vip := range cfg.NodePortVirtualIPs {
		fam, set := "ip", setNodePortsV4
		if vip.Is6() {
			fam, set = "ip6", setNodePortsV6
		}
		rule(chainNodePorts, fmt.Sprintf("%s daddr . meta l4proto . th dport @%s dnat %s to %s", fam, set, fam, vip),
			"into OVS through the gateway")
	}
	for _, np := range cfg.NodePorts {
		set := setNodePortsV4
		if np.Addr.Is6() {
			set = setNodePortsV6
		}
		tx.Add(&knftables.Element{Set: set, Key: []string{np.Addr.String(), np.Protocol, strconv.Itoa(int(np.Port))}})
	}
	gw := strconv.Quote(cfg.Gateway)
	if cfg.MarkServicePorts {
		buildServicePortMarks(tx, gw, cfg.ServicePorts)
	}
	for _, p := range mergePrefixes(cfg.NoMasquerade) {
		set := setNoMasqV4
		if p.Addr().Is6() {
			set = setNoMasqV6
		}
		tx.Add(&knftables.Element{Set: set, Key: []string{p.String()}})
	}
	for _, c := range cfg.PodCIDRs {
		fam, set := "ip", setNoMasqV4
		if c.Addr().Is6() {
			fam, set = "ip6", setNoMasqV6
		}
		rule(chainPostrouting, fmt.Sprintf("%s saddr %s %s daddr != @%s oifname != %s masquerade", fam, c.Masked(), fam, set, gw),
			"pods to outside the cluster")
	}
	for _, src := range cfg.HostSources {
		fam, pods := "ip", podCIDRsOf(cfg.PodCIDRs, src)
		if src.Is6() {
			fam = "ip6"
		}
		rule(chainPostrouting, fmt.Sprintf("oifname %s %s daddr != %s fib saddr type local %s saddr != %s snat %s to %s",
			gw, fam, pods, fam, src, fam, src), "the node's own Service connections into OVS")
	}
	for _, ip := range cfg.SNATVirtualIPs {
		fam := "ip"
		if ip.Is6() {
			fam = "ip6"
		}
		rule(chainPostrouting, fmt.Sprintf("%s saddr %s oifname != %s masquerade", fam, ip, gw),
			"external Service connections to remote endpoints")
	}
}

// buildServicePortMarks adds the rules that mark packets to the Service tuples ports (and the
// sets' elements): from outside the node in prerouting, except what comes from the gateway (gw,
// quoted), and from the node itself on output.
func buildServicePortMarks(tx *knftables.Transaction, gw string, ports []AddrPortProto) {
	mark := fmt.Sprintf("meta mark set meta mark | %#x", ServicePortMark)
	for _, f := range []struct{ fam, set string }{{"ip", setSvcPortsV4}, {"ip6", setSvcPortsV6}} {
		match := fmt.Sprintf("%s daddr . meta l4proto . th dport @%s", f.fam, f.set)
		tx.Add(&knftables.Rule{Chain: chainMarkPre, Rule: "iifname != " + gw + " " + match + " " + mark,
			Comment: knftables.PtrTo("Service ports from outside the node into OVS")})
		tx.Add(&knftables.Rule{Chain: chainMarkOut, Rule: match + " " + mark, Comment: knftables.PtrTo("Service ports from the node into OVS")})
	}
	for _, t := range ports {
		set := setSvcPortsV4
		if t.Addr.Is6() {
			set = setSvcPortsV6
		}
		tx.Add(&knftables.Element{Set: set, Key: []string{t.Addr.String(), t.Protocol, strconv.Itoa(int(t.Port))}})
	}
}

// podCIDRsOf renders the podCIDRs of a's family for an nft match: a prefix, or an anonymous set
// of several.
func podCIDRsOf(cidrs []netip.Prefix, a netip.Addr) string {
	var parts []string
	for _, c := range cidrs {
		if c.Addr().Is6() == a.Is6() {
			parts = append(parts, c.Masked().String())
		}
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return "{ " + strings.Join(parts, ", ") + " }"
}

// mergePrefixes sorts prefixes and drops those inside another one: an interval set rejects
// overlapping elements.
func mergePrefixes(in []netip.Prefix) []netip.Prefix {
	ps := make([]netip.Prefix, 0, len(in))
	for _, p := range in {
		if p.IsValid() {
			ps = append(ps, p.Masked())
		}
	}
	// Shorter prefixes first, so that a covering prefix is kept before what it covers.
	slices.SortFunc(ps, func(a, b netip.Prefix) int {
		if a.Bits() != b.Bits() {
			return a.Bits() - b.Bits()
		}
		return a.Addr().Compare(b.Addr())
	})
	var out []netip.Prefix
	for _, p := range ps {
		covered := false
		for _, q := range out {
			if q.Addr().Is4() == p.Addr().Is4() && q.Bits() <= p.Bits() && q.Contains(p.Addr()) {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	return out
}

// NFT is the agent's nftables table in a host namespace.
type NFT struct {
	host  Host
	table string
	nft   knftables.Interface
	// last is the transaction text of the last successful Sync.
	last string
}

// NewNFT checks that nft works in the host namespace and returns the agent's table there.
func NewNFT(host Host, table string) (*NFT, error) {
	n := &NFT{host: host, table: table}
	err := host.do(func() error {
		var err error
		n.nft, err = knftables.New(knftables.InetFamily, table)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("nftables table inet %s: %w", table, err)
	}
	return n, nil
}

// Sync makes the table hold exactly cfg, in one atomic nft transaction. A Sync with the same
// content as the last successful one does nothing.
func (n *NFT) Sync(ctx context.Context, cfg NFTConfig) error {
	tx := n.nft.NewTransaction()
	BuildNFT(tx, cfg)
	text := tx.String()
	if text == n.last {
		return nil
	}
	if err := n.host.do(func() error { return n.nft.Run(ctx, tx) }); err != nil {
		return fmt.Errorf("syncing nftables table inet %s: %w", n.table, err)
	}
	n.last = text
	klog.V(2).InfoS("Synced nftables table", "table", n.table, "nodePorts", len(cfg.NodePorts), "servicePorts", len(cfg.ServicePorts),
		"noMasquerade", len(cfg.NoMasquerade))
	return nil
}

// forget makes the next Sync run its transaction even when its content did not change.
func (n *NFT) forget() { n.last = "" }

// Delete removes the agent's table, if it exists.
func (n *NFT) Delete(ctx context.Context) error {
	tx := n.nft.NewTransaction()
	tx.Delete(&knftables.Table{})
	err := n.host.do(func() error { return n.nft.Run(ctx, tx) })
	if err != nil && !knftables.IsNotFound(err) {
		return fmt.Errorf("deleting nftables table inet %s: %w", n.table, err)
	}
	n.last = ""
	return nil
}

// describeNodePorts renders node ports for logs.
func describeNodePorts(nps []NodePort) string {
	parts := make([]string, 0, len(nps))
	for _, np := range nps {
		parts = append(parts, fmt.Sprintf("%s/%s:%d", np.Protocol, np.Addr, np.Port))
	}
	return strings.Join(parts, ",")
}
