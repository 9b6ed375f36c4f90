package chart

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/test/ovssandbox"
)

// TestStartOVSIntegration runs build/images/scripts/start-ovs, the antrea-ovs container's entry
// point, in a private network namespace with temporary directories: both daemons come up and
// answer its --wait (the postStart hook) and --check (the liveness probe), the database it created serves ovs-vsctl and holds
// other_config:flow-restore-wait=true (the agent clears it after replaying its flows), and SIGTERM
// stops both daemons and exits 0.
func TestStartOVSIntegration(t *testing.T) {
	ovssandbox.Require(t)
	root, err := RepoRoot()
	require.NoError(t, err)
	script := filepath.Join(root, "build", "images", "scripts", "start-ovs")
	ns := ovssandbox.NewNetNS(t, "startovs") // its cleanup kills anything left inside
	dir := t.TempDir()
	run := filepath.Join(dir, "run")
	env := []string{"OVS_RUNDIR=" + run, "OVS_DBDIR=" + filepath.Join(dir, "db"), "OVS_LOGDIR=" + filepath.Join(dir, "log")}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := ns.Command(ctx, append(append([]string{"env"}, env...), "sh", script)...)
	logFile, err := os.Create(filepath.Join(dir, "start-ovs.out"))
	require.NoError(t, err)
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if t.Failed() {
			out, _ := os.ReadFile(logFile.Name())
			t.Logf("start-ovs output:\n%s", out)
		}
	}()

	check := func() error {
		_, err := ns.Exec(append(append([]string{"env"}, env...), "sh", script, "--check")...)
		return err
	}
	// The postStart hook: it returns once both daemons answer.
	out, err := ns.Exec(append(append([]string{"env"}, env...), "sh", script, "--wait", "30")...)
	require.NoError(t, err, "start-ovs --wait 30: %s", out)
	require.NoError(t, check(), "start-ovs --wait returned before the daemons answered")
	out, err = ns.Exec("ovs-vsctl", "--db=unix:"+filepath.Join(run, "db.sock"), "--timeout=5", "get", "Open_vSwitch", ".", "external_ids:system-id")
	require.NoError(t, err, out)
	require.Regexp(t, `^"?[0-9a-f-]{36}"?\s*$`, out, "start-ovs sets a system-id")
	out, err = ns.Exec("ovs-vsctl", "--db=unix:"+filepath.Join(run, "db.sock"), "--timeout=5", "get", "Open_vSwitch", ".", "other_config:flow-restore-wait")
	require.NoError(t, err, out)
	require.Equal(t, `"true"`, strings.TrimSpace(out), "start-ovs sets flow-restore-wait before ovs-vswitchd starts")

	// ip netns exec runs the script in the same process (it execs), so the signal reaches sh.
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-exited:
		require.NoError(t, err, "start-ovs must exit 0 on SIGTERM")
	case <-time.After(30 * time.Second):
		t.Fatal("start-ovs did not exit on SIGTERM")
	}
	require.Error(t, check(), "the daemons still answer after start-ovs stopped them")
	_, err = ns.Exec(append(append([]string{"env"}, env...), "sh", script, "--wait", "1")...)
	require.Error(t, err, "start-ovs --wait 1 succeeded with no daemon running")
}
