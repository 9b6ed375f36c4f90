// Package podnet wires a pod's network namespace to the node with netlink: a veth pair whose
// host end stays in the host network namespace (to be attached to the OVS bridge) and whose
// other end is the pod's interface (eth0), with the pod's addresses and default routes through
// the gateway. It never runs the ip command.
package podnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/antrea-proxy/antrea-proxy/pkg/netutil"
)

// Config is one pod interface.
type Config struct {
	// NetNS is the path of the pod's network namespace, e.g. /var/run/netns/cni-1234.
	NetNS string
	// IfName is the interface inside the pod, e.g. eth0.
	IfName string
	// HostIfName is the host end of the veth pair.
	HostIfName string
	// MTU of both ends; 0 keeps the kernel default.
	MTU int
	// Addresses are the pod's addresses with the podCIDR's prefix length.
	Addresses []netip.Prefix
	// Gateways get a default route each (one per family), through IfName.
	Gateways []netip.Addr
	// DisableTXChecksumOffload turns TX checksum offload off on both ends, which OVS's userspace
	// (netdev) datapath needs to forward correct checksums.
	DisableTXChecksumOffload bool
}

// Interfaces describes the two ends of a set-up pod interface.
type Interfaces struct {
	HostMAC net.HardwareAddr
	PodMAC  net.HardwareAddr
}

// Netlink sets pod interfaces up through netlink. HostNetNS is the path of the namespace where
// host ends are created ("" is the agent's own namespace, the root namespace in production).
type Netlink struct {
	HostNetNS string
}

// ErrNetNSNotFound is returned (wrapped) when a pod's network namespace does not exist.
var ErrNetNSNotFound = errors.New("network namespace not found")

// openNS opens the namespace at path; "" is the current one (netns.None).
func openNS(path string) (netns.NsHandle, error) {
	if path == "" {
		return netns.None(), nil
	}
	h, err := netns.GetFromPath(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return netns.None(), fmt.Errorf("%w: %s", ErrNetNSNotFound, path)
		}
		return netns.None(), fmt.Errorf("opening network namespace %s: %w", path, err)
	}
	return h, nil
}

// handles opens netlink handles in the host and (unless podNS is "") the pod namespace.
type handles struct {
	hostNS, podNS netns.NsHandle
	host, pod     *netlink.Handle
}

func (n *Netlink) open(podNS string) (*handles, error) {
	h := &handles{hostNS: netns.None(), podNS: netns.None()}
	var err error
	if h.hostNS, err = openNS(n.HostNetNS); err != nil {
		return nil, fmt.Errorf("host namespace: %w", err)
	}
	if h.host, err = netlink.NewHandleAt(h.hostNS); err != nil {
		h.close()
		return nil, fmt.Errorf("netlink handle in host namespace %q: %w", n.HostNetNS, err)
	}
	if podNS == "" {
		return h, nil
	}
	if h.podNS, err = openNS(podNS); err != nil {
		h.close()
		return nil, err
	}
	if h.pod, err = netlink.NewHandleAt(h.podNS); err != nil {
		h.close()
		return nil, fmt.Errorf("netlink handle in pod namespace %s: %w", podNS, err)
	}
	return h, nil
}

func (h *handles) close() {
	if h.host != nil {
		h.host.Close()
	}
	if h.pod != nil {
		h.pod.Close()
	}
	if h.hostNS.IsOpen() {
		h.hostNS.Close()
	}
	if h.podNS.IsOpen() {
		h.podNS.Close()
	}
}

func isNotFound(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf)
}

// linkByName returns the link or nil when it does not exist.
func linkByName(h *netlink.Handle, name string) (netlink.Link, error) {
	l, err := h.LinkByName(name)
	if isNotFound(err) {
		return nil, nil
	}
	return l, err
}

// NetNSExists reports whether path is an existing network namespace.
func (n *Netlink) NetNSExists(path string) bool {
	h, err := netns.GetFromPath(path)
	if err != nil {
		return false
	}
	h.Close()
	return true
}

// Setup creates the pod interface described by cfg, or completes and fixes one left by an
// earlier call: it is idempotent.
func (n *Netlink) Setup(cfg Config) (Interfaces, error) {
	h, err := n.open(cfg.NetNS)
	if err != nil {
		return Interfaces{}, err
	}
	defer h.close()
	host, pod, err := h.ensureVeth(cfg)
	if err != nil {
		return Interfaces{}, err
	}
	if cfg.DisableTXChecksumOffload {
		if err := netutil.DisableTXChecksum(h.hostNS, cfg.HostIfName); err != nil {
			return Interfaces{}, err
		}
		if err := netutil.DisableTXChecksum(h.podNS, cfg.IfName); err != nil {
			return Interfaces{}, err
		}
	}
	if err := h.host.LinkSetUp(host); err != nil {
		return Interfaces{}, fmt.Errorf("setting %s up: %w", cfg.HostIfName, err)
	}
	if err := h.pod.LinkSetUp(pod); err != nil {
		return Interfaces{}, fmt.Errorf("setting %s up in %s: %w", cfg.IfName, cfg.NetNS, err)
	}
	for _, a := range cfg.Addresses {
		addr := &netlink.Addr{IPNet: ipNet(a)}
		if a.Addr().Is6() {
			addr.Flags = unix.IFA_F_NODAD
		}
		if err := h.pod.AddrReplace(pod, addr); err != nil {
			return Interfaces{}, fmt.Errorf("adding %v to %s in %s: %w", a, cfg.IfName, cfg.NetNS, err)
		}
	}
	for _, gw := range cfg.Gateways {
		r := defaultRoute(pod.Attrs().Index, gw)
		if err := h.pod.RouteReplace(r); err != nil {
			return Interfaces{}, fmt.Errorf("adding default route via %v to %s in %s: %w", gw, cfg.IfName, cfg.NetNS, err)
		}
	}
	return Interfaces{HostMAC: host.Attrs().HardwareAddr, PodMAC: pod.Attrs().HardwareAddr}, nil
}

