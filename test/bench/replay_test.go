//go:build bench

package bench

import (
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// replayTimeout bounds how long the agent may take to put its flows back after ovs-vswitchd
// restarted.
const replayTimeout = 10 * time.Minute

// replayResult is how long the agent took to put its state back into a restarted
// ovs-vswitchd: from the instant the new one accepted OpenFlow connections until the bridge
// held as many flows as before the kill (Took), and until other_config:flow-restore-wait was
// cleared (RestoreWaitCleared).
type replayResult struct {
	Flows              int
	Took               time.Duration
	RestoreWaitCleared time.Duration
}

var flowCountRE = regexp.MustCompile(`flow_count=(\d+)`)

// flowCount is the bridge's flow count (`ovs-ofctl dump-aggregate`: OVS counts, nothing is
// dumped).
func flowCount(n *framework.Node) (int, error) {
	out, err := n.OVS.Ofctl("dump-aggregate", framework.Bridge)
	if err != nil {
		return 0, err
	}
	m := flowCountRE.FindStringSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("no flow_count in %q", out)
	}
	return strconv.Atoi(m[1])
}

// measureReplay kills the agent node's ovs-vswitchd, starts it again as start-ovs does (with
// flow-restore-wait), and polls every 20 ms until the agent put every flow back and cleared
// flow-restore-wait. A bundle holds the groups before the flows that use them, so the flows
// coming back mean the groups did.
func measureReplay(t *testing.T, n *framework.Node, progress func(string, ...any)) replayResult {
	want, err := flowCount(n)
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	progress("replay: killing ovs-vswitchd (%d flows on %s) and starting it again", want, framework.Bridge)
	up, err := n.RestartVSwitchd(t)
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	r := replayResult{Flows: want}
	deadline := time.Now().Add(replayTimeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for ; r.Took == 0 || r.RestoreWaitCleared == 0; <-tick.C {
		if time.Now().After(deadline) {
			t.Fatalf("replay: not done %v after ovs-vswitchd restarted (flows back after %v, flow-restore-wait cleared after %v)", replayTimeout, r.Took, r.RestoreWaitCleared)
		}
		if r.Took == 0 {
			if got, err := flowCount(n); err == nil && got >= want {
				r.Took = time.Since(up)
			}
		}
		if r.RestoreWaitCleared == 0 {
			if wait, err := n.FlowRestoreWait(); err == nil && !wait {
				r.RestoreWaitCleared = time.Since(up)
			}
		}
	}
	progress("replay: %d flows back %v after ovs-vswitchd accepted OpenFlow, flow-restore-wait cleared after %v", want, r.Took.Round(time.Millisecond), r.RestoreWaitCleared.Round(time.Millisecond))
	return r
}
