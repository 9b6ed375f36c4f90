package ovssandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// NetNS is a network namespace created for one test ("ip netns add"), deleted when the test
// ends after killing every process still running in it.
type NetNS struct {
	Name string
}

// randomSuffix returns n random hexadecimal characters.
func randomSuffix(n int) string {
	b := make([]byte, (n+1)/2)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)[:n]
}

// NewNetNS creates a namespace named prefix-XXXXXX (the prefix is cut to 8 characters so the
// name also fits in a 15-character interface name) with its loopback up.
func NewNetNS(t testing.TB, prefix string) *NetNS {
	t.Helper()
	Require(t)
	if len(prefix) > 8 {
		prefix = prefix[:8]
	}
	ns := &NetNS{Name: prefix + "-" + randomSuffix(6)}
	if out, err := RunCmd(10*time.Second, "ip", "netns", "add", ns.Name); err != nil {
		t.Fatalf("creating netns %s: %v: %s", ns.Name, err, out)
	}
	t.Cleanup(func() { ns.destroy(t) })
	if out, err := RunCmd(10*time.Second, "ip", "-n", ns.Name, "link", "set", "lo", "up"); err != nil {
		t.Fatalf("netns %s: bringing lo up: %v: %s", ns.Name, err, out)
	}
	return ns
}

func (ns *NetNS) destroy(t testing.TB) {
	// Kill whatever still runs inside, then delete; retry briefly while processes exit.
	for attempt := 0; attempt < 50; attempt++ {
		out, _ := RunCmd(5*time.Second, "ip", "netns", "pids", ns.Name)
		for _, f := range strings.Fields(out) {
			if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if len(strings.Fields(out)) == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if out, err := RunCmd(10*time.Second, "ip", "netns", "del", ns.Name); err != nil {
		t.Errorf("deleting netns %s: %v: %s", ns.Name, err, out)
	}
}

// Exec runs a command inside the namespace (bounded to one minute) and returns its combined
// output.
func (ns *NetNS) Exec(args ...string) (string, error) {
	return RunCmd(time.Minute, "ip", append([]string{"netns", "exec", ns.Name}, args...)...)
}

// Command returns an unstarted command that runs inside the namespace.
func (ns *NetNS) Command(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns.Name}, args...)...)
}

// RunCmd runs name with args, bounded in time, and returns its combined output.
func RunCmd(timeout time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return out.String(), nil
}

// VethConfig describes the namespace side of a veth pair.
type VethConfig struct {
	// IfName is the interface name inside the namespace, e.g. "eth0".
	IfName string
	// Addr is the interface's address with prefix length, e.g. "10.10.0.2/24".
	Addr string
	// MAC, when set, is the interface's MAC address; otherwise the kernel picks one.
	MAC net.HardwareAddr
	// Gateway, when set, becomes the namespace's default route.
	Gateway string
	// OFPortRequest, when non-zero, asks OVS for this OpenFlow port number.
	OFPortRequest int
}

// Veth is a veth pair whose host end is a port of an OVS bridge.
type Veth struct {
	// HostIf is the bridge-side interface (in the OVS instance's namespace).
	HostIf string
	// OFPort is the OpenFlow port number of HostIf on the bridge.
	OFPort uint32
	// NS and IfName locate the other end; MAC is its MAC address.
	NS     *NetNS
	IfName string
	MAC    net.HardwareAddr
}