// ensureVeth returns the veth pair of cfg, creating it when missing. A half pair left by an
// interrupted call is removed first; an interface of another kind in the pod's way is an error.
func (h *handles) ensureVeth(cfg Config) (host, pod netlink.Link, err error) {
	if host, err = linkByName(h.host, cfg.HostIfName); err != nil {
		return nil, nil, fmt.Errorf("looking up %s: %w", cfg.HostIfName, err)
	}
	if pod, err = linkByName(h.pod, cfg.IfName); err != nil {
		return nil, nil, fmt.Errorf("looking up %s in %s: %w", cfg.IfName, cfg.NetNS, err)
	}
	if pod != nil && pod.Type() != "veth" {
		return nil, nil, fmt.Errorf("%s in %s already exists and is a %s, not a veth", cfg.IfName, cfg.NetNS, pod.Type())
	}
	if host != nil && host.Type() != "veth" {
		return nil, nil, fmt.Errorf("host interface %s already exists and is a %s, not a veth", cfg.HostIfName, host.Type())
	}
	if host != nil && pod != nil {
		return host, pod, nil
	}
	if host != nil {
		if err := h.host.LinkDel(host); err != nil && !isNotFound(err) {
			return nil, nil, fmt.Errorf("removing stale %s: %w", cfg.HostIfName, err)
		}
	}
	if pod != nil {
		if err := h.pod.LinkDel(pod); err != nil && !isNotFound(err) {
			return nil, nil, fmt.Errorf("removing stale %s in %s: %w", cfg.IfName, cfg.NetNS, err)
		}
	}
	attrs := netlink.NewLinkAttrs()
	attrs.Name = cfg.HostIfName
	attrs.MTU = cfg.MTU
	veth := &netlink.Veth{LinkAttrs: attrs, PeerName: cfg.IfName, PeerNamespace: netlink.NsFd(int(h.podNS))}
	if err := h.host.LinkAdd(veth); err != nil {
		return nil, nil, fmt.Errorf("creating veth pair %s / %s in %s: %w", cfg.HostIfName, cfg.IfName, cfg.NetNS, err)
	}
	if host, err = h.host.LinkByName(cfg.HostIfName); err != nil {
		return nil, nil, fmt.Errorf("looking up new %s: %w", cfg.HostIfName, err)
	}
	if pod, err = h.pod.LinkByName(cfg.IfName); err != nil {
		return nil, nil, fmt.Errorf("looking up new %s in %s: %w", cfg.IfName, cfg.NetNS, err)
	}
	return host, pod, nil
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

func defaultRoute(linkIndex int, gw netip.Addr) *netlink.Route {
	family := unix.AF_INET
	if gw.Is6() {
		family = unix.AF_INET6
	}
	any := netip.PrefixFrom(netip.IPv4Unspecified(), 0)
	if gw.Is6() {
		any = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
	}
	return &netlink.Route{LinkIndex: linkIndex, Dst: ipNet(any), Gw: gw.AsSlice(), Family: family}
}

// Teardown removes the pod interface: the host end of the pair (which takes the pod end with it)
// and, when the pod's namespace still exists, a pod end left without its peer. Missing pieces
// are not errors.
func (n *Netlink) Teardown(cfg Config) error {
	podNS := cfg.NetNS
	if podNS != "" && !n.NetNSExists(podNS) {
		podNS = ""
	}
	h, err := n.open(podNS)
	if err != nil {
		return err
	}
	defer h.close()
	host, err := linkByName(h.host, cfg.HostIfName)
	if err != nil {
		return fmt.Errorf("looking up %s: %w", cfg.HostIfName, err)
	}
	if host != nil {
		if err := h.host.LinkDel(host); err != nil && !isNotFound(err) {
			return fmt.Errorf("deleting %s: %w", cfg.HostIfName, err)
		}
	}
	if h.pod == nil || cfg.IfName == "" {
		return nil
	}
	pod, err := linkByName(h.pod, cfg.IfName)
	if err != nil {
		return fmt.Errorf("looking up %s in %s: %w", cfg.IfName, cfg.NetNS, err)
	}
	if pod != nil && pod.Type() == "veth" {
		if err := h.pod.LinkDel(pod); err != nil && !isNotFound(err) {
			return fmt.Errorf("deleting %s in %s: %w", cfg.IfName, cfg.NetNS, err)
		}
	}
	return nil
}
