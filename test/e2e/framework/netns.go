package framework

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/antrea-proxy/antrea-proxy/pkg/netutil"
	"github.com/antrea-proxy/antrea-proxy/test/ovssandbox"
)

// netnsDir is where `ip netns add` bind-mounts named namespaces.
const netnsDir = "/var/run/netns"

// NetNS is a named network namespace the sandbox created (`ip netns add`).
type NetNS struct {
	Name string
}

// Path is the namespace's file, the CNI_NETNS of a pod.
func (n *NetNS) Path() string { return netnsDir + "/" + n.Name }

// createNetNS adds a namespace with its loopback up.
func createNetNS(name string) (*NetNS, error) {
	if len(name) > 15 {
		return nil, fmt.Errorf("network namespace name %q is longer than 15 characters", name)
	}
	if out, err := ovssandbox.RunCmd(10*time.Second, "ip", "netns", "add", name); err != nil {
		return nil, fmt.Errorf("creating network namespace %s: %w: %s", name, err, out)
	}
	if out, err := ovssandbox.RunCmd(10*time.Second, "ip", "-n", name, "link", "set", "lo", "up"); err != nil {
		_ = deleteNetNS(name)
		return nil, fmt.Errorf("network namespace %s: bringing lo up: %w: %s", name, err, out)
	}
	return &NetNS{Name: name}, nil
}

// deleteNetNS kills every process still inside the namespace, then deletes it. A namespace that
// is already gone is not an error.
func deleteNetNS(name string) error {
	if _, err := os.Stat(netnsDir + "/" + name); os.IsNotExist(err) {
		return nil
	}
	self := os.Getpid()
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, _ := ovssandbox.RunCmd(5*time.Second, "ip", "netns", "pids", name)
		pids := strings.Fields(out)
		for _, f := range pids {
			if pid, err := strconv.Atoi(f); err == nil && pid != self {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if len(pids) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // processes take a moment to exit after SIGKILL
	}
	if out, err := ovssandbox.RunCmd(10*time.Second, "ip", "netns", "del", name); err != nil {
		return fmt.Errorf("deleting network namespace %s: %w: %s", name, err, out)
	}
	return nil
}

// listNetNS returns the names of the named network namespaces that start with prefix.
func listNetNS(prefix string) []string {
	entries, err := os.ReadDir(netnsDir)
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			names = append(names, e.Name())
		}
	}
	return names
}

// Exec runs a command inside the namespace (bounded to one minute) and returns its combined output.
func (n *NetNS) Exec(args ...string) (string, error) {
	return n.ExecFor(time.Minute, args...)
}

// ExecFor is Exec bounded to timeout.
func (n *NetNS) ExecFor(timeout time.Duration, args ...string) (string, error) {
	return ovssandbox.RunCmd(timeout, "ip", append([]string{"netns", "exec", n.Name}, args...)...)
}

// ExecStdin is Exec with stdin as the command's standard input.
func (n *NetNS) ExecStdin(stdin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.Name}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("netns %s: %s: %w", n.Name, strings.Join(args, " "), err)
	}
	return string(out), nil
}

// MustExec runs commands inside the namespace and returns the first failure, naming it.
func (n *NetNS) MustExec(cmds ...[]string) error {
	for _, c := range cmds {
		if out, err := n.Exec(c...); err != nil {
			return fmt.Errorf("netns %s: %s: %w: %s", n.Name, strings.Join(c, " "), err, strings.TrimSpace(out))
		}
	}
	return nil
}

// Do runs fn on an OS thread that has entered the namespace. Sockets fn creates stay in the
// namespace after fn returns. fn must not hand work to other goroutines.
func (n *NetNS) Do(fn func() error) error {
	return netutil.InNetNS(n.Path(), fn)
}

// Dial connects from inside the namespace, as a process in it would.
func (n *NetNS) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := n.Do(func() error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%s %s from netns %s: %w", network, addr, n.Name, err)
	}
	return c, nil
}

// Listen opens a TCP listener inside the namespace.
func (n *NetNS) Listen(network, addr string) (net.Listener, error) {
	var l net.Listener
	err := n.Do(func() error {
		var err error
		l, err = net.Listen(network, addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listening on %s %s in netns %s: %w", network, addr, n.Name, err)
	}
	return l, nil
}
