package framework

import (
	"fmt"
	"testing"
	"time"
)

// StartAgentAgain starts the node's agent after KillAgent with the same configuration and state
// (CNI state directory, the round in OVSDB), waiting at most timeout until it synced; the
// cluster may change in between, as it does while a real agent is down. If ovs-vswitchd dies
// meanwhile, it fails at once and says so.
func (n *Node) StartAgentAgain(t testing.TB, timeout time.Duration) error {
	t.Helper()
	if n.agent != nil {
		return fmt.Errorf("node %s: the agent is running; kill it first", n.Name)
	}
	pid := n.OVS.VSwitchdPID()
	start := time.Now()
	n.logEvent(t, "starting antrea-agent again (ovs-vswitchd is pid %d)", pid)
	err := n.startAgentGuarded(n.s.agent, timeout, func() error {
		if !n.OVS.VSwitchdAlive() {
			return fmt.Errorf("node %s: ovs-vswitchd (pid %d) died %v after the agent was started again: %s",
				n.Name, pid, time.Since(start).Round(time.Millisecond), n.vswitchdEmergency())
		}
		return nil
	})
	if err != nil {
		return err
	}
	n.logEvent(t, "antrea-agent synced %v after its start", time.Since(start).Round(time.Millisecond))
	return nil
}
