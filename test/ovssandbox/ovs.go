// Package ovssandbox starts throw-away Open vSwitch instances (ovsdb-server and ovs-vswitchd with
// the userspace datapath) and network namespaces with veth pairs for integration and end-to-end
// tests. Several instances can run side by side: each has its own run directory. Everything is
// cleaned up through t.Cleanup, even when the test fails.
package ovssandbox

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// SchemaPath is where Debian's openvswitch-common installs the OVSDB schema.
const SchemaPath = "/usr/share/openvswitch/vswitch.ovsschema"

// Require marks an integration test. It skips in -short mode (the unit suite), and when OVS or
// root privileges are missing, except under CI=true where a missing prerequisite fails the test
// and says why.
func Require(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test (real Open vSwitch): not run with -short")
	}
	var missing []string
	for _, bin := range []string{"ovsdb-server", "ovs-vswitchd", "ovsdb-tool", "ovs-vsctl", "ovs-ofctl", "ovs-appctl", "ip", "ethtool"} {
		if _, err := exec.LookPath(bin); err != nil {
			missing = append(missing, bin)
		}
	}
	if os.Geteuid() != 0 {
		missing = append(missing, "root privileges")
	}
	if len(missing) == 0 {
		return
	}
	msg := fmt.Sprintf("integration test needs %s (run hack/setup.sh as root)", strings.Join(missing, ", "))
	if os.Getenv("CI") == "true" {
		t.Fatal("CI=true forbids skipping: " + msg)
	}
	t.Skip(msg)
}

// Instance is one running Open vSwitch: its own database, daemon and run directory.
type Instance struct {
	// RunDir holds the database socket, the unixctl sockets, the bridge management sockets
	// (<bridge>.mgmt), logs and pid files.
	RunDir string
	// NetNS, when set, is the network namespace (ip netns name) the daemons run in.
	NetNS string

	dbServer *exec.Cmd
	vswitchd *exec.Cmd
}

// DBSocket is the OVSDB endpoint for libovsdb and ovs-vsctl.
func (o *Instance) DBSocket() string { return "unix:" + filepath.Join(o.RunDir, "db.sock") }

// MgmtSocket is the OpenFlow management socket of bridge.
func (o *Instance) MgmtSocket(bridge string) string {
	return "unix:" + filepath.Join(o.RunDir, bridge+".mgmt")
}

// Options tune Start.
type Options struct {
	// NetNS runs the daemons inside this existing network namespace. When empty, Start creates a
	// private namespace for the instance: the userspace datapath creates a tap device named
	// "ovs-netdev" and internal ports named after their bridges, so two instances can only run
	// side by side (for example two test packages at once) in different namespaces.
	NetNS string
}

// Start runs a fresh OVS in a temporary directory and stops it when the test ends.
func Start(t testing.TB, opts Options) *Instance {
	t.Helper()
	Require(t)
	dir, err := os.MkdirTemp("", "ovs-")
	if err != nil {
		t.Fatal(err)
	}
	o := &Instance{RunDir: dir, NetNS: opts.NetNS}
	ownNS := ""
	if o.NetNS == "" {
		ownNS = "ovs" + filepath.Base(dir)[len("ovs-"):]
		if len(ownNS) > 15 {
			ownNS = ownNS[:15]
		}
		if out, err := exec.Command("ip", "netns", "add", ownNS).CombinedOutput(); err != nil {
			_ = os.RemoveAll(dir)
			t.Fatalf("creating network namespace %s for OVS: %v: %s", ownNS, err, out)
		}
		_ = exec.Command("ip", "-n", ownNS, "link", "set", "lo", "up").Run()
		o.NetNS = ownNS
	}
	t.Cleanup(func() {
		o.Stop()
		if ownNS != "" {
			_ = exec.Command("ip", "netns", "delete", ownNS).Run()
		}
		if t.Failed() {
			for _, f := range []string{"ovsdb-server.log", "ovs-vswitchd.log"} {
				if b, err := os.ReadFile(filepath.Join(dir, f)); err == nil {
					t.Logf("---- %s (last 4 KiB) ----\n%s", f, tail(b, 4096))
				}
			}
		}
		_ = os.RemoveAll(dir)
	})
	if err := o.start(); err != nil {
		t.Fatalf("starting OVS in %s: %v", dir, err)
	}
	return o
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

func (o *Instance) command(name string, args ...string) *exec.Cmd {
	if o.NetNS != "" {
		args = append([]string{"netns", "exec", o.NetNS, name}, args...)
		name = "ip"
	}
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "OVS_RUNDIR="+o.RunDir, "OVS_LOGDIR="+o.RunDir, "OVS_DBDIR="+o.RunDir)
	return cmd
}

