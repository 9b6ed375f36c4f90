package native

import (
	"context"
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

func testGroup(id uint32, buckets int) *openflow.Group {
	g := &openflow.Group{ID: id, Type: openflow.GroupTypeSelect, HashFields: []string{"ip_src", "ip_dst", "tcp_src", "tcp_dst"}}
	for i := 0; i < buckets; i++ {
		g.Buckets = append(g.Buckets, openflow.Bucket{ID: uint32(i), Weight: 100, Actions: []openflow.Action{
			openflow.SetReg{Reg: 3, Value: 0x0a000000 | uint32(i)},
			openflow.SetReg{Reg: 4, Value: 0x11f90, Mask: 0x1ffff},
			openflow.Resubmit{Table: 15},
		}})
	}
	return g
}

func testFlow(i int) *openflow.Flow {
	return &openflow.Flow{Table: 14, Priority: 200, Cookie: 0x1000,
		Match: openflow.Match{EthType: openflow.EthTypeIP, IPProto: openflow.ProtoTCP,
			Dst: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}), 32), TpDst: 80},
		Actions: []openflow.Action{openflow.GroupAction{ID: uint32(i)}}}
}

func testOps() []openflow.Op {
	return []openflow.Op{
		{Kind: openflow.AddGroup, Group: testGroup(1, 2)},
		{Kind: openflow.AddFlow, Flow: testFlow(1)},
		{Kind: openflow.AddGroup, Group: testGroup(7, 1)},
		{Kind: openflow.AddFlow, Flow: testFlow(7)},
	}
}

// innerTypes lists the message types of the inner messages of the bundle adds of msgs, and the
// control types of the bundle controls, e.g. "open add add barrier commit".
func sequence(msgs [][]byte) string {
	var p []string
	for _, m := range msgs {
		switch m[1] {
		case typeBundleControl:
			p = append(p, map[uint16]string{0: "open", 4: "commit", 6: "discard"}[binary.BigEndian.Uint16(m[12:])])
		case typeBundleAdd:
			p = append(p, "add")
		case typeBarrierRequest:
			p = append(p, "barrier")
		}
	}
	return strings.Join(p, " ")
}

func TestApplyCommitsOneAtomicOrderedBundle(t *testing.T) {
	s := startFakeSwitch(t)
	b := New(s.target(), nil)
	defer b.Close()
	ops := testOps()
	require.NoError(t, b.Apply(context.Background(), ops))
	msgs := s.messages()
	require.Equal(t, "open add add add add barrier commit", sequence(msgs))
	var openID uint32
	for _, m := range msgs {
		if m[1] == typeBundleControl || m[1] == typeBundleAdd {
			require.Equal(t, bundleAtomic|bundleOrdered, binary.BigEndian.Uint16(m[14:]), "bundle flags")
			if m[1] == typeBundleControl && openID == 0 {
				openID = binary.BigEndian.Uint32(m[8:])
			}
			require.Equal(t, openID, binary.BigEndian.Uint32(m[8:]), "bundle id")
		}
		if m[1] == typeBundleAdd {
			require.Equal(t, m[4:8], m[20:24], "inner xid equals the bundle add's")
		}
	}
	got := s.committedMessages()
	require.Len(t, got, len(ops))
	for i := range ops {
		e := newBundleEncoder(0, 3, 1)
		require.NoError(t, e.op(i, &ops[i]))
		require.Equal(t, normalize(e.w.b)[16:], normalize(append(make([]byte, 16), got[i]...))[16:], "op %d", i)
	}
	// A second Apply reuses the connection with a new bundle id.
	s.reset()
	require.NoError(t, b.Apply(context.Background(), ops[:1]))
	msgs = s.messages()
	require.Equal(t, "open add barrier commit", sequence(msgs))
	require.NotEqual(t, openID, binary.BigEndian.Uint32(msgs[0][8:]))
	require.Empty(t, hellos(msgs), "no new connection")
}

func hellos(msgs [][]byte) [][]byte {
	var h [][]byte
	for _, m := range msgs {
		if m[1] == typeHello {
			h = append(h, m)
		}
	}
	return h
}

