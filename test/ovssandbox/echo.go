package ovssandbox

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Echo is a built echoserver binary (see ./echoserver): a TCP+UDP server answering
// "<name> <client-ip:port>" and a one-shot client, both run inside network namespaces.
type Echo struct {
	Path string
}

// BuildEcho compiles ./echoserver into a temporary directory removed when the test ends. The
// go build cache makes builds after the first cheap.
func BuildEcho(t testing.TB) *Echo {
	t.Helper()
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("locating the ovssandbox sources")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "echoserver")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, GoTool(), "build", "-o", bin, ".")
	cmd.Dir = filepath.Join(filepath.Dir(self), "echoserver")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building echoserver: %v: %s", err, out)
	}
	return &Echo{Path: bin}
}

// GoTool finds the go command: in PATH, else in $GOROOT/bin (go test sets GOROOT for the
// tests it runs), else "go", which then fails with a clear error.
func GoTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if root := os.Getenv("GOROOT"); root != "" {
		return filepath.Join(root, "bin", "go")
	}
	return "go"
}

// EchoServer is a running echoserver.
type EchoServer struct {
	Name string
	Port int
	cmd  *exec.Cmd
}

// StartEcho builds the echoserver and starts it in ns (see Echo.Start).
func StartEcho(t testing.TB, ns *NetNS, name string, port int) *EchoServer {
	t.Helper()
	return BuildEcho(t).Start(t, ns, name, port)
}

// Start runs an echo server named name on TCP and UDP port in ns, waits until it listens and
// kills it when the test ends.
func (e *Echo) Start(t testing.TB, ns *NetNS, name string, port int) *EchoServer {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", ns.Name, e.Path, "-name", name, "-port", strconv.Itoa(port))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting echo server %s in %s: %v", name, ns.Name, err)
	}
	s := &EchoServer{Name: name, Port: port, cmd: cmd}
	t.Cleanup(s.stop)
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err == nil && !strings.HasPrefix(line, "listening") {
			err = fmt.Errorf("unexpected first line %q", line)
		}
		ready <- err
	}()
	select {
	case err := <-ready:
		if err != nil {
			s.stop()
			t.Fatalf("echo server %s in %s did not start: %v: %s", name, ns.Name, err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		s.stop()
		t.Fatalf("echo server %s in %s not listening after 10s: %s", name, ns.Name, stderr.String())
	}
	return s
}

func (s *EchoServer) stop() {
	if s.cmd.Process == nil || s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}

// Dial runs the echo client once in ns against addr ("10.96.0.10:80") over proto ("tcp" or
// "udp") and returns the server's reply line, e.g. "server1 10.10.0.10:41234". The client gives
// up after timeout; the process is killed shortly after if it hangs.
func (e *Echo) Dial(ctx context.Context, ns *NetNS, proto, addr string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout+5*time.Second)
	defer cancel()
	cmd := ns.Command(ctx, e.Path, "-client", "-proto", proto, "-addr", addr, "-timeout", timeout.String())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s from netns %s: %w: %s", proto, addr, ns.Name, err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// ParseEchoReply splits a reply into the server name and the client address it saw.
func ParseEchoReply(reply string) (server, client string, err error) {
	f := strings.Fields(reply)
	if len(f) != 2 {
		return "", "", fmt.Errorf("malformed echo reply %q", reply)
	}
	return f[0], f[1], nil
}
