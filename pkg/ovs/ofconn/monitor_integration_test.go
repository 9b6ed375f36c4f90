package ofconn_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/ofconn"
	"github.com/antrea-proxy/antrea-proxy/test/ovssandbox"
)

// TestIntegrationMonitorSeesVSwitchdRestart restarts ovs-vswitchd (SIGKILL, then a new process
// on the same database) and re-creates the bridge; each time the monitor reports a reset
// within 2 s of the new switch accepting connections.
func TestIntegrationMonitorSeesVSwitchdRestart(t *testing.T) {
	o := ovssandbox.Start(t, ovssandbox.Options{})
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	br := "brmon" + hex.EncodeToString(suffix)
	if out, err := o.Vsctl("add-br", br, "--", "set", "Bridge", br, "datapath_type=netdev",
		"protocols=OpenFlow10,OpenFlow13,OpenFlow15"); err != nil {
		t.Fatalf("add-br: %v: %s", err, out)
	}
	require.NoError(t, o.WaitForBridge(br))

	m := ofconn.NewMonitor(o.MgmtSocket(br), ofconn.MonitorOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	require.Eventually(t, func() bool { up, _ := m.Connected(); return up }, 10*time.Second, 10*time.Millisecond)
	dpid := m.DatapathID()
	require.NotZero(t, dpid)
	select {
	case <-m.Resets():
		t.Fatal("the first connection is no reset")
	default:
	}

	killed := time.Now()
	require.NoError(t, o.RestartVSwitchd(false))
	started := time.Now()
	// When the new vswitchd's bridge accepts OpenFlow connections (polled in parallel).
	accepting := make(chan time.Time, 1)
	go func() {
		for ctx.Err() == nil {
			if _, err := o.Ofctl("show", br); err == nil {
				accepting <- time.Now()
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	var reset time.Time
	select {
	case <-m.Resets():
		reset = time.Now()
	case <-time.After(15 * time.Second):
		t.Fatal("no reset within 15 s of restarting ovs-vswitchd")
	}
	acceptedAt := <-accepting
	r, ok := m.LastReset()
	require.True(t, ok)
	t.Logf("vswitchd restart: reset %v after the kill, %v after the new process's control socket listened, %v after the bridge accepted `ovs-ofctl show` (negative: the monitor connected first); down %v; datapath %016x -> %016x",
		reset.Sub(killed), reset.Sub(started), reset.Sub(acceptedAt), r.Down, r.PreviousDatapathID, r.DatapathID)
	require.Less(t, reset.Sub(acceptedAt), 2*time.Second, "reset detected more than 2 s after the switch accepted connections")
	require.Equal(t, 1, r.Count)
	up, since := m.Connected()
	require.True(t, up)
	require.Equal(t, r.At, since)

	// The bridge is re-created: another reset.
	_, err := o.Vsctl("del-br", br)
	require.NoError(t, err)
	require.Eventually(t, func() bool { up, _ := m.Connected(); return !up }, 10*time.Second, 5*time.Millisecond)
	_, err = o.Vsctl("add-br", br, "--", "set", "Bridge", br, "datapath_type=netdev", "protocols=OpenFlow10,OpenFlow13,OpenFlow15")
	require.NoError(t, err)
	recreated := time.Now()
	select {
	case <-m.Resets():
	case <-time.After(15 * time.Second):
		t.Fatal("no reset within 15 s of re-creating the bridge")
	}
	r, _ = m.LastReset()
	t.Logf("bridge re-created: reset %v after add-br returned; datapath %016x -> %016x (changed %v)",
		time.Since(recreated), r.PreviousDatapathID, r.DatapathID, r.DatapathChanged())
	require.Equal(t, 2, r.Count)
}
