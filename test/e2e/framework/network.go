package framework

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"
)

// Underlay addresses. Every one of them lives inside a namespace the sandbox created.
var (
	// UnderlaySubnet joins the nodes, the external client and the router.
	UnderlaySubnet = netip.MustParsePrefix("192.168.77.0/24")
	// RouterIP is the router and external load balancer on the underlay: the default gateway of
	// the nodes and of the client.
	RouterIP = netip.MustParseAddr("192.168.77.1")
	// ClientIP is the external client.
	ClientIP = netip.MustParseAddr("192.168.77.100")
	// VIPRange holds the LoadBalancer IPs of ipMode VIP: the underlay routes it to the first node.
	VIPRange = netip.MustParsePrefix("172.18.0.0/24")
	// ProxyRange holds the LoadBalancer IPs of ipMode Proxy: the router owns them (its l4proxy
	// instances listen there) and forwards to a NodePort.
	ProxyRange = netip.MustParsePrefix("172.18.1.0/24")
)

// IPv6 underlay addresses of a dual-stack sandbox (SandboxOptions.DualStack), ULA, on the same
// Linux bridge as the IPv4 ones.
var (
	UnderlaySubnet6 = netip.MustParsePrefix("fd00:77::/64")
	RouterIP6       = netip.MustParseAddr("fd00:77::1")
	ClientIP6       = netip.MustParseAddr("fd00:77::100")
)

// NodeIP6 is the IPv6 underlay address of the i-th node (0-based) in a dual-stack sandbox:
// fd00:77::11, ::12, ...
func NodeIP6(i int) netip.Addr {
	a := UnderlaySubnet6.Addr().As16()
	a[15] = byte(0x11 + i)
	return netip.AddrFrom16(a)
}

// NodeIP is the underlay address of the i-th node (0-based): 192.168.77.11, .12, ...
func NodeIP(i int) netip.Addr {
	a := UnderlaySubnet.Addr().As4()
	a[3] = byte(11 + i)
	return netip.AddrFrom4(a)
}

// Network is the sandbox's underlay: a Linux bridge in a "switch" namespace with a veth pair to
// each member. Members are the nodes, the external client, and the router, which forwards
// between them, owns the Proxy-mode LoadBalancer IPs and runs the external L4 load balancer.
type Network struct {
	// Switch holds the bridge br0.
	Switch *NetNS
	// Router is the default gateway of the underlay and the external load balancer.
	Router *NetNS
	// Client is the external client.
	Client *NetNS

	mu    sync.Mutex
	ports map[string]bool // switch-side interface names in use
}

const underlayBridge = "br0"