func (o *Instance) start() error {
	db := filepath.Join(o.RunDir, "conf.db")
	if out, err := o.command("ovsdb-tool", "create", db, SchemaPath).CombinedOutput(); err != nil {
		return fmt.Errorf("ovsdb-tool create: %v: %s", err, out)
	}
	o.dbServer = o.command("ovsdb-server", db,
		"--remote=punix:"+filepath.Join(o.RunDir, "db.sock"),
		"--unixctl="+filepath.Join(o.RunDir, "ovsdb-server.ctl"),
		"--log-file="+filepath.Join(o.RunDir, "ovsdb-server.log"),
		"--pidfile="+filepath.Join(o.RunDir, "ovsdb-server.pid"))
	if err := o.dbServer.Start(); err != nil {
		return fmt.Errorf("ovsdb-server: %w", err)
	}
	if err := waitListening(filepath.Join(o.RunDir, "db.sock"), 10*time.Second); err != nil {
		return fmt.Errorf("ovsdb-server socket: %w", err)
	}
	if out, err := o.Vsctl("--no-wait", "init"); err != nil {
		return fmt.Errorf("ovs-vsctl init: %v: %s", err, out)
	}
	return o.startVSwitchd()
}

func (o *Instance) startVSwitchd() error {
	ctl := filepath.Join(o.RunDir, "ovs-vswitchd.ctl")
	_ = os.Remove(ctl)
	o.vswitchd = o.command("ovs-vswitchd", o.DBSocket(),
		"--unixctl="+ctl,
		"--log-file="+filepath.Join(o.RunDir, "ovs-vswitchd.log"),
		"--pidfile="+filepath.Join(o.RunDir, "ovs-vswitchd.pid"))
	if err := o.vswitchd.Start(); err != nil {
		return fmt.Errorf("ovs-vswitchd: %w", err)
	}
	if err := waitListening(ctl, 10*time.Second); err != nil {
		return fmt.Errorf("ovs-vswitchd control socket: %w", err)
	}
	return nil
}

// VSwitchdPID returns the process ID of the running ovs-vswitchd (0 when none runs).
func (o *Instance) VSwitchdPID() int {
	if o.vswitchd == nil || o.vswitchd.Process == nil {
		return 0
	}
	return o.vswitchd.Process.Pid
}

