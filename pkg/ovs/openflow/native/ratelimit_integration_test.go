package native

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/ofconn"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/ofctl"
	"github.com/antrea-proxy/antrea-proxy/test/ovssandbox"
)

// udpFrame is an Ethernet/IPv4/UDP frame from src to 10.96.0.1:dport (checksums left zero:
// OVS matches without checking them).
func udpFrame(src netip.Addr, dport uint16) []byte {
	f := make([]byte, 14+20+8)
	copy(f[0:6], []byte{0xaa, 0xbb, 0xcc, 0, 0, 1})
	copy(f[6:12], []byte{0x0a, 0x58, 0, 0, 0, 2})
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:]
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(ip[2:], 28)
	s := src.As4()
	copy(ip[12:16], s[:])
	copy(ip[16:20], []byte{10, 96, 0, 1})
	binary.BigEndian.PutUint16(ip[20:], 40000)
	binary.BigEndian.PutUint16(ip[22:], dport)
	binary.BigEndian.PutUint16(ip[24:], 8)
	return f
}

// sendThroughPipeline injects frames into table 0 with packet-outs on c.
func sendThroughPipeline(t *testing.T, c *ofconn.Conn, frames ...[]byte) {
	t.Helper()
	for _, f := range frames {
		require.NoError(t, c.SendPacketOut(ofconn.PacketOut{InPort: ofconn.PortLocal, Outputs: []uint32{ofconn.PortTable}, Data: f}))
	}
}

// bothBackends starts OVS with a bridge and returns both backends on it.
func bothBackends(t *testing.T) (*ovssandbox.Instance, string, *ofctl.Bridge, *Bridge) {
	t.Helper()
	o := startOVS(t)
	br := addBridge(t, o)
	oc := ofctl.New(o.MgmtSocket(br))
	nb := New(o.MgmtSocket(br), oc)
	t.Cleanup(nb.Close)
	return o, br, oc, nb
}

