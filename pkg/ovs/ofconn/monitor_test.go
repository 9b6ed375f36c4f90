package ofconn

import (
	"context"
	"encoding/binary"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeBridge is an OpenFlow 1.3 switch on a unix socket that accepts any number of
// connections, can drop them, stop listening (ovs-vswitchd gone) and listen again with another
// datapath ID (ovs-vswitchd restarted, bridge re-created).
type fakeBridge struct {
	path string

	mu    sync.Mutex
	l     net.Listener
	conns []net.Conn
	dpid  uint64
	// silent stops echo replies (a wedged switch).
	silent atomic.Bool
}

func startBridge(t *testing.T, dpid uint64) *fakeBridge {
	t.Helper()
	b := &fakeBridge{path: filepath.Join(t.TempDir(), "br.mgmt"), dpid: dpid}
	b.listen(t)
	t.Cleanup(b.stop)
	return b
}

func (b *fakeBridge) addr() string { return "unix:" + b.path }

func (b *fakeBridge) listen(t *testing.T) {
	t.Helper()
	l, err := net.Listen("unix", b.path)
	require.NoError(t, err)
	b.mu.Lock()
	b.l = l
	b.mu.Unlock()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			b.mu.Lock()
			b.conns = append(b.conns, c)
			dpid := b.dpid
			b.mu.Unlock()
			go serveBridgeConn(c, dpid, &b.silent)
		}
	}()
}

// dropConns closes every open connection; the listener stays.
func (b *fakeBridge) dropConns() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.conns {
		_ = c.Close()
	}
	b.conns = nil
}

// stop closes the listener and every connection, and removes the socket.
func (b *fakeBridge) stop() {
	b.mu.Lock()
	if b.l != nil {
		_ = b.l.Close()
		b.l = nil
	}
	b.mu.Unlock()
	b.dropConns()
	_ = os.Remove(b.path)
}

// restart listens again, answering with dpid from now on.
func (b *fakeBridge) restart(t *testing.T, dpid uint64) {
	b.mu.Lock()
	b.dpid = dpid
	b.mu.Unlock()
	b.listen(t)
}

func serveBridgeConn(c net.Conn, dpid uint64, silent *atomic.Bool) {
	defer func() { _ = c.Close() }()
	hello := encode(TypeHello, 1, []byte{0, 1, 0, 8, 0, 0, 0, 1 << 4})
	for {
		msg, err := ReadMessage(c)
		if err != nil {
			return
		}
		h, _ := ParseHeader(msg)
		var reply []byte
		switch h.Type {
		case TypeHello:
			reply = hello
		case TypeFeaturesRequest:
			body := make([]byte, 24)
			binary.BigEndian.PutUint64(body, dpid)
			body[12] = 254
			reply = encode(TypeFeaturesReply, h.Xid, body)
		case TypeBarrierRequest:
			reply = encode(TypeBarrierReply, h.Xid, nil)
		case TypeEchoRequest:
			if silent.Load() {
				continue
			}
			reply = EncodeEchoReply(h.Xid, msg[headerLen:])
		default:
			continue
		}
		if _, err := c.Write(reply); err != nil {
			return
		}
	}
}

// runMonitor starts m.Run and stops it when the test ends.
func runMonitor(t *testing.T, m *Monitor) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

func waitConnected(t *testing.T, m *Monitor, want bool) time.Time {
	t.Helper()
	var since time.Time
	require.Eventually(t, func() bool {
		var up bool
		up, since = m.Connected()
		return up == want
	}, 10*time.Second, 5*time.Millisecond, "connected=%v", want)
	return since
}

func waitReset(t *testing.T, m *Monitor) Reset {
	t.Helper()
	select {
	case <-m.Resets():
	case <-time.After(10 * time.Second):
		t.Fatal("no reset reported")
	}
	r, ok := m.LastReset()
	require.True(t, ok)
	return r
}

func noReset(t *testing.T, m *Monitor) {
	t.Helper()
	select {
	case <-m.Resets():
		t.Fatal("unexpected reset")
	default:
	}
	_, ok := m.LastReset()
	require.False(t, ok)
}

func TestMonitorReportsResetAfterLoss(t *testing.T) {
	b := startBridge(t, 0xab)
	m := NewMonitor(b.addr(), MonitorOptions{})
	created := time.Now()
	up, since := m.Connected()
	require.False(t, up)
	require.False(t, since.After(created))
	runMonitor(t, m)

	// The first connection is no reset.
	since = waitConnected(t, m, true)
	require.False(t, since.Before(created))
	require.Equal(t, uint64(0xab), m.DatapathID())
	noReset(t, m)

	// The connection breaks, the switch is still there: a reset with the same datapath.
	b.dropConns()
	r := waitReset(t, m)
	require.Equal(t, 1, r.Count)
	require.Equal(t, uint64(0xab), r.DatapathID)
	require.False(t, r.DatapathChanged())
	waitConnected(t, m, true)

	// The switch goes away: disconnected, and no reset while it is gone.
	b.stop()
	downSince := waitConnected(t, m, false)
	noResetYet := func() {
		select {
		case <-m.Resets():
			t.Fatal("reset while the switch is down")
		default:
		}
	}
	noResetYet()

	// It comes back with another datapath ID.
	b.restart(t, 0xcd)
	r = waitReset(t, m)
	require.Equal(t, 2, r.Count)
	require.True(t, r.DatapathChanged())
	require.Equal(t, uint64(0xcd), r.DatapathID)
	require.Equal(t, uint64(0xab), r.PreviousDatapathID)
	require.False(t, r.At.Before(downSince))
	require.Positive(t, r.Down)
	upSince := waitConnected(t, m, true)
	require.Equal(t, r.At, upSince)
	require.Equal(t, uint64(0xcd), m.DatapathID())
}