// VSwitchdAlive reports whether the ovs-vswitchd this instance started is still running (it
// may have aborted on its own, e.g. on an assertion).
func (o *Instance) VSwitchdAlive() bool {
	pid := o.VSwitchdPID()
	if pid == 0 {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// Field 3 is the state; a zombie (Z) has exited but was not reaped yet.
	f := strings.Fields(string(b))
	return len(f) > 2 && f[2] != "Z"
}

// KillVSwitchd kills ovs-vswitchd with SIGKILL, as an OOM kill or a crash would: it removes
// nothing from the database, and every OpenFlow flow and group is gone with the process.
func (o *Instance) KillVSwitchd() {
	if o.vswitchd == nil || o.vswitchd.Process == nil {
		return
	}
	_ = o.vswitchd.Process.Kill()
	_ = o.vswitchd.Wait()
	o.vswitchd = nil
}

// StartVSwitchd starts ovs-vswitchd again on the same database after KillVSwitchd. With
// flowRestoreWait it first sets other_config:flow-restore-wait=true, as start-ovs does, so the
// new process waits for its controller to restore the flows.
func (o *Instance) StartVSwitchd(flowRestoreWait bool) error {
	if flowRestoreWait {
		if out, err := o.Vsctl("--no-wait", "set", "Open_vSwitch", ".", "other_config:flow-restore-wait=true"); err != nil {
			return fmt.Errorf("setting flow-restore-wait: %v: %s", err, out)
		}
	}
	return o.startVSwitchd()
}

// RestartVSwitchd is KillVSwitchd followed by StartVSwitchd.
func (o *Instance) RestartVSwitchd(flowRestoreWait bool) error {
	o.KillVSwitchd()
	return o.StartVSwitchd(flowRestoreWait)
}

// KillDB kills ovsdb-server with SIGKILL and starts it again on the same database.
func (o *Instance) KillDB() error {
	if o.dbServer != nil && o.dbServer.Process != nil {
		_ = o.dbServer.Process.Kill()
		_ = o.dbServer.Wait()
		o.dbServer = nil
	}
	return o.RestartDB()
}

// RestartDB kills ovsdb-server and starts it again on the same database, to test reconnects.
func (o *Instance) RestartDB() error {
	stopCmd(o.dbServer)
	sock := filepath.Join(o.RunDir, "db.sock")
	_ = os.Remove(sock)
	o.dbServer = o.command("ovsdb-server", filepath.Join(o.RunDir, "conf.db"),
		"--remote=punix:"+sock,
		"--unixctl="+filepath.Join(o.RunDir, "ovsdb-server.ctl"),
		"--log-file="+filepath.Join(o.RunDir, "ovsdb-server.log"),
		"--pidfile="+filepath.Join(o.RunDir, "ovsdb-server.pid"))
	if err := o.dbServer.Start(); err != nil {
		return err
	}
	return waitListening(sock, 10*time.Second)
}

// Stop terminates both daemons. It is safe to call twice.
func (o *Instance) Stop() {
	if o.vswitchd != nil {
		_, _ = o.Appctl("exit")
		stopCmd(o.vswitchd)
		o.vswitchd = nil
	}
	if o.dbServer != nil {
		stopCmd(o.dbServer)
		o.dbServer = nil
	}
}

func stopCmd(c *exec.Cmd) {
	if c == nil || c.Process == nil {
		return
	}
	_ = c.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = c.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = c.Process.Kill()
		<-done
	}
}

func waitFor(path string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not appear within %v", path, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitListening polls until a unix socket accepts connections: the file appears at bind time,
// before the server listens.
func waitListening(path string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		c, err := net.DialTimeout("unix", path, time.Second)
		if err == nil {
			_ = c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s is not accepting connections after %v: %w", path, d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Vsctl runs ovs-vsctl against this instance.
func (o *Instance) Vsctl(args ...string) (string, error) {
	return o.run("ovs-vsctl", append([]string{"--db=" + o.DBSocket(), "--timeout=10"}, args...)...)
}

// Ofctl runs ovs-ofctl -O OpenFlow15 against bridge's management socket: args follow the
// command name, e.g. o.Ofctl("dump-flows", "br-int").
func (o *Instance) Ofctl(cmd, bridge string, args ...string) (string, error) {
	full := append([]string{"-O", "OpenFlow15", cmd, o.MgmtSocket(bridge)}, args...)
	return o.run("ovs-ofctl", full...)
}

// Appctl runs ovs-appctl against ovs-vswitchd.
func (o *Instance) Appctl(args ...string) (string, error) {
	return o.run("ovs-appctl", append([]string{"-t", filepath.Join(o.RunDir, "ovs-vswitchd.ctl")}, args...)...)
}

// Trace runs ofproto/trace on bridge with the given flow and returns its output.
func (o *Instance) Trace(bridge, flow string) (string, error) {
	return o.Appctl("ofproto/trace", bridge, flow)
}

func (o *Instance) run(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := o.command(name, args...)
	cmd = exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...)
	cmd.Env = append(os.Environ(), "OVS_RUNDIR="+o.RunDir)
	// stdout is the answer; stderr only explains a failure. A busy ovs-ofctl logs warnings
	// there ("Unreasonably long … poll interval") that, mixed into a dump, corrupt it.
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if err != nil {
		both := out.String() + errOut.String()
		return both, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(both))
	}
	return out.String(), nil
}

// WaitForBridge polls until bridge's management socket exists.
func (o *Instance) WaitForBridge(bridge string) error {
	return waitFor(filepath.Join(o.RunDir, bridge+".mgmt"), 10*time.Second)
}
