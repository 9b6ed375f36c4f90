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

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/ofctl"
	"github.com/antrea-proxy/antrea-proxy/test/ovssandbox"
)

// fakeTableStats is what the fake switch reports for table t: table 3 holds 110,030 flows.
func fakeTableStats(t int) openflow.TableStats {
	st := openflow.TableStats{Table: uint8(t), Active: uint64(t % 5), Lookups: uint64(t) << 33, Matches: uint64(t) * 7}
	if t == 3 {
		st.Active = 110030
	}
	return st
}

// fakeTableStatsReply is a table stats reply of 254 tables in two messages, the first flagged
// OFPMPF_REPLY_MORE.
func fakeTableStatsReply(xid uint32, head []byte) []byte {
	part := func(from, to int, more bool) []byte {
		body := append([]byte(nil), head...)
		if more {
			binary.BigEndian.PutUint16(body[2:], multipartMore)
		}
		for t := from; t < to; t++ {
			st := fakeTableStats(t)
			e := make([]byte, tableStatsLen)
			e[0] = st.Table
			binary.BigEndian.PutUint32(e[4:], uint32(st.Active))
			binary.BigEndian.PutUint64(e[8:], st.Lookups)
			binary.BigEndian.PutUint64(e[16:], st.Matches)
			body = append(body, e...)
		}
		return fakeMsg(typeMultipartReply, xid, body)
	}
	return append(part(0, 100, true), part(100, 254, false)...)
}

// TestTableStatsRequestMatchesOvsOfctl requires the request to be byte-for-byte what
// `ovs-ofctl -O OpenFlow15 dump-tables` sends, and the decoded reply to be what ovs-ofctl
// prints for the same reply (parsed by the ofctl backend's parser).
func TestTableStatsRequestMatchesOvsOfctl(t *testing.T) {
	s := startFakeSwitch(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ovs-ofctl", "-O", "OpenFlow15", "dump-tables", s.target()).CombinedOutput()
	require.NoError(t, err, "%s", out)
	var want []byte
	for _, m := range s.messages() {
		if m[1] == typeMultipartRequest {
			want = m
		}
	}
	require.NotNil(t, want, "ovs-ofctl sent no multipart request")
	got := encodeTableStatsRequest(binary.BigEndian.Uint32(want[4:]))
	require.True(t, bytes.Equal(got, want), "request differs from ovs-ofctl\nwant:\n%sgot:\n%s", hex.Dump(want), hex.Dump(got))

	fromOfctl, err := openflow.ParseTableStatsReply(string(out))
	require.NoError(t, err)
	b := New(s.target(), nil)
	defer b.Close()
	native, err := b.TableStats(ctx)
	require.NoError(t, err)
	require.Equal(t, fromOfctl, native)
	require.Len(t, native, 254)
	require.Equal(t, fakeTableStats(3), native[3])
	require.Equal(t, map[uint8]int{3: 110030}, pick(openflow.FlowsPerTable(native), 3))
}

func pick(m map[uint8]int, tables ...uint8) map[uint8]int {
	out := map[uint8]int{}
	for _, t := range tables {
		out[t] = m[t]
	}
	return out
}

func TestDecodeTableStatsReplyErrors(t *testing.T) {
	good := fakeMsg(typeMultipartReply, 1, append([]byte{0, 3, 0, 0, 0, 0, 0, 0}, make([]byte, tableStatsLen)...))
	_, more, err := decodeTableStatsReply(good, nil)
	require.NoError(t, err)
	require.False(t, more)
	for name, msg := range map[string][]byte{
		"short":        fakeMsg(typeMultipartReply, 1, []byte{0, 3}),
		"other type":   fakeMsg(typeMultipartReply, 1, []byte{0, 1, 0, 0, 0, 0, 0, 0}),
		"not a reply":  fakeMsg(typeBarrierReply, 1, make([]byte, 8)),
		"partial body": fakeMsg(typeMultipartReply, 1, append([]byte{0, 3, 0, 0, 0, 0, 0, 0}, make([]byte, 10)...)),
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := decodeTableStatsReply(msg, nil)
			require.Error(t, err)
		})
	}
}

// TestTableStatsTimeout: a switch that does not answer makes TableStats fail within ctx.
func TestTableStatsTimeout(t *testing.T) {
	s := startFakeSwitch(t)
	s.setHang(true)
	b := New(s.target(), nil)
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := b.TableStats(ctx)
	require.Error(t, err)
}

// TestIntegrationTableStats: on a real ovs-vswitchd, the native table stats equal ovs-ofctl's
// and count the flows of each table, including after a flow is deleted behind the agent's back.
func TestIntegrationTableStats(t *testing.T) {
	ovssandbox.Require(t)
	o := startOVS(t)
	br := addBridge(t, o)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var ops []openflow.Op
	for i := 0; i < 300; i++ {
		f := openflow.Flow{Table: uint8(10 + i%3), Priority: 100, Cookie: uint64(i),
			Match: openflow.Match{EthType: openflow.EthTypeIP, InPort: uint32(i + 1)}, Actions: []openflow.Action{openflow.Drop{}}}
		ops = append(ops, openflow.Op{Kind: openflow.AddFlow, Flow: &f})
	}
	nb := New(o.MgmtSocket(br), ofctl.New(o.MgmtSocket(br)))
	defer nb.Close()
	require.NoError(t, nb.Apply(ctx, ops))
	check := func(want map[uint8]int) {
		t.Helper()
		got, err := nb.TableStats(ctx)
		require.NoError(t, err)
		require.Equal(t, want, openflow.FlowsPerTable(got))
		viaOfctl, err := ofctl.New(o.MgmtSocket(br)).TableStats(ctx)
		require.NoError(t, err)
		require.Equal(t, openflow.FlowsPerTable(viaOfctl), openflow.FlowsPerTable(got))
	}
	check(map[uint8]int{10: 100, 11: 100, 12: 100})
	_, err := o.Ofctl("del-flows", br, "table=11,in_port=2")
	require.NoError(t, err)
	check(map[uint8]int{10: 100, 11: 99, 12: 100})
}
