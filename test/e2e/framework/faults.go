package framework

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// This file holds the fault injections of the self-healing tests (test/e2e/selfheal_test.go):
// crashes and restarts of the node's Open vSwitch daemons and agent, and a flush of its bridge.
// Each one is noted in the test log and in the agent's log, so that both timelines line up.

// openFlowWait bounds how long a restarted ovs-vswitchd may take to serve its bridge again.
const openFlowWait = 30 * time.Second

// logEvent notes a fault in the test log and appends it to the agent's log.
func (n *Node) logEvent(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	t.Logf("%s: %s", n.Name, msg)
	f, err := os.OpenFile(n.AgentLog(), os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	fmt.Fprintf(f, "==== e2e %s: %s\n", time.Now().Format("15:04:05.000000"), msg)
	_ = f.Close()
}

// WaitOpenFlow waits until the bridge's OpenFlow management socket accepts connections (the
// moment ovs-vswitchd serves the bridge again) and returns that instant.
func (n *Node) WaitOpenFlow(timeout time.Duration) (time.Time, error) {
	sock := filepath.Join(n.OVS.RunDir, Bridge+".mgmt")
	var at time.Time
	err := Poll(context.Background(), timeout, fmt.Sprintf("ovs-vswitchd on %s to accept OpenFlow connections on %s", n.Name, sock),
		func(context.Context) (bool, string, error) {
			c, err := net.DialTimeout("unix", sock, time.Second)
			if err != nil {
				return false, err.Error(), nil
			}
			at = time.Now()
			_ = c.Close()
			return true, "", nil
		})
	return at, err
}

// RestartVSwitchd kills ovs-vswitchd with SIGKILL (every OpenFlow flow and group goes with it)
// and starts it again on the same database the way start-ovs does: with
// other_config:flow-restore-wait=true. It returns the instant the restarted ovs-vswitchd
// accepted OpenFlow connections on the bridge.
func (n *Node) RestartVSwitchd(t testing.TB) (time.Time, error) {
	t.Helper()
	old := n.OVS.VSwitchdPID()
	n.OVS.KillVSwitchd()
	n.logEvent(t, "killed ovs-vswitchd (pid %d) with SIGKILL", old)
	if err := n.OVS.StartVSwitchd(true); err != nil {
		return time.Time{}, fmt.Errorf("node %s: starting ovs-vswitchd again: %w", n.Name, err)
	}
	at, err := n.WaitOpenFlow(openFlowWait)
	if err != nil {
		return time.Time{}, err
	}
	n.logEvent(t, "ovs-vswitchd restarted with flow-restore-wait=true (pid %d) and accepts OpenFlow connections", n.OVS.VSwitchdPID())
	return at, nil
}

// StartVSwitchdAgain starts ovs-vswitchd when it is not running (e.g. after it aborted), with
// flow-restore-wait=true as start-ovs does, and waits for its bridge.
func (n *Node) StartVSwitchdAgain(t testing.TB) error {
	t.Helper()
	if n.OVS.VSwitchdAlive() {
		return nil
	}
	n.OVS.KillVSwitchd() // reaps the dead process
	if err := n.OVS.StartVSwitchd(true); err != nil {
		return fmt.Errorf("node %s: starting ovs-vswitchd again: %w", n.Name, err)
	}
	if _, err := n.WaitOpenFlow(openFlowWait); err != nil {
		return err
	}
	n.logEvent(t, "started ovs-vswitchd again (pid %d) with flow-restore-wait=true", n.OVS.VSwitchdPID())
	return nil
}

// RestartOVSDB kills ovsdb-server with SIGKILL and starts it again on the same database; it
// returns the instant the new one accepts connections.
func (n *Node) RestartOVSDB(t testing.TB) (time.Time, error) {
	t.Helper()
	n.logEvent(t, "killing ovsdb-server with SIGKILL and starting it again")
	if err := n.OVS.KillDB(); err != nil {
		return time.Time{}, fmt.Errorf("node %s: restarting ovsdb-server: %w", n.Name, err)
	}
	at := time.Now()
	n.logEvent(t, "ovsdb-server accepts connections again")
	return at, nil
}

// DelFlows runs `ovs-ofctl del-flows` on the node's bridge (every flow of every table goes;
// groups stay) and returns when it finished.
func (n *Node) DelFlows(t testing.TB) (time.Time, error) {
	t.Helper()
	if out, err := n.OVS.Ofctl("del-flows", Bridge); err != nil {
		return time.Time{}, fmt.Errorf("node %s: ovs-ofctl del-flows %s: %w: %s", n.Name, Bridge, err, out)
	}
	at := time.Now()
	n.logEvent(t, "ran ovs-ofctl del-flows %s", Bridge)
	return at, nil
}

// OtherConfig returns the Open_vSwitch table's other_config column as ovs-vsctl prints it.
func (n *Node) OtherConfig() (string, error) {
	out, err := n.OVS.Vsctl("get", "Open_vSwitch", ".", "other_config")
	if err != nil {
		return "", fmt.Errorf("node %s: reading other_config: %w", n.Name, err)
	}
	return strings.TrimSpace(out), nil
}

// FlowRestoreWait reports whether other_config:flow-restore-wait is "true".
func (n *Node) FlowRestoreWait() (bool, error) {
	oc, err := n.OtherConfig()
	if err != nil {
		return false, err
	}
	return strings.Contains(oc, `flow-restore-wait="true"`) || strings.Contains(oc, "flow-restore-wait=true"), nil
}

// ClearFlowRestoreWait removes other_config:flow-restore-wait, as the agent should after its
// replay (for repairing a node a failed test left dark).
func (n *Node) ClearFlowRestoreWait(t testing.TB) error {
	t.Helper()
	if out, err := n.OVS.Vsctl("remove", "Open_vSwitch", ".", "other_config", "flow-restore-wait"); err != nil {
		return fmt.Errorf("node %s: clearing flow-restore-wait: %w: %s", n.Name, err, out)
	}
	n.logEvent(t, "cleared other_config:flow-restore-wait")
	return nil
}

// KillAgent kills the node's agent with SIGKILL: no shutdown code runs.
func (n *Node) KillAgent(t testing.TB) {
	t.Helper()
	if n.agent == nil {
		return
	}
	n.agent.Kill()
	n.agent = nil
	n.logEvent(t, "killed antrea-agent with SIGKILL")
}

// RestartAgentAfterKill kills the node's agent with SIGKILL and starts it again with the same
// configuration and state (CNI state directory, the round in OVSDB), waiting at most timeout
// until it synced. If ovs-vswitchd dies meanwhile, it fails at once and says so.
func (n *Node) RestartAgentAfterKill(t testing.TB, timeout time.Duration) error {
	t.Helper()
	n.KillAgent(t)
	return n.StartAgentAgain(t, timeout)
}

// vswitchdEmergency returns the last EMER line of ovs-vswitchd's log (how it aborted), or where
// to look.
func (n *Node) vswitchdEmergency() string {
	b, err := os.ReadFile(filepath.Join(n.OVS.RunDir, "ovs-vswitchd.log"))
	if err != nil {
		return err.Error()
	}
	last := ""
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "|EMER|") {
			last = line
		}
	}
	if last == "" {
		return "no EMER line in " + n.Name + "-ovs-vswitchd.log"
	}
	return "ovs-vswitchd.log: " + last
}

// AgentLastSync is the agent's sync status in one line, for failure messages.
func (n *Node) AgentLastSync(ctx context.Context) string {
	info, err := n.API.AgentInfo(ctx)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%+v", info.Sync)
}