// TestIntegrationMetersOnRealOVS programs meters through both backends on a userspace
// bridge: add, then modify the same ID, read the statistics. A flood through a flow whose
// first action is the meter reaches the controller at the meter's rate: every packet sent is
// either a packet-in or a meter drop, and most are drops. A flow using a meter that does not
// exist is refused.
func TestIntegrationMetersOnRealOVS(t *testing.T) {
	o, br, oc, nb := bothBackends(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for id, m := range map[uint32]openflow.Meters{1: nb, 2: oc} {
		require.NoError(t, m.SetMeter(ctx, openflow.Meter{ID: id, Rate: 1000, Burst: 100}), "add meter %d", id)
		require.NoError(t, m.SetMeter(ctx, openflow.Meter{ID: id, Rate: 10, Burst: 10}), "modify meter %d", id)
		st, err := m.MeterStats(ctx, id)
		require.NoError(t, err)
		require.Equal(t, openflow.MeterStats{ID: id}, st)
	}
	out, err := o.Ofctl("dump-meters", br)
	require.NoError(t, err)
	require.Contains(t, out, "meter=1 pktps burst stats bands=\ntype=drop rate=10 burst_size=10", out)

	require.NoError(t, nb.Apply(ctx, []openflow.Op{{Kind: openflow.AddFlow, Flow: &openflow.Flow{Priority: 10,
		Match:   openflow.Match{EthType: openflow.EthTypeIP, IPProto: openflow.ProtoUDP, TpDst: 1},
		Actions: []openflow.Action{openflow.MeterAction{ID: 1}, openflow.Controller{MaxLen: 128}}}}}))
	err = nb.Apply(ctx, []openflow.Op{{Kind: openflow.AddFlow, Flow: &openflow.Flow{Priority: 11,
		Match:   openflow.Match{EthType: openflow.EthTypeIP, IPProto: openflow.ProtoUDP, TpDst: 9},
		Actions: []openflow.Action{openflow.MeterAction{ID: 9}, openflow.Controller{MaxLen: 128}}}}})
	require.ErrorContains(t, err, "OFPMMFC_INVALID_METER", "the switch refuses a flow whose meter does not exist: meters go first")

	c, err := ofconn.Dial(ctx, o.MgmtSocket(br), ofconn.Options{PacketInQueue: 1024})
	require.NoError(t, err)
	defer c.Close()
	const sent = 300
	frames := make([][]byte, sent)
	for i := range frames {
		frames[i] = udpFrame(netip.AddrFrom4([4]byte{10, 10, 0, byte(i)}), 1)
	}
	start := time.Now()
	sendThroughPipeline(t, c, frames...)
	var packetIns int
	var st openflow.MeterStats
	deadline := time.Now().Add(20 * time.Second)
	for {
		drain := true
		for drain {
			select {
			case <-c.PacketIns():
				packetIns++
			default:
				drain = false
			}
		}
		st, err = nb.MeterStats(ctx, 1)
		require.NoError(t, err)
		if st.Packets == sent && uint64(packetIns)+st.Dropped == sent {
			break
		}
		require.True(t, time.Now().Before(deadline), "meter saw %d packets, dropped %d; %d packet-ins", st.Packets, st.Dropped, packetIns)
		select {
		case <-c.PacketIns():
			packetIns++
		case <-time.After(50 * time.Millisecond):
		}
	}
	elapsed := time.Since(start)
	t.Logf("%d packets sent in %v: %d packet-ins, %d dropped by the meter (rate 10/s, burst 10)", sent, elapsed, packetIns, st.Dropped)
	require.Equal(t, uint32(1), st.Flows)
	require.LessOrEqual(t, packetIns, 20+int(10*elapsed.Seconds())+5, "the meter bounds packet-ins to its rate and burst")
	require.Greater(t, packetIns, 0)
	ofctlStats, err := oc.MeterStats(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, st.Dropped, ofctlStats.Dropped, "both backends read the same counters")
}

// TestIntegrationMeterInGroupBucketIsNotApplied pins why the reject meters are flows: Open
// vSwitch 3.1 accepts a meter action in a group bucket but does not apply it (the packets reach
// the controller unmetered, and the meter counts none of them).
func TestIntegrationMeterInGroupBucketIsNotApplied(t *testing.T) {
	o, br, _, nb := bothBackends(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, nb.SetMeter(ctx, openflow.Meter{ID: 1, Rate: 1, Burst: 1}))
	g := openflow.Group{ID: 5, Type: openflow.GroupTypeSelect, HashFields: []string{"ip_src"}, Buckets: []openflow.Bucket{
		{ID: 0, Weight: 100, Actions: []openflow.Action{openflow.MeterAction{ID: 1}, openflow.Controller{MaxLen: 128}}}}}
	require.NoError(t, nb.Apply(ctx, []openflow.Op{{Kind: openflow.AddGroup, Group: &g}, {Kind: openflow.AddFlow, Flow: &openflow.Flow{Priority: 10,
		Match: openflow.Match{EthType: openflow.EthTypeIP, IPProto: openflow.ProtoUDP, TpDst: 1}, Actions: []openflow.Action{openflow.GroupAction{ID: 5}}}}}))
	c, err := ofconn.Dial(ctx, o.MgmtSocket(br), ofconn.Options{PacketInQueue: 1024})
	require.NoError(t, err)
	defer c.Close()
	const sent = 50
	for i := range sent {
		sendThroughPipeline(t, c, udpFrame(netip.AddrFrom4([4]byte{10, 10, 0, byte(i)}), 1))
	}
	got := 0
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	for got < sent {
		select {
		case <-c.PacketIns():
			got++
		case <-deadline.C:
			t.Fatalf("%d of %d packets reached the controller", got, sent)
		}
	}
	st, err := nb.MeterStats(ctx, 1)
	require.NoError(t, err)
	require.Zero(t, st.Packets, "the meter in the bucket saw no packet")
}

// learnFlow is a flow for UDP port dport whose learn action learns the source address into
// table 3 with cookie, at most limit flows, writing its result to reg0[17].
func learnFlow(dport uint16, cookie uint64, limit uint32) openflow.Flow {
	return openflow.Flow{Priority: 10, Match: openflow.Match{EthType: openflow.EthTypeIP, IPProto: openflow.ProtoUDP, TpDst: dport},
		Actions: []openflow.Action{openflow.Learn{Table: 3, IdleTimeout: 600, Cookie: cookie, Limit: limit,
			ResultDst: openflow.Subfield{Field: "NXM_NX_REG0", Start: 17, End: 17}, EthType: openflow.EthTypeIP,
			Specs: []openflow.LearnSpec{{Kind: openflow.LearnMatch, Dst: openflow.Subfield{Field: "NXM_OF_IP_SRC", Whole: true}}}}}}
}

// TestIntegrationLearnLimitOnRealOVS pins what Open vSwitch's learn limit counts, on a
// userspace bridge, with ofproto/trace -generate (which learns as a datapath upcall does):
// the flows of the learned flow's table with the learned flow's cookie. With limit=5, 20
// sources learn 5 flows and the other 15 learns fail with result_dst 0; a source already
// learned still refreshes its flow (result_dst 1). A learn with another cookie has its own 5:
// the limit cannot bound a table in total. The table's OVSDB flow_limit with
// overflow_policy=refuse does, for learned flows too.
func TestIntegrationLearnLimitOnRealOVS(t *testing.T) {
	o, br, oc, nb := bothBackends(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, b := learnFlow(2, 0xa, 5), learnFlow(3, 0xb, 5)
	require.NoError(t, nb.Apply(ctx, []openflow.Op{{Kind: openflow.AddFlow, Flow: &a}, {Kind: openflow.AddFlow, Flow: &b}}))

	count := func(cookie uint64) int {
		n, err := oc.CountFlows(ctx, openflow.FlowFilter{Table: 3, TableSet: true, Cookie: cookie, CookieMask: ^uint64(0)})
		require.NoError(t, err)
		return n
	}
	// learn sends one packet from 10.20.0.i to UDP port dport and reports the learn's result.
	learn := func(dport uint16, i int) bool {
		out, err := o.Appctl("ofproto/trace", br, fmt.Sprintf(
			"in_port=LOCAL,dl_type=0x0800,nw_proto=17,nw_src=10.20.%d.%d,nw_dst=10.96.0.1,udp_dst=%d", i>>8, i&0xff, dport), "-generate")
		require.NoError(t, err, out)
		ok, failed := strings.Contains(out, "NXM_NX_REG0[17] is now 0x1"), strings.Contains(out, "NXM_NX_REG0[17] is now 0\n")
		require.True(t, ok != failed, "one result bit in:\n%s", out)
		return ok
	}
	results := func(dport uint16, first, n int) (learned, refused int) {
		for i := first; i < first+n; i++ {
			if learn(dport, i) {
				learned++
			} else {
				refused++
			}
		}
		return learned, refused
	}

	learned, refused := results(2, 0, 20)
	require.Equal(t, 5, learned)
	require.Equal(t, 15, refused, "result_dst is 0 for each refused learn")
	require.Equal(t, 5, count(0xa), "limit=5 learns 5 flows with its cookie")
	require.True(t, learn(2, 0), "a learned source refreshes its flow: not refused")
	learned, _ = results(3, 100, 20)
	require.Equal(t, 5, learned, "another cookie has a limit of its own")
	require.Equal(t, 10, count(0xa)+count(0xb))

	// A total bound: the table's flow limit, which learned flows meet too.
	_, err := o.Vsctl("--", "--id=@ft", "create", "Flow_Table", "flow_limit=12", "overflow_policy=refuse",
		"--", "set", "Bridge", br, "flow_tables:3=@ft")
	require.NoError(t, err)
	c := learnFlow(4, 0xc, 5)
	require.NoError(t, nb.Apply(ctx, []openflow.Op{{Kind: openflow.AddFlow, Flow: &c}}))
	learned, refused = results(4, 200, 20)
	require.Equal(t, 2, count(0xc), "the table's flow_limit of 12 leaves 2 to a third cookie")
	t.Logf("with the table full: %d learns reported success, %d failure (result_dst)", learned, refused)
}