// AttachVeth creates a veth pair between ns (as cfg.IfName, addressed and up) and bridge of OVS
// instance o (as a system port), with TX checksum offload off on both ends so that the userspace
// datapath forwards correct checksums. The port and the pair are removed when the test ends.
func AttachVeth(t testing.TB, o *Instance, bridge string, ns *NetNS, cfg VethConfig) *Veth {
	t.Helper()
	if cfg.IfName == "" {
		cfg.IfName = "eth0"
	}
	v := &Veth{HostIf: "veth" + randomSuffix(8), NS: ns, IfName: cfg.IfName}
	host := func(args ...string) []string { // an "ip" command in the OVS instance's namespace
		if o.NetNS != "" {
			return append([]string{"-n", o.NetNS}, args...)
		}
		return args
	}
	must := func(what, name string, args ...string) string {
		t.Helper()
		out, err := RunCmd(30*time.Second, name, args...)
		if err != nil {
			t.Fatalf("attaching %s to %s/%s: %s: %v: %s", ns.Name, bridge, v.HostIf, what, err, out)
		}
		return out
	}
	must("creating veth pair", "ip", host("link", "add", v.HostIf, "type", "veth", "peer", "name", cfg.IfName, "netns", ns.Name)...)
	t.Cleanup(func() {
		_, _ = o.Vsctl("--if-exists", "del-port", bridge, v.HostIf)
		_, _ = RunCmd(10*time.Second, "ip", host("link", "del", v.HostIf)...)
	})
	if cfg.MAC != nil {
		must("setting MAC", "ip", "-n", ns.Name, "link", "set", cfg.IfName, "address", cfg.MAC.String())
	}
	if cfg.Addr != "" {
		must("adding address", "ip", "-n", ns.Name, "addr", "add", cfg.Addr, "dev", cfg.IfName)
	}
	must("bringing up inner end", "ip", "-n", ns.Name, "link", "set", cfg.IfName, "up")
	must("bringing up host end", "ip", host("link", "set", v.HostIf, "up")...)
	must("disabling TX offload inside", "ip", "netns", "exec", ns.Name, "ethtool", "-K", cfg.IfName, "tx", "off")
	if o.NetNS != "" {
		must("disabling TX offload on host end", "ip", "netns", "exec", o.NetNS, "ethtool", "-K", v.HostIf, "tx", "off")
	} else {
		must("disabling TX offload on host end", "ethtool", "-K", v.HostIf, "tx", "off")
	}
	if cfg.Gateway != "" {
		must("adding default route", "ip", "-n", ns.Name, "route", "add", "default", "via", cfg.Gateway, "dev", cfg.IfName)
	}
	addPort := []string{"add-port", bridge, v.HostIf}
	if cfg.OFPortRequest != 0 {
		addPort = append(addPort, "--", "set", "Interface", v.HostIf, "ofport_request="+strconv.Itoa(cfg.OFPortRequest))
	}
	if out, err := o.Vsctl(addPort...); err != nil {
		t.Fatalf("adding %s to bridge %s: %v: %s", v.HostIf, bridge, err, out)
	}
	port, err := waitOFPort(o, v.HostIf, 10*time.Second)
	if err != nil {
		t.Fatalf("port %s on bridge %s: %v", v.HostIf, bridge, err)
	}
	v.OFPort = port
	mac, err := linkMAC(ns.Name, cfg.IfName)
	if err != nil {
		t.Fatalf("netns %s: %v", ns.Name, err)
	}
	v.MAC = mac
	return v
}

// waitOFPort polls the Interface's ofport until OVS has assigned one.
func waitOFPort(o *Instance, ifName string, d time.Duration) (uint32, error) {
	deadline := time.Now().Add(d)
	for {
		out, err := o.Vsctl("get", "Interface", ifName, "ofport")
		s := strings.TrimSpace(out)
		if err == nil {
			if n, perr := strconv.Atoi(s); perr == nil && n > 0 {
				return uint32(n), nil
			}
		}
		if time.Now().After(deadline) {
			errText := ""
			if o.NetNS == "" {
				errText = " (is another ovs-vswitchd with the netdev datapath running in this network namespace?)"
			}
			if err != nil {
				return 0, fmt.Errorf("no ofport after %v: %w%s", d, err, errText)
			}
			status, _ := o.Vsctl("get", "Interface", ifName, "error")
			return 0, fmt.Errorf("no ofport after %v (ofport %q, error %s)%s", d, s, strings.TrimSpace(status), errText)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// linkMAC returns the MAC address of ifName inside namespace ns.
func linkMAC(ns, ifName string) (net.HardwareAddr, error) {
	out, err := RunCmd(10*time.Second, "ip", "-n", ns, "-j", "link", "show", "dev", ifName)
	if err != nil {
		return nil, fmt.Errorf("reading MAC of %s: %w: %s", ifName, err, out)
	}
	var links []struct {
		Address string `json:"address"`
	}
	if err := json.Unmarshal([]byte(out), &links); err != nil || len(links) != 1 {
		return nil, fmt.Errorf("reading MAC of %s: unexpected output %q", ifName, out)
	}
	return net.ParseMAC(links[0].Address)
}