func TestMonitorCoalescesResets(t *testing.T) {
	b := startBridge(t, 1)
	m := NewMonitor(b.addr(), MonitorOptions{})
	runMonitor(t, m)
	waitConnected(t, m, true)
	for i := 1; i <= 3; i++ {
		b.dropConns()
		require.Eventually(t, func() bool {
			r, ok := m.LastReset()
			return ok && r.Count == i
		}, 10*time.Second, 5*time.Millisecond)
	}
	// Nobody read: one value waits, describing the third reset.
	<-m.Resets()
	select {
	case <-m.Resets():
		t.Fatal("resets were not coalesced")
	default:
	}
	r, _ := m.LastReset()
	require.Equal(t, 3, r.Count)
}

func TestMonitorFirstConnectionAfterStartIsNoReset(t *testing.T) {
	b := startBridge(t, 7)
	b.stop()
	m := NewMonitor(b.addr(), MonitorOptions{MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
	runMonitor(t, m)
	up, _ := m.Connected()
	require.False(t, up)
	b.restart(t, 7)
	waitConnected(t, m, true)
	noReset(t, m)
}

func TestMonitorNeverConnectsWithoutHandshake(t *testing.T) {
	// A listener that accepts connections but never answers: every attempt times out in the
	// handshake and the monitor stays disconnected.
	path := filepath.Join(t.TempDir(), "wedged.mgmt")
	l, err := net.Listen("unix", path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	m := NewMonitor("unix:"+path, MonitorOptions{DialTimeout: 50 * time.Millisecond, MinBackoff: time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	// Several attempts fail; the monitor never claims a connection.
	for i := 0; i < 3; i++ {
		c, err := l.Accept()
		require.NoError(t, err)
		_ = c.Close()
	}
	up, _ := m.Connected()
	require.False(t, up)
	cancel()
	<-done
}

func TestMonitorKeepaliveDetectsWedgedSwitch(t *testing.T) {
	b := startBridge(t, 3)
	m := NewMonitor(b.addr(), MonitorOptions{Conn: Options{EchoInterval: 10 * time.Millisecond, EchoTimeout: 20 * time.Millisecond}})
	runMonitor(t, m)
	waitConnected(t, m, true)
	// The switch stops answering echoes: the connection is declared lost, and the next one
	// (after the switch recovers) is a reset.
	b.silent.Store(true)
	waitConnected(t, m, false)
	b.silent.Store(false)
	r := waitReset(t, m)
	require.False(t, r.DatapathChanged())
	waitConnected(t, m, true)
}

func TestMonitorRunReturnsWhenContextEnds(t *testing.T) {
	b := startBridge(t, 1)
	m := NewMonitor(b.addr(), MonitorOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	waitConnected(t, m, true)
	cancel()
	<-done
	up, _ := m.Connected()
	require.False(t, up)
	noReset(t, m)
}

func TestMonitorOptionsDefaults(t *testing.T) {
	o := MonitorOptions{}.Defaults()
	require.Equal(t, 100*time.Millisecond, o.MinBackoff)
	require.Equal(t, time.Second, o.MaxBackoff)
	require.Equal(t, 5*time.Second, o.DialTimeout)
	o = MonitorOptions{MinBackoff: 2 * time.Second}.Defaults()
	require.Equal(t, 2*time.Second, o.MaxBackoff)
}

func TestMonitorConnDialsOnDemandAndQuietClosesAreNoReset(t *testing.T) {
	b := startBridge(t, 9)
	m := NewMonitor(b.addr(), MonitorOptions{})
	t.Cleanup(m.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := m.Conn(ctx)
	require.NoError(t, err, "Conn dials without Run")
	again, err := m.Conn(ctx)
	require.NoError(t, err)
	require.Same(t, c, again, "the live connection is reused")
	require.Equal(t, uint64(9), m.DatapathID())

	// The user gave up on the connection (a cancelled request): the switch lost nothing.
	m.CloseQuietly(c, context.Canceled)
	up, _ := m.Connected()
	require.False(t, up)
	c, err = m.Conn(ctx)
	require.NoError(t, err)
	noReset(t, m)

	// The switch dropped it: the next connection is a reset.
	b.dropConns()
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the dropped connection did not end")
	}
	_, err = m.Conn(ctx)
	require.NoError(t, err)
	r := waitReset(t, m)
	require.Equal(t, 1, r.Count)
}