// newNetwork creates the switch, the router and the client namespaces through newNS.
func newNetwork(newNS func(role string) (*NetNS, error)) (*Network, error) {
	nw := &Network{ports: map[string]bool{}}
	var err error
	if nw.Switch, err = newNS("sw"); err != nil {
		return nil, err
	}
	if err := nw.Switch.MustExec(
		[]string{"ip", "link", "add", underlayBridge, "type", "bridge"},
		[]string{"ip", "link", "set", underlayBridge, "up"},
	); err != nil {
		return nil, err
	}
	if nw.Router, err = newNS("rt"); err != nil {
		return nil, err
	}
	if err := nw.Attach(nw.Router, "rt", RouterIP); err != nil {
		return nil, err
	}
	if err := nw.Router.Do(func() error { return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1\n"), 0o644) }); err != nil {
		return nil, fmt.Errorf("router: enabling forwarding: %w", err)
	}
	// No per-peer ICMP error rate limit on the router either (see addNode).
	if err := nw.Router.MustExec([]string{"sysctl", "-q", "-w", "net.ipv4.icmp_ratelimit=0"}); err != nil {
		return nil, err
	}
	if nw.Client, err = newNS("cl"); err != nil {
		return nil, err
	}
	if err := nw.Attach(nw.Client, "cl", ClientIP); err != nil {
		return nil, err
	}
	if err := nw.Client.MustExec([]string{"ip", "route", "add", "default", "via", RouterIP.String()}); err != nil {
		return nil, err
	}
	return nw, nil
}

// Attach connects ns to the underlay as eth0 with addr; tag names the switch port ("v"+tag).
// TX checksum offload is turned off on eth0, as the userspace OVS datapath on the nodes cannot
// complete partial checksums.
func (nw *Network) Attach(ns *NetNS, tag string, addr netip.Addr) error {
	port := "v" + tag
	nw.mu.Lock()
	if nw.ports[port] {
		nw.mu.Unlock()
		return fmt.Errorf("underlay: switch port %s is already in use", port)
	}
	nw.ports[port] = true
	nw.mu.Unlock()
	if err := nw.Switch.MustExec(
		[]string{"ip", "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns.Name},
		[]string{"ip", "link", "set", port, "master", underlayBridge},
		[]string{"ip", "link", "set", port, "up"},
	); err != nil {
		return fmt.Errorf("underlay: attaching %s: %w", ns.Name, err)
	}
	bits := UnderlaySubnet.Bits()
	if err := ns.MustExec(
		[]string{"ip", "addr", "add", fmt.Sprintf("%s/%d", addr, bits), "dev", "eth0"},
		[]string{"ip", "link", "set", "eth0", "up"},
		[]string{"ethtool", "-K", "eth0", "tx", "off"},
	); err != nil {
		return fmt.Errorf("underlay: attaching %s: %w", ns.Name, err)
	}
	return nil
}

// EnableIPv6 gives the router and the client their IPv6 underlay addresses (the router
// forwarding IPv6, the client routing through it): the IPv6 half of a dual-stack underlay.
func (nw *Network) EnableIPv6() error {
	if err := nw.AttachIPv6(nw.Router, RouterIP6, netip.Addr{}); err != nil {
		return err
	}
	if err := nw.Router.Do(func() error {
		return os.WriteFile("/proc/sys/net/ipv6/conf/all/forwarding", []byte("1\n"), 0o644)
	}); err != nil {
		return fmt.Errorf("router: enabling IPv6 forwarding: %w", err)
	}
	return nw.AttachIPv6(nw.Client, ClientIP6, RouterIP6)
}

// AttachIPv6 adds addr (in UnderlaySubnet6) to the eth0 of ns, which Attach connected, without
// duplicate address detection (so it is usable at once), and a default IPv6 route via gw when
// gw is valid.
func (nw *Network) AttachIPv6(ns *NetNS, addr, gw netip.Addr) error {
	cmds := [][]string{
		{"sysctl", "-q", "-w", "net.ipv6.conf.eth0.accept_dad=0"},
		{"ip", "-6", "addr", "add", fmt.Sprintf("%s/%d", addr, UnderlaySubnet6.Bits()), "dev", "eth0", "nodad"},
	}
	if gw.IsValid() {
		cmds = append(cmds, []string{"ip", "-6", "route", "add", "default", "via", gw.String()})
	}
	if err := ns.MustExec(cmds...); err != nil {
		return fmt.Errorf("underlay: IPv6 on %s: %w", ns.Name, err)
	}
	return nil
}

// RouteVIPs makes the underlay deliver VIP-mode LoadBalancer IPs to node: the client and the
// router route VIPRange through it (until a LoadBalancer controller announces them).
func (nw *Network) RouteVIPs(node netip.Addr) error {
	for _, ns := range []*NetNS{nw.Client, nw.Router} {
		if err := ns.MustExec([]string{"ip", "route", "replace", VIPRange.String(), "via", node.String()}); err != nil {
			return err
		}
	}
	return nil
}

// AddRouterAddress makes the router own ip (on its loopback), so that traffic routed to the
// router for ip is delivered to its processes. It is idempotent.
func (nw *Network) AddRouterAddress(ip netip.Addr) error {
	return nw.Router.MustExec([]string{"ip", "addr", "replace", ip.String() + "/32", "dev", "lo"})
}

// RemoveRouterAddress undoes AddRouterAddress; an address that is not there is not an error.
func (nw *Network) RemoveRouterAddress(ip netip.Addr) error {
	out, err := nw.Router.Exec("ip", "addr", "del", ip.String()+"/32", "dev", "lo")
	if err != nil && !strings.Contains(out, "Cannot assign requested address") {
		return fmt.Errorf("router: removing %s: %w: %s", ip, err, out)
	}
	return nil
}