func isGroup(id uint32) func([]byte) *ofError {
	return func(inner []byte) *ofError {
		if inner[1] == typeGroupMod && binary.BigEndian.Uint32(inner[12:]) == id {
			return &ofError{typ: 6, code: 0}
		}
		return nil
	}
}

func TestApplyRefusedAtAddNamesTheOpAndDiscards(t *testing.T) {
	s := startFakeSwitch(t)
	s.setReject(isGroup(7))
	b := New(s.target(), nil)
	defer b.Close()
	err := b.Apply(context.Background(), testOps())
	var rej *RejectedOpError
	require.ErrorAs(t, err, &rej)
	require.Equal(t, 2, rej.Index)
	require.Equal(t, openflow.AddGroup, rej.Kind)
	require.Equal(t, "OFPGMFC_GROUP_EXISTS", rej.Reason)
	idx, ok := openflow.RejectedOpIndex(err)
	require.True(t, ok)
	require.Equal(t, 2, idx)
	require.Equal(t, "open add add add add barrier discard", sequence(s.messages()))
	require.Empty(t, s.committedMessages())
	// The connection survives a refusal.
	s.setReject(nil)
	s.reset()
	require.NoError(t, b.Apply(context.Background(), testOps()))
	require.Empty(t, hellos(s.messages()))
}

func TestApplyRefusedAtCommitNamesTheOp(t *testing.T) {
	s := startFakeSwitch(t)
	s.setRejectAtCommit(isGroup(1))
	b := New(s.target(), nil)
	defer b.Close()
	err := b.Apply(context.Background(), testOps())
	idx, ok := openflow.RejectedOpIndex(err)
	require.True(t, ok, "error %v names no op", err)
	require.Equal(t, 0, idx)
	require.Contains(t, err.Error(), "OFPGMFC_GROUP_EXISTS")
	require.Empty(t, s.committedMessages())
}

func TestApplySplitsLargeGroupsAndNamesTheContinuation(t *testing.T) {
	s := startFakeSwitch(t)
	b := New(s.target(), nil)
	defer b.Close()
	g := testGroup(5, 3000) // 64 bytes a bucket: about 190 KB
	ops := []openflow.Op{{Kind: openflow.AddFlow, Flow: testFlow(5)}, {Kind: openflow.AddGroup, Group: g}}
	require.NoError(t, b.Apply(context.Background(), ops))
	committed := s.committedMessages()
	require.Greater(t, len(committed), 3)
	total := 0
	for i, m := range committed[1:] {
		require.LessOrEqual(t, len(m)+bundleAddHeaderLen, maxMessageLen)
		cmd := binary.BigEndian.Uint16(m[8:])
		if i == 0 {
			require.Equal(t, groupAdd, cmd)
		} else {
			require.Equal(t, groupInsertBucket, cmd)
			require.Equal(t, bucketLast, binary.BigEndian.Uint32(m[20:]))
		}
		total += bucketCount(t, append(make([]byte, bundleAddHeaderLen), m...))
	}
	require.Equal(t, 3000, total)

	// A refused continuation names the group op and its part.
	s.setReject(func(inner []byte) *ofError {
		if inner[1] == typeGroupMod && binary.BigEndian.Uint16(inner[8:]) == groupInsertBucket {
			return &ofError{typ: 6, code: 4}
		}
		return nil
	})
	err := b.Apply(context.Background(), ops)
	var rej *RejectedOpError
	require.ErrorAs(t, err, &rej)
	require.Equal(t, 1, rej.Index)
	require.Equal(t, 1, rej.Part)
	require.Equal(t, "OFPGMFC_OUT_OF_BUCKETS", rej.Reason)
}

func TestApplyTimesOutOnAWedgedSwitchAndReconnects(t *testing.T) {
	s := startFakeSwitch(t)
	b := New(s.target(), nil)
	defer b.Close()
	require.NoError(t, b.Apply(context.Background(), testOps()))
	s.setHang(true)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	err := b.Apply(ctx, testOps())
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	up, _ := b.Connected()
	require.False(t, up, "the connection of an interrupted bundle is closed")
	s.setHang(false)
	s.reset()
	require.NoError(t, b.Apply(context.Background(), testOps()))
	require.Len(t, hellos(s.messages()), 1, "a new connection")
	_, reset := b.LastReset()
	require.False(t, reset, "a connection closed because the caller gave up is no reset")

	// A connection that ends while the switch does not answer within the Apply's own
	// deadline counts as lost: the next one is a reset.
	w := New(s.target(), nil, WithApplyTimeout(100*time.Millisecond, time.Nanosecond))
	defer w.Close()
	require.NoError(t, w.Apply(context.Background(), testOps()))
	s.setHang(true)
	require.ErrorIs(t, w.Apply(context.Background(), testOps()), context.DeadlineExceeded)
	s.setHang(false)
	require.NoError(t, w.Apply(context.Background(), testOps()))
	r, reset := w.LastReset()
	require.True(t, reset)
	require.Equal(t, 1, r.Count)
}

