package reject

import (
	"net"
	"testing"
	"time"

	"github.com/google/gopacket/layers"
	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/ofconn"
)

// synFrom is a SYN packet-in from client address src.
func synFrom(t *testing.T, src string) *ofconn.PacketIn {
	ip := ipv4(layers.IPProtocolTCP)
	ip.SrcIP = net.ParseIP(src).To4()
	data := frame(t, ip, syn(1))
	return &ofconn.PacketIn{Reason: ofconn.ReasonAction, TableID: 13, InPort: 3, TotalLen: uint16(len(data)), Data: data}
}

// TestOneSourceCannotStarveAnother: a client flooding connections to a Service without
// endpoints uses up its own share of refusals, not the others': a second client, arriving
// while the first floods, is still refused at once.
func TestOneSourceCannotStarveAnother(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	r := New(Config{Rate: 100, Burst: 50, SourceRate: 10, SourceBurst: 5, Now: clock.now})
	c := newFakeConn()
	replies := func(src string, n int) int {
		sent := 0
		for range n {
			if kind, _ := r.Handle(c, synFrom(t, src)); kind != KindNone {
				sent++
			}
		}
		return sent
	}
	require.Equal(t, 5, replies("10.10.0.10", 1000), "a flooding source gets its own burst only")
	require.Equal(t, 1, replies("10.10.0.11", 1), "another source is still refused while the first floods")
	clock.advance(100 * time.Millisecond)
	require.Equal(t, 1, replies("10.10.0.10", 1000), "the flooder gets one refusal per 1/SourceRate")
	require.Equal(t, 5, replies("10.10.0.12", 5), "a third source gets its whole burst")
	s := r.Stats()
	require.Equal(t, uint64(12), s.Replied)
	require.Equal(t, uint64(1994), s.SourceLimited)
	require.Zero(t, s.RateLimited)
}

// TestGlobalLimitStillBoundsManySources: many sources, each within its own share, together
// get no more than the global rate.
func TestGlobalLimitStillBoundsManySources(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	r := New(Config{Rate: 10, Burst: 20, SourceRate: 10, SourceBurst: 5, Now: clock.now})
	c := newFakeConn()
	sent := 0
	for i := range 200 {
		if kind, _ := r.Handle(c, synFrom(t, net.IPv4(10, 10, 1, byte(i)).String())); kind != KindNone {
			sent++
		}
	}
	require.Equal(t, 20, sent, "200 sources share the global burst")
	require.Equal(t, uint64(180), r.Stats().RateLimited)
}

// TestSourceBucketsAreBounded: the per-source state is a fixed table whatever the number of
// sources seen.
func TestSourceBucketsAreBounded(t *testing.T) {
	r := New(Config{Sources: 64})
	c := newFakeConn()
	for i := range 1000 {
		_, _ = r.Handle(c, synFrom(t, net.IPv4(10, 20, byte(i>>8), byte(i)).String()))
	}
	require.Len(t, r.limiter.sources, 64)
}
