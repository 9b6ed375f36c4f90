package nodenet

import (
	"errors"
	"fmt"
	"os"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/antrea-proxy/antrea-proxy/pkg/netutil"
)

// Host is a host network namespace. NetNS is its path (e.g. /var/run/netns/node1); "" is the
// namespace the agent runs in.
type Host struct {
	NetNS string
}

// handle opens a netlink handle in the host namespace; close it with Close.
func (h Host) handle() (*netlink.Handle, error) {
	if h.NetNS == "" {
		return netlink.NewHandle()
	}
	ns, err := netns.GetFromPath(h.NetNS)
	if err != nil {
		return nil, fmt.Errorf("opening host network namespace %s: %w", h.NetNS, err)
	}
	defer ns.Close()
	nl, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, fmt.Errorf("netlink handle in host network namespace %s: %w", h.NetNS, err)
	}
	return nl, nil
}

// do runs fn on an OS thread inside the host namespace. Processes fn starts (exec) and files
// it opens under /proc/sys/net belong to that namespace. fn must not hand work to other
// goroutines.
func (h Host) do(fn func() error) error {
	if h.NetNS == "" {
		return fn()
	}
	return netutil.InNetNS(h.NetNS, fn)
}

// EnableForwarding turns IPv4 (and, when ipv6, IPv6) forwarding on in the host namespace: the
// node routes pod traffic between the gateway and its uplinks.
func (h Host) EnableForwarding(ipv6 bool) error {
	files := []string{"/proc/sys/net/ipv4/ip_forward"}
	if ipv6 {
		files = append(files, "/proc/sys/net/ipv6/conf/all/forwarding")
	}
	return h.do(func() error {
		var errs []error
		for _, f := range files {
			cur, err := os.ReadFile(f)
			if err == nil && len(cur) > 0 && cur[0] == '1' {
				continue
			}
			if err := os.WriteFile(f, []byte("1\n"), 0o644); err != nil {
				errs = append(errs, fmt.Errorf("enabling forwarding (%s): %w", f, err))
			}
		}
		return errors.Join(errs...)
	})
}