func TestRunReportsAResetAfterALoss(t *testing.T) {
	s := startFakeSwitch(t)
	b := New(s.target(), nil, WithKeepalive(50*time.Millisecond, 50*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { b.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	waitFor(t, func() bool { up, _ := b.Connected(); return up })
	select {
	case <-b.Resets():
		t.Fatal("a reset on the first connection")
	default:
	}
	s.dropConns()
	select {
	case <-b.Resets():
	case <-time.After(10 * time.Second):
		t.Fatal("no reset after the connection was lost")
	}
	r, ok := b.LastReset()
	require.True(t, ok)
	require.Equal(t, 1, r.Count)
	require.Equal(t, uint64(0xabcdef), r.DatapathID)
	require.False(t, r.DatapathID != r.PreviousDatapathID)
	require.NoError(t, b.Apply(context.Background(), testOps()))
}

func TestKeepaliveEndsAConnectionToAWedgedSwitch(t *testing.T) {
	s := startFakeSwitch(t)
	b := New(s.target(), nil, WithKeepalive(20*time.Millisecond, 50*time.Millisecond))
	defer b.Close()
	require.NoError(t, b.Apply(context.Background(), testOps()))
	s.setHang(true)
	waitFor(t, func() bool { up, _ := b.Connected(); return !up })
}

func TestApplyRefusesInvalidOpsBeforeSending(t *testing.T) {
	s := startFakeSwitch(t)
	b := New(s.target(), nil)
	defer b.Close()
	err := b.Apply(context.Background(), []openflow.Op{{Kind: openflow.AddFlow}})
	require.Error(t, err)
	require.Empty(t, s.messages())
	bad := testFlow(1)
	bad.Actions = []openflow.Action{openflow.GotoTable{Table: 3}, openflow.Normal{}}
	err = b.Apply(context.Background(), []openflow.Op{{Kind: openflow.AddFlow, Flow: testFlow(2)}, {Kind: openflow.AddFlow, Flow: bad}})
	require.ErrorIs(t, err, errEncoding)
	require.Empty(t, s.committedMessages())
	require.NoError(t, b.Apply(context.Background(), testOps()), "the connection survives")
}

func TestDelegateServesDumpsAndCounts(t *testing.T) {
	b := New("unix:/nonexistent", nil)
	_, err := b.CountFlows(context.Background(), openflow.FlowFilter{})
	require.Error(t, err)
	d := &countingDelegate{n: 42}
	b = New("unix:/nonexistent", d)
	n, err := b.CountFlows(context.Background(), openflow.FlowFilter{})
	require.NoError(t, err)
	require.Equal(t, 42, n)
	_, err = b.DumpFlows(context.Background(), openflow.FlowFilter{})
	require.NoError(t, err)
	st, err := b.AggregateStats(context.Background(), openflow.FlowFilter{})
	require.NoError(t, err)
	require.Equal(t, uint64(42), st.FlowCount)
	require.Equal(t, 3, d.calls)
}

type countingDelegate struct{ n, calls int }

func (d *countingDelegate) DumpFlows(context.Context, openflow.FlowFilter) ([]openflow.Flow, error) {
	d.calls++
	return nil, nil
}
func (d *countingDelegate) CountFlows(context.Context, openflow.FlowFilter) (int, error) {
	d.calls++
	return d.n, nil
}
func (d *countingDelegate) AggregateStats(context.Context, openflow.FlowFilter) (openflow.AggregateStats, error) {
	d.calls++
	return openflow.AggregateStats{FlowCount: uint64(d.n)}, nil
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
