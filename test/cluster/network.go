//go:build cluster

package cluster

import (
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
)

// Addresses of the cluster's underlay: a Linux bridge in the switch namespace, joined by every
// node and by one veth from the host, which is how kube-apiserver (on the host) reaches the
// kubelets and the nodes reach kube-apiserver. Only one cluster can run on a machine at a time.
var (
	underlay = netip.MustParsePrefix("10.123.0.0/24")
	// hostIP is the host's end of the underlay; kube-apiserver advertises it.
	hostIP = netip.MustParseAddr("10.123.0.1")
	// switchIP is the bridge's own address, the nodes' default gateway: it does not forward, so
	// nothing leaves the underlay.
	switchIP = netip.MustParseAddr("10.123.0.254")
)

// Names of what the cluster creates; hack/cluster.sh cleanup removes everything with them.
const (
	namePrefix = "apc-"
	switchNS   = namePrefix + "sw"
	hostVeth   = namePrefix + "host"
	bridge     = "br0"
)

// nodeIP is the underlay address of the i-th node (0-based): 10.123.0.11, .12, ...
func nodeIP(i int) netip.Addr {
	a := underlay.Addr().As4()
	a[3] = byte(11 + i)
	return netip.AddrFrom4(a)
}

// run runs a command and returns an error naming it with its output.
func run(args ...string) error {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func runAll(cmds ...[]string) error {
	for _, c := range cmds {
		if err := run(c...); err != nil {
			return err
		}
	}
	return nil
}

// createUnderlay makes the switch namespace with its bridge and the host's veth into it.
func createUnderlay() error {
	plen := fmt.Sprint(underlay.Bits())
	return runAll(
		[]string{"ip", "netns", "add", switchNS},
		[]string{"ip", "-n", switchNS, "link", "set", "lo", "up"},
		[]string{"ip", "-n", switchNS, "link", "add", bridge, "type", "bridge"},
		[]string{"ip", "-n", switchNS, "addr", "add", switchIP.String() + "/" + plen, "dev", bridge},
		[]string{"ip", "-n", switchNS, "link", "set", bridge, "up"},
		[]string{"ip", "link", "add", hostVeth, "type", "veth", "peer", "name", "host", "netns", switchNS},
		[]string{"ip", "-n", switchNS, "link", "set", "host", "master", bridge, "up"},
		[]string{"ip", "addr", "add", hostIP.String() + "/" + plen, "dev", hostVeth},
		[]string{"ip", "link", "set", hostVeth, "up"},
	)
}

// createNodeNetNS makes a node's namespace with eth0 on the underlay at ip.
func createNodeNetNS(ns string, ip netip.Addr) error {
	plen := fmt.Sprint(underlay.Bits())
	return runAll(
		[]string{"ip", "netns", "add", ns},
		[]string{"ip", "-n", ns, "link", "set", "lo", "up"},
		[]string{"ip", "link", "add", ns, "netns", switchNS, "type", "veth", "peer", "name", "eth0", "netns", ns},
		[]string{"ip", "-n", switchNS, "link", "set", ns, "master", bridge, "up"},
		[]string{"ip", "-n", ns, "addr", "add", ip.String() + "/" + plen, "dev", "eth0"},
		[]string{"ip", "-n", ns, "link", "set", "eth0", "up"},
		[]string{"ip", "-n", ns, "route", "add", "default", "via", switchIP.String()},
		[]string{"ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.ip_forward=1"},
	)
}
