package nodenet

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"k8s.io/klog/v2"
)

// arpIgnoreOwnInterface is net.ipv4.conf.<dev>.arp_ignore=1: answer an ARP request only when
// the requested address is configured on the interface the request came in on.
const arpIgnoreOwnInterface = "1"

// RestrictPodARP stops the host from answering, on a pod's interface, the pod's ARP request
// for its gateway address.
//
// The host end of a pod's veth pair is an OVS port, but with the userspace (netdev) datapath
// OVS only reads a copy of what arrives on it: the host's IP stack still sees every frame. By
// default Linux answers ARP for any of its addresses on any interface, and that answer (sent
// straight out of the veth) beats the gateway's (which goes through OVS), so the pod learns
// the veth's MAC for its gateway. Its frames are then addressed to the host as well, and the
// host forwards a second copy of every packet: a copy for a programmed LoadBalancer IP or
// ExternalIP comes back into OVS through the gateway and is load-balanced as an external
// connection (SNATed), a copy for a node address reaches the host's own stack (which resets
// NodePort connections its rules do not cover yet). With arp_ignore=1 the host answers only on
// the interface that holds the address, so pods learn the gateway's MAC, their frames are not
// for the host, and OVS is the only one to forward them.
//
// It sets arp_ignore=1 on conf/default, which new interfaces inherit (the CNI server creates
// pods' veth pairs in the host namespace) and which the kernel also applies to every existing
// interface whose arp_ignore was never set explicitly, and on every veth that exists already
// (pods created before), whatever it was set to. The host thus does strict ARP, as kube-proxy's
// IPVS strictARP does: the uplink and the gateway still answer for their own addresses, an
// interface configured explicitly keeps its setting, and proxy ARP entries are not affected.
func (h Host) RestrictPodARP() error {
	nl, err := h.handle()
	if err != nil {
		return err
	}
	links, err := nl.LinkList()
	nl.Close()
	if err != nil {
		return fmt.Errorf("listing host interfaces: %w", err)
	}
	devs := []string{"default"}
	for _, l := range links {
		if l.Type() == "veth" {
			devs = append(devs, l.Attrs().Name)
		}
	}
	return h.do(func() error {
		var errs []error
		for _, dev := range devs {
			if err := writeSysctl("/proc/sys/net/ipv4/conf/"+dev+"/arp_ignore", arpIgnoreOwnInterface); err != nil {
				errs = append(errs, fmt.Errorf("restricting ARP answers on %s: %w", dev, err))
			}
		}
		if len(errs) == 0 {
			klog.InfoS("Host answers ARP only on the interface holding the address", "interfaces", devs)
		}
		return errors.Join(errs...)
	})
}

// writeSysctl writes value to the sysctl file f unless it already holds it. An interface that
// disappeared meanwhile is not an error.
func writeSysctl(f, value string) error {
	cur, err := os.ReadFile(f)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err == nil && strings.TrimSpace(string(cur)) == value {
		return nil
	}
	if err := os.WriteFile(f, []byte(value+"\n"), 0o644); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
