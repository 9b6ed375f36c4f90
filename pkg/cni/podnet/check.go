package podnet

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Check verifies that the pod interface of cfg is as Setup left it: both ends exist and are
// up, the pod end has every address and a default route through each gateway.
func (n *Netlink) Check(cfg Config) error {
	h, err := n.open(cfg.NetNS)
	if err != nil {
		return err
	}
	defer h.close()
	host, err := linkByName(h.host, cfg.HostIfName)
	if err != nil {
		return fmt.Errorf("looking up %s: %w", cfg.HostIfName, err)
	}
	if host == nil {
		return fmt.Errorf("host interface %s does not exist", cfg.HostIfName)
	}
	pod, err := linkByName(h.pod, cfg.IfName)
	if err != nil {
		return fmt.Errorf("looking up %s in %s: %w", cfg.IfName, cfg.NetNS, err)
	}
	if pod == nil {
		return fmt.Errorf("%s does not exist in %s", cfg.IfName, cfg.NetNS)
	}
	for _, l := range []netlink.Link{host, pod} {
		if l.Attrs().Flags&unix.IFF_UP == 0 {
			return fmt.Errorf("%s is down", l.Attrs().Name)
		}
	}
	addrs, err := retryDump(func() ([]netlink.Addr, error) { return h.pod.AddrList(pod, unix.AF_UNSPEC) })
	if err != nil {
		return fmt.Errorf("listing addresses of %s in %s: %w", cfg.IfName, cfg.NetNS, err)
	}
	have := map[netip.Prefix]bool{}
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			ones, _ := a.Mask.Size()
			have[netip.PrefixFrom(ip.Unmap(), ones)] = true
		}
	}
	for _, want := range cfg.Addresses {
		if !have[want] {
			return fmt.Errorf("%s in %s lacks address %v", cfg.IfName, cfg.NetNS, want)
		}
	}
	routes, err := retryDump(func() ([]netlink.Route, error) { return h.pod.RouteList(pod, unix.AF_UNSPEC) })
	if err != nil {
		return fmt.Errorf("listing routes of %s in %s: %w", cfg.IfName, cfg.NetNS, err)
	}
	for _, gw := range cfg.Gateways {
		found := false
		for _, r := range routes {
			isDefault := r.Dst == nil || (r.Dst.IP.IsUnspecified() && onesOf(r) == 0)
			if g, ok := netip.AddrFromSlice(r.Gw); ok && isDefault && g.Unmap() == gw {
				found = true
			}
		}
		if !found {
			return fmt.Errorf("%s in %s has no default route via %v", cfg.IfName, cfg.NetNS, gw)
		}
	}
	return nil
}

func onesOf(r netlink.Route) int {
	ones, _ := r.Dst.Mask.Size()
	return ones
}

// retryDump retries a netlink dump interrupted by a concurrent change.
func retryDump[T any](dump func() ([]T, error)) ([]T, error) {
	var out []T
	var err error
	for i := 0; i < 5; i++ {
		out, err = dump()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return out, err
		}
	}
	return out, err
}
