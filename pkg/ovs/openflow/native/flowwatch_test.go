package native

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestFlowMonitorRequestMatchesOvsOfctl requires the request to be byte-for-byte what
// `ovs-ofctl -O OpenFlow15 monitor <bridge> 'watch:!initial,!own,!actions'` sends (ovs-ofctl
// keeps monitoring: it is stopped once the switch received the request).
func TestFlowMonitorRequestMatchesOvsOfctl(t *testing.T) {
	s := startFakeSwitch(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ovs-ofctl", "-O", "OpenFlow15", "monitor", s.target(), "watch:!initial,!own,!actions")
	require.NoError(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var want []byte
	require.Eventually(t, func() bool {
		for _, m := range s.messages() {
			if m[1] == typeMultipartRequest && binary.BigEndian.Uint16(m[8:]) == multipartFlowMonitor {
				want = m
			}
		}
		return want != nil
	}, 10*time.Second, 10*time.Millisecond, "ovs-ofctl sent no flow monitor request")
	got := encodeFlowMonitorRequest(binary.BigEndian.Uint32(want[4:]), binary.BigEndian.Uint32(want[16:]))
	require.True(t, bytes.Equal(got, want), "request differs from ovs-ofctl\nwant:\n%sgot:\n%s", hex.Dump(want), hex.Dump(got))
}

// flowUpdateMsg is a flow monitor reply (xid 0) holding updates.
func flowUpdateMsg(updates ...[]byte) []byte {
	body := []byte{0, byte(multipartFlowMonitor), 0, 0, 0, 0, 0, 0}
	for _, u := range updates {
		body = append(body, u...)
	}
	return fakeMsg(typeMultipartReply, 0, body)
}

// fullUpdate is a full update of event ev in table, with an empty match and no instructions.
func fullUpdate(ev FlowEvent, table uint8) []byte {
	u := make([]byte, flowUpdateFullLen+8)
	binary.BigEndian.PutUint16(u, uint16(len(u)))
	binary.BigEndian.PutUint16(u[2:], uint16(ev))
	u[4] = table
	binary.BigEndian.PutUint64(u[16:], 0xc00c1e)
	copy(u[flowUpdateFullLen:], []byte{0, 1, 0, 4, 0, 0, 0, 0})
	return u
}

func abbrevUpdate(xid uint32) []byte {
	u := []byte{0, 8, 0, byte(FlowAbbrev), 0, 0, 0, 0}
	binary.BigEndian.PutUint32(u[4:], xid)
	return u
}

func pausedUpdate(ev FlowEvent) []byte { return []byte{0, 8, 0, byte(ev), 0, 0, 0, 0} }

func TestDecodeFlowUpdates(t *testing.T) {
	var got []FlowUpdate
	msg := flowUpdateMsg(fullUpdate(FlowAdded, 3), abbrevUpdate(77), fullUpdate(FlowRemoved, 250),
		pausedUpdate(FlowPaused), pausedUpdate(FlowResumed), fullUpdate(FlowModified, 0))
	require.NoError(t, decodeFlowUpdates(msg, func(u FlowUpdate) { got = append(got, u) }))
	require.Equal(t, []FlowUpdate{{Event: FlowAdded, Table: 3}, {Event: FlowAbbrev, Xid: 77}, {Event: FlowRemoved, Table: 250},
		{Event: FlowPaused}, {Event: FlowResumed}, {Event: FlowModified}}, got)

	for name, bad := range map[string][]byte{
		"truncated update":   flowUpdateMsg(fullUpdate(FlowAdded, 3)[:20]),
		"zero-length update": flowUpdateMsg([]byte{0, 0, 0, 1}),
		"short abbrev":       flowUpdateMsg([]byte{0, 4, 0, byte(FlowAbbrev)}),
		"trailing bytes":     flowUpdateMsg(abbrevUpdate(1), []byte{0, 8}),
		"other multipart":    fakeMsg(typeMultipartReply, 0, []byte{0, 3, 0, 0, 0, 0, 0, 0}),
		"not multipart":      fakeMsg(typeBarrierReply, 0, make([]byte, 8)),
	} {
		require.Error(t, decodeFlowUpdates(bad, func(FlowUpdate) {}), name)
	}
}

// TestFlowWatchReportsForeignChangesOnly: on a fake switch, the watch adds its monitor on the
// Bridge's connection; an abbreviated update (the Bridge's own change) is counted but not
// reported, a full one and a malformed one are reported; a connection loss turns Watching off
// and the next connection adds the monitor again.
func TestFlowWatchReportsForeignChangesOnly(t *testing.T) {
	s := startFakeSwitch(t)
	w := runFlowWatch(t, s)

	waitChange(t, w, "watching turned on")
	require.True(t, w.Watching())
	require.Equal(t, 1, countFlowMonitorRequests(s))

	send := func(msg []byte) {
		t.Helper()
		s.mu.Lock()
		conn := s.conns[len(s.conns)-1]
		s.mu.Unlock()
		_, err := conn.Write(msg)
		require.NoError(t, err)
	}
	send(flowUpdateMsg(abbrevUpdate(5), abbrevUpdate(6)))
	require.Eventually(t, func() bool { return w.Stats().Own == 2 }, 10*time.Second, time.Millisecond)
	require.Empty(t, w.Changes(), "the Bridge's own changes are not reported")

	send(flowUpdateMsg(abbrevUpdate(7), fullUpdate(FlowRemoved, 4)))
	waitChange(t, w, "a flow removed by another writer")
	require.Equal(t, FlowWatchStats{Monitors: 1, Foreign: 1, Own: 3}, w.Stats())

	send(fakeMsg(typeMultipartReply, 0, []byte{0, byte(multipartTable), 0, 0, 0, 0, 0, 0})) // a late table stats reply
	send(flowUpdateMsg([]byte{0, 2}))
	waitChange(t, w, "a malformed update")
	require.Equal(t, uint64(1), w.Stats().Malformed)

	s.dropConns()
	require.Eventually(t, func() bool { return w.Stats().Monitors == 2 && w.Watching() }, 10*time.Second, time.Millisecond,
		"the monitor is added again on the next connection")
	require.Equal(t, 2, countFlowMonitorRequests(s))
}

// TestFlowWatchRefusedMonitor: while the switch refuses the monitor the watch is off (the
// healer then checks every second) and asks again with a backoff; once the switch accepts it,
// the watch is on.
func TestFlowWatchRefusedMonitor(t *testing.T) {
	s := startFakeSwitch(t)
	s.setRefuseMultipart(multipartFlowMonitor)
	w := runFlowWatch(t, s)
	require.Eventually(t, func() bool { return countFlowMonitorRequests(s) >= 2 }, 10*time.Second, time.Millisecond,
		"the refused monitor is asked for again")
	require.False(t, w.Watching())
	require.Zero(t, w.Stats().Monitors)
	s.setRefuseMultipart(0)
	waitChange(t, w, "watching turned on")
	require.True(t, w.Watching())
	require.Equal(t, uint64(1), w.Stats().Monitors)
}

func countFlowMonitorRequests(s *fakeSwitch) int {
	n := 0
	for _, m := range s.messages() {
		if m[1] == typeMultipartRequest && binary.BigEndian.Uint16(m[8:]) == multipartFlowMonitor {
			n++
		}
	}
	return n
}

// waitChange waits for w to report a change.
func waitChange(t *testing.T, w *FlowWatch, what string) {
	t.Helper()
	select {
	case <-w.Changes():
	case <-time.After(20 * time.Second):
		t.Fatalf("no change reported within 20 s: %s", what)
	}
}

// runFlowWatch runs a FlowWatch of a Bridge on s until the test ends.
func runFlowWatch(t *testing.T, s *fakeSwitch) *FlowWatch {
	b := New(s.target(), nil)
	w := b.NewFlowWatch()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; b.Close() })
	return w
}
