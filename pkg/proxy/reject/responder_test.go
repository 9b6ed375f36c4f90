package reject

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/gopacket/layers"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/ofconn"
)

// fakeConn records packet-outs and feeds packet-ins.
type fakeConn struct {
	in      chan *ofconn.PacketIn
	mu      sync.Mutex
	outs    []ofconn.PacketOut
	sendErr error
	closed  bool
}

func newFakeConn() *fakeConn { return &fakeConn{in: make(chan *ofconn.PacketIn, 16)} }

func (f *fakeConn) PacketIns() <-chan *ofconn.PacketIn { return f.in }
func (f *fakeConn) SendPacketOut(po ofconn.PacketOut) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sendErr != nil {
		return f.sendErr
	}
	f.outs = append(f.outs, po)
	return nil
}
func (f *fakeConn) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}
func (f *fakeConn) Err() error { return errors.New("fake connection ended") }

func (f *fakeConn) sent() []ofconn.PacketOut {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]ofconn.PacketOut(nil), f.outs...)
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func synPacketIn(t *testing.T, inPort uint32) *ofconn.PacketIn {
	data := frame(t, ipv4(layers.IPProtocolTCP), syn(1))
	return &ofconn.PacketIn{Reason: ofconn.ReasonAction, TableID: 13, Cookie: 0x0001020000000007, InPort: inPort, TotalLen: uint16(len(data)), Data: data}
}

func TestHandleSendsTheReplyOutOfTheInPort(t *testing.T) {
	r := New(Config{})
	c := newFakeConn()
	pi := synPacketIn(t, 7)
	kind, err := r.Handle(c, pi)
	require.NoError(t, err)
	require.Equal(t, KindTCPReset, kind)
	want, _, err := BuildReply(pi.Data)
	require.NoError(t, err)
	if diff := cmp.Diff([]ofconn.PacketOut{{InPort: ofconn.PortController, Outputs: []uint32{7}, Data: want}}, c.sent()); diff != "" {
		t.Errorf("packet-outs (-want +got):\n%s", diff)
	}
	require.Equal(t, Stats{Received: 1, Replied: 1}, r.Stats())
}

func TestHandleIgnoresAndRefuses(t *testing.T) {
	r := New(Config{Accept: FromFlows(13, 0x0000020000000000, 0x0000ff0000000000)})
	c := newFakeConn()

	other := synPacketIn(t, 7)
	other.TableID = 12
	kind, err := r.Handle(c, other)
	require.NoError(t, err)
	require.Equal(t, KindNone, kind)

	noMatch := synPacketIn(t, 7)
	noMatch.Reason = ofconn.ReasonNoMatch
	_, _ = r.Handle(c, noMatch)

	wrongCookie := synPacketIn(t, 7)
	wrongCookie.Cookie = 0x0001030000000007
	_, _ = r.Handle(c, wrongCookie)

	_, err = r.Handle(c, synPacketIn(t, ofconn.PortAny))
	require.ErrorIs(t, err, ErrNoReply, "no in_port, nowhere to send")

	garbage := synPacketIn(t, 7)
	garbage.Data = []byte{1, 2, 3}
	_, err = r.Handle(c, garbage)
	require.ErrorIs(t, err, ErrNoReply)

	require.Empty(t, c.sent())
	require.Equal(t, Stats{Received: 5, Ignored: 3, NoReply: 2}, r.Stats())

	c.sendErr = errors.New("broken pipe")
	_, err = r.Handle(c, synPacketIn(t, 7))
	require.ErrorContains(t, err, "broken pipe")
	require.Equal(t, uint64(1), r.Stats().SendFailed)
}

func TestRateLimit(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	r := New(Config{Rate: 10, Burst: 5, Now: clock.now})
	c := newFakeConn()
	replies := func(n int) int {
		sent := 0
		for i := 0; i < n; i++ {
			if kind, _ := r.Handle(c, synPacketIn(t, 3)); kind != KindNone {
				sent++
			}
		}
		return sent
	}
	require.Equal(t, 5, replies(100), "a flood gets the burst only")
	clock.advance(100 * time.Millisecond)
	require.Equal(t, 1, replies(100), "then one reply per 1/rate")
	clock.advance(10 * time.Second)
	require.Equal(t, 5, replies(100), "idle time refills up to the burst, no more")
	require.Equal(t, uint64(11), r.Stats().Replied)
	require.Equal(t, uint64(289), r.Stats().RateLimited)
}

func TestServeAnswersUntilTheConnectionCloses(t *testing.T) {
	r := New(Config{})
	c := newFakeConn()
	c.in <- synPacketIn(t, 4)
	c.in <- synPacketIn(t, 5)
	close(c.in)
	done := make(chan struct{})
	go func() { r.Serve(context.Background(), c); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after PacketIns closed")
	}
	got := c.sent()
	require.Len(t, got, 2)
	require.Equal(t, []uint32{4}, got[0].Outputs)
	require.Equal(t, []uint32{5}, got[1].Outputs)
}

func TestRunReconnects(t *testing.T) {
	r := New(Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	dials := 0
	second := newFakeConn()
	dial := func(context.Context) (Conn, error) {
		mu.Lock()
		defer mu.Unlock()
		dials++
		switch dials {
		case 1:
			return nil, errors.New("socket not there yet")
		case 2:
			c := newFakeConn() // connects, then dies at once
			close(c.in)
			return c, nil
		default:
			return second, nil
		}
	}
	done := make(chan struct{})
	go func() { r.Run(ctx, dial); close(done) }()
	second.in <- synPacketIn(t, 9)
	deadline := time.Now().Add(10 * time.Second)
	for len(second.sent()) == 0 {
		require.True(t, time.Now().Before(deadline), "no reply through the third connection")
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after the context ended")
	}
	require.True(t, second.closed, "Run closes the connection it stops serving")
}

// TestCollectorExportsTheCounters: the collector reads the counters at each scrape, one series
// per result.
func TestCollectorExportsTheCounters(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	r := New(Config{Rate: 1, Burst: 2, Now: clock.now})
	c := newFakeConn()
	for range 5 {
		_, _ = r.Handle(c, synPacketIn(t, 3))
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(r.Collector("antrea_proxy"))
	want := `# HELP antrea_proxy_reject_packets_total Packet-ins the reject responder handled, by result.
# TYPE antrea_proxy_reject_packets_total counter
antrea_proxy_reject_packets_total{result="ignored"} 0
antrea_proxy_reject_packets_total{result="no_reply"} 0
antrea_proxy_reject_packets_total{result="rate_limited"} 3
antrea_proxy_reject_packets_total{result="replied"} 2
antrea_proxy_reject_packets_total{result="send_failed"} 0
antrea_proxy_reject_packets_total{result="source_limited"} 0
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want)))
	_, _ = r.Handle(c, synPacketIn(t, 3))
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(strings.Replace(want,
		`{result="rate_limited"} 3`, `{result="rate_limited"} 4`, 1))), "a later scrape sees later counts")
}
