package chart

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/test/ovssandbox"
)

// ovsContainer is build/images/scripts/start-ovs running in a private network namespace with
// temporary directories, as in the antrea-ovs container.
type ovsContainer struct {
	ns     *ovssandbox.NetNS
	env    []string
	script string
	run    string
	log    string
	exited chan error
	pid    int
}

// startOVSContainer starts start-ovs with the extra environment and waits until both daemons
// answer (its postStart hook).
func startOVSContainer(t *testing.T, extraEnv ...string) *ovsContainer {
	t.Helper()
	ovssandbox.Require(t)
	root, err := RepoRoot()
	require.NoError(t, err)
	dir := t.TempDir()
	o := &ovsContainer{
		ns:     ovssandbox.NewNetNS(t, "ovsstop"),
		script: filepath.Join(root, "build", "images", "scripts", "start-ovs"),
		run:    filepath.Join(dir, "run"),
		log:    filepath.Join(dir, "start-ovs.out"),
		exited: make(chan error, 1),
	}
	o.env = append([]string{"OVS_RUNDIR=" + o.run, "OVS_DBDIR=" + filepath.Join(dir, "db"), "OVS_LOGDIR=" + filepath.Join(dir, "log")}, extraEnv...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	cmd := o.ns.Command(ctx, append(append([]string{"env"}, o.env...), "sh", o.script)...)
	logFile, err := os.Create(o.log)
	require.NoError(t, err)
	t.Cleanup(func() { _ = logFile.Close() })
	cmd.Stdout, cmd.Stderr = logFile, logFile
	require.NoError(t, cmd.Start())
	o.pid = cmd.Process.Pid
	go func() { o.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := os.ReadFile(o.log)
			t.Logf("start-ovs output:\n%s", out)
		}
	})
	out, err := o.exec("sh", o.script, "--wait", "30")
	require.NoError(t, err, "start-ovs --wait 30: %s", out)
	return o
}

func (o *ovsContainer) exec(args ...string) (string, error) {
	return o.ns.Exec(append(append([]string{"env"}, o.env...), args...)...)
}

// alive reports whether both daemons answer (start-ovs --check, the liveness probe).
func (o *ovsContainer) alive() bool {
	_, err := o.exec("sh", o.script, "--check")
	return err == nil
}

var sessionsRE = regexp.MustCompile(`sessions:(\d+)`)

// sessions is ovsdb-server's count of OVSDB sessions.
func (o *ovsContainer) sessions() int {
	out, err := o.exec("ovs-appctl", "-T", "5", "-t", "ovsdb-server", "memory/show")
	if err != nil {
		return -1
	}
	m := sessionsRE.FindStringSubmatch(out)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// connectClient holds an OVSDB session open as antrea-agent does (ovsdb-client monitor) and
// returns the function that ends it.
func (o *ovsContainer) connectClient(t *testing.T) (disconnect func()) {
	t.Helper()
	before := o.sessions()
	cmd := o.ns.Command(context.Background(), "ovsdb-client", "monitor", "unix:"+filepath.Join(o.run, "db.sock"), "Open_vSwitch", "Open_vSwitch")
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	disconnect = func() { _ = cmd.Process.Kill(); <-done }
	t.Cleanup(disconnect)
	waitUntil(t, 10*time.Second, "the client's OVSDB session", func() (bool, string) {
		n := o.sessions()
		return n > before, fmt.Sprintf("%d sessions, %d before", n, before)
	})
	return disconnect
}

// waitExit waits for start-ovs to exit and returns when it did.
func (o *ovsContainer) waitExit(t *testing.T, within time.Duration) time.Time {
	t.Helper()
	select {
	case err := <-o.exited:
		require.NoError(t, err, "start-ovs must exit 0 on SIGTERM")
		return time.Now()
	case <-time.After(within):
		t.Fatalf("start-ovs did not exit within %v of the SIGTERM", within)
	}
	return time.Time{}
}

func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, msg := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %s", what, msg)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestStartOVSStopWaitsForAgentIntegration: the kubelet sends SIGTERM to both containers of a
// deleted agent Pod at once, and antrea-agent then hands its LoadBalancer IPs over for up to its
// handover timeout, during which the addresses' traffic still reaches this node: start-ovs keeps
// both daemons running while another OVSDB client than ovs-vswitchd is connected, and stops them
// as soon as that client left.
func TestStartOVSStopWaitsForAgentIntegration(t *testing.T) {
	o := startOVSContainer(t, "OVS_STOP_WAIT=30")
	disconnect := o.connectClient(t)
	require.NoError(t, syscall.Kill(o.pid, syscall.SIGTERM))
	signalled := time.Now()
	// The daemons keep answering while the client stays connected: observe them for 2 s.
	for time.Since(signalled) < 2*time.Second {
		select {
		case err := <-o.exited:
			t.Fatalf("start-ovs exited %v after the SIGTERM (%v) while an OVSDB client was still connected",
				time.Since(signalled).Round(time.Millisecond), err)
		default:
		}
		require.True(t, o.alive(), "the daemons stopped %v after the SIGTERM while an OVSDB client was still connected",
			time.Since(signalled).Round(time.Millisecond))
		time.Sleep(200 * time.Millisecond)
	}
	disconnect()
	left := time.Now()
	exited := o.waitExit(t, 10*time.Second)
	t.Logf("start-ovs stopped the daemons %v after the client left (%v after the SIGTERM)",
		exited.Sub(left).Round(time.Millisecond), exited.Sub(signalled).Round(time.Millisecond))
	require.Less(t, exited.Sub(left), 3*time.Second, "start-ovs stops soon after the last client left")
	require.False(t, o.alive(), "the daemons still answer after start-ovs exited")
}

// TestStartOVSStopWaitIsBoundedIntegration: a client that never leaves delays the stop by
// OVS_STOP_WAIT seconds at most, and OVS_STOP_WAIT=0 stops at once.
func TestStartOVSStopWaitIsBoundedIntegration(t *testing.T) {
	for _, tc := range []struct {
		wait     string
		min, max time.Duration
	}{{"2", 2 * time.Second, 8 * time.Second}, {"0", 0, 3 * time.Second}} {
		t.Run("OVS_STOP_WAIT="+tc.wait, func(t *testing.T) {
			o := startOVSContainer(t, "OVS_STOP_WAIT="+tc.wait)
			o.connectClient(t)
			require.NoError(t, syscall.Kill(o.pid, syscall.SIGTERM))
			signalled := time.Now()
			took := o.waitExit(t, tc.max).Sub(signalled)
			t.Logf("OVS_STOP_WAIT=%s with a client that stays: start-ovs exited %v after the SIGTERM", tc.wait, took.Round(time.Millisecond))
			require.GreaterOrEqual(t, took, tc.min)
			require.False(t, o.alive(), "the daemons still answer after start-ovs exited")
			out, err := os.ReadFile(o.log)
			require.NoError(t, err)
			if tc.wait != "0" {
				require.True(t, strings.Contains(string(out), "still connected after 2 s"), "start-ovs says why it stopped: %s", out)
			}
		})
	}
}
