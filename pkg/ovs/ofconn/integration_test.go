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

// TestIntegrationMgmtSocketGetsPacketIns shows, against a real ovs-vswitchd, that a connection
// to the bridge's management socket is a working controller: a packet-out re-injected into
// the pipeline (output:TABLE, as if from LOCAL) hits a flow with a controller action, and the
// connection receives its packet-in with the flow's cookie, table, in_port, registers and the
// whole frame (max_len does not truncate unbuffered packets). It also exercises echo and
// barrier.
func TestIntegrationMgmtSocketGetsPacketIns(t *testing.T) {
	o := ovssandbox.Start(t, ovssandbox.Options{})
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	br := "brof" + hex.EncodeToString(suffix)
	if out, err := o.Vsctl("add-br", br, "--", "set", "Bridge", br, "datapath_type=netdev",
		"protocols=OpenFlow10,OpenFlow13,OpenFlow15"); err != nil {
		t.Fatalf("add-br: %v: %s", err, out)
	}
	require.NoError(t, o.WaitForBridge(br))
	flows := []string{
		"table=0,priority=100,in_port=LOCAL,udp,actions=load:0x5->NXM_NX_REG3[],goto_table:7",
		"table=7,cookie=0x2a00000000000007,priority=10,udp,actions=controller(max_len=64)",
	}
	for _, f := range flows {
		out, err := o.Ofctl("add-flow", br, f)
		require.NoError(t, err, out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := ofconn.Dial(ctx, o.MgmtSocket(br), ofconn.Options{EchoInterval: 100 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NotZero(t, c.Features().DatapathID, "features reply carries the datapath ID")

	frame := udpFrame(200)
	require.NoError(t, c.SendPacketOut(ofconn.PacketOut{InPort: ofconn.PortLocal, Outputs: []uint32{ofconn.PortTable}, Data: frame}))
	require.NoError(t, c.Barrier(ctx))
	select {
	case pi := <-c.PacketIns():
		t.Logf("packet-in fields: %+v", pi.Fields)
		require.Equal(t, ofconn.ReasonAction, pi.Reason)
		require.Equal(t, uint8(7), pi.TableID)
		require.Equal(t, uint64(0x2a00000000000007), pi.Cookie)
		require.Equal(t, ofconn.PortLocal, pi.InPort)
		reg3, ok := pi.Reg(3)
		require.True(t, ok, "reg3 is reported: %+v", pi.Fields)
		require.Equal(t, uint32(5), reg3)
		require.Equal(t, uint16(len(frame)), pi.TotalLen)
		// Open vSwitch never buffers packets, and then it sends the whole packet whatever
		// the action's max_len says.
		require.Equal(t, frame, pi.Data)
		require.False(t, pi.Truncated())
	case <-time.After(5 * time.Second):
		t.Fatalf("no packet-in within 5s on the management socket; flows:\n%s", dumpFlows(o, br))
	}
	// The keepalive's echoes are answered several times over without the connection dying.
	for c.Stats().Keepalives < 3 {
		select {
		case <-c.Done():
			t.Fatalf("the connection ended after %d answered keepalives: %v", c.Stats().Keepalives, c.Err())
		case <-ctx.Done():
			t.Fatalf("%d answered keepalives within 30 s, want 3", c.Stats().Keepalives)
		case <-time.After(20 * time.Millisecond): // polling the counter
		}
	}
	require.NoError(t, c.Echo(ctx))
	require.NoError(t, c.Err())
}

func dumpFlows(o *ovssandbox.Instance, br string) string {
	out, err := o.Ofctl("dump-flows", br)
	if err != nil {
		return err.Error()
	}
	return out
}

// udpFrame is an Ethernet/IPv4/UDP frame with payloadLen payload bytes (checksums zero; OVS
// does not check them).
func udpFrame(payloadLen int) []byte {
	ipLen := 20 + 8 + payloadLen
	f := []byte{
		0xaa, 0xbb, 0xcc, 0, 0, 1, 0xaa, 0xbb, 0xcc, 0, 0, 2, 0x08, 0x00,
		0x45, 0, byte(ipLen >> 8), byte(ipLen), 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
		0x30, 0x39, 0, 53, byte((8 + payloadLen) >> 8), byte(8 + payloadLen), 0, 0,
	}
	for i := 0; i < payloadLen; i++ {
		f = append(f, byte(i))
	}
	return f
}
