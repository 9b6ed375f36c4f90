package ofconn

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeSwitch plays an OVS bridge on a unix socket: it answers the handshake, barriers and
// (unless silent) echo requests, and records what it receives.
type fakeSwitch struct {
	addr    string
	helloV  []byte // the hello it sends
	silent  bool   // do not answer echo requests
	failBar bool   // answer barriers after the handshake with an error

	mu   sync.Mutex
	conn net.Conn
	got  chan []byte // every message, as received
}

func startSwitch(t *testing.T, configure func(*fakeSwitch)) *fakeSwitch {
	t.Helper()
	path := filepath.Join(t.TempDir(), "br.mgmt")
	l, err := net.Listen("unix", path)
	require.NoError(t, err)
	s := &fakeSwitch{addr: "unix:" + path, got: make(chan []byte, 64),
		helloV: func() []byte {
			b := encode(TypeHello, 1, []byte{0, 1, 0, 8, 0, 0, 0, 1<<1 | 1<<4 | 1<<6})
			b[0] = 6
			return b
		}()}
	if configure != nil {
		configure(s)
	}
	t.Cleanup(func() {
		_ = l.Close()
		s.mu.Lock()
		if s.conn != nil {
			_ = s.conn.Close()
		}
		s.mu.Unlock()
	})
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conn = c
		s.mu.Unlock()
		s.serve(c)
	}()
	return s
}

func (s *fakeSwitch) send(msg []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil {
		return errors.New("no connection")
	}
	_, err := s.conn.Write(msg)
	return err
}

func (s *fakeSwitch) serve(c net.Conn) {
	barriers := 0
	for {
		msg, err := ReadMessage(c)
		if err != nil {
			return
		}
		select {
		case s.got <- msg:
		default:
		}
		h, _ := ParseHeader(msg)
		switch h.Type {
		case TypeHello:
			_ = s.send(s.helloV)
		case TypeFeaturesRequest:
			_ = s.send(encode(TypeFeaturesReply, h.Xid, []byte{0, 0, 0, 0, 0, 0, 0xab, 0xcd, 0, 0, 0, 0, 254, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}))
		case TypeBarrierRequest:
			barriers++
			if s.failBar && barriers > 1 {
				_ = s.send(encode(TypeError, h.Xid, []byte{0, 1, 0, 1}))
				continue
			}
			_ = s.send(encode(TypeBarrierReply, h.Xid, nil))
		case TypeEchoRequest:
			if !s.silent {
				_ = s.send(EncodeEchoReply(h.Xid, msg[headerLen:]))
			}
		}
	}
}

// next returns the next message of type typ the switch received.
func (s *fakeSwitch) next(t *testing.T, typ uint8) []byte {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case msg := <-s.got:
			if msg[1] == typ {
				return msg
			}
		case <-timeout:
			t.Fatalf("switch received no message of type %d", typ)
		}
	}
}

func dial(t *testing.T, s *fakeSwitch, opts Options) *Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, s.addr, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestConnHandshakePacketInPacketOut(t *testing.T) {
	s := startSwitch(t, nil)
	c := dial(t, s, Options{})
	require.Equal(t, uint64(0xabcd), c.Features().DatapathID)
	setConfig := s.next(t, TypeSetConfig)
	require.Equal(t, []byte{0, 0, 0xff, 0xff}, setConfig[headerLen:], "set-config asks for whole packets")

	// The switch's echo request is answered with its xid and data.
	require.NoError(t, s.send(EncodeEchoRequest(77, []byte("ping"))))
	// A malformed packet-in is counted and skipped; the connection survives it.
	require.NoError(t, s.send([]byte{4, TypePacketIn, 0, 12, 0, 0, 0, 1, 1, 2, 3, 4}))
	pin, err := EncodePacketIn(PacketIn{Reason: ReasonAction, TableID: 13, Fields: []Field{InPortField(6)}, Data: []byte("frame")})
	require.NoError(t, err)
	require.NoError(t, s.send(pin))

	select {
	case pi := <-c.PacketIns():
		require.Equal(t, uint32(6), pi.InPort)
		require.Equal(t, uint8(13), pi.TableID)
		require.Equal(t, []byte("frame"), pi.Data)
	case <-time.After(10 * time.Second):
		t.Fatal("no packet-in delivered")
	}
	require.Equal(t, Stats{PacketIns: 1, Malformed: 1}, c.Stats())

	require.NoError(t, c.SendPacketOut(PacketOut{Outputs: []uint32{6}, Data: []byte("reply")}))
	got := s.next(t, TypePacketOut)
	want, err := EncodePacketOut(0, PacketOut{Outputs: []uint32{6}, Data: []byte("reply")})
	require.NoError(t, err)
	require.Equal(t, want[headerLen:], got[headerLen:])

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, c.Barrier(ctx))
	require.NoError(t, c.Echo(ctx))
	require.NoError(t, c.Err())
}

func TestConnEchoReplyFromController(t *testing.T) {
	s := startSwitch(t, nil)
	dial(t, s, Options{})
	require.NoError(t, s.send(EncodeEchoRequest(77, []byte("ping"))))
	reply := s.next(t, TypeEchoReply)
	require.Equal(t, EncodeEchoReply(77, []byte("ping")), reply)
}

func TestConnRefusesSwitchWithoutOpenFlow13(t *testing.T) {
	s := startSwitch(t, func(s *fakeSwitch) {
		s.helloV = encode(TypeHello, 1, []byte{0, 1, 0, 8, 0, 0, 0, 1 << 1})
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := Dial(ctx, s.addr, Options{})
	require.ErrorContains(t, err, "does not offer OpenFlow 1.3")
	require.ErrorContains(t, err, s.addr)
}

func TestConnDialErrors(t *testing.T) {
	ctx := context.Background()
	_, err := Dial(ctx, "/no/scheme", Options{})
	require.ErrorContains(t, err, "want unix:<path>")
	_, err = Dial(ctx, "unix:"+filepath.Join(t.TempDir(), "missing.mgmt"), Options{})
	require.ErrorContains(t, err, "missing.mgmt")

	// A peer that accepts but never says hello: the context bounds the handshake.
	path := filepath.Join(t.TempDir(), "mute.mgmt")
	l, err := net.Listen("unix", path)
	require.NoError(t, err)
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err == nil {
			defer c.Close()
			time.Sleep(5 * time.Second)
		}
	}()
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = Dial(short, "unix:"+path, Options{})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 3*time.Second)
}

func TestConnKeepaliveDetectsDeadSwitch(t *testing.T) {
	s := startSwitch(t, func(s *fakeSwitch) { s.silent = true })
	c := dial(t, s, Options{EchoInterval: 50 * time.Millisecond, EchoTimeout: 100 * time.Millisecond})
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a switch that never answers echo requests was not declared dead")
	}
	require.ErrorContains(t, c.Err(), "no echo reply")
	_, open := <-c.PacketIns()
	require.False(t, open, "PacketIns is closed when the connection ends")
	require.Error(t, c.SendPacketOut(PacketOut{Outputs: []uint32{1}}))
}

func TestConnBarrierError(t *testing.T) {
	s := startSwitch(t, func(s *fakeSwitch) { s.failBar = true })
	c := dial(t, s, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := c.Barrier(ctx)
	var ofErr *Error
	require.ErrorAs(t, err, &ofErr)
	require.Equal(t, uint16(1), ofErr.Type)
}

func TestConnDropsPacketInsWhenTheQueueIsFull(t *testing.T) {
	s := startSwitch(t, nil)
	c := dial(t, s, Options{PacketInQueue: 2})
	pin, err := EncodePacketIn(PacketIn{Reason: ReasonAction, Fields: []Field{InPortField(1)}})
	require.NoError(t, err)
	for i := 0; i < 5; i++ {
		require.NoError(t, s.send(pin))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, c.Barrier(ctx), "the read loop keeps going while the queue is full")
	require.Equal(t, Stats{PacketIns: 2, Dropped: 3}, c.Stats())
}

func TestConnPeerCloses(t *testing.T) {
	s := startSwitch(t, nil)
	c := dial(t, s, Options{})
	s.mu.Lock()
	_ = s.conn.Close()
	s.mu.Unlock()
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("connection not ended after the switch closed it")
	}
	require.ErrorContains(t, c.Err(), "read")
}

// TestConnUnsolicitedMultipartReplies: a multipart reply no request waits for (a flow monitor's
// update, xid 0) reaches the HandleUnsolicited handler, one a request waits for does not, and
// after cancel nothing does.
func TestConnUnsolicitedMultipartReplies(t *testing.T) {
	s := startSwitch(t, nil)
	c := dial(t, s, Options{})
	got := make(chan []byte, 4)
	cancelHandler := c.HandleUnsolicited(func(msg []byte) { got <- msg })
	update := encode(TypeMultipartReply, 0, []byte{0, 16, 0, 0, 0, 0, 0, 0, 0, 4, 0, 5})
	require.NoError(t, s.send(update))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, c.Barrier(ctx), "the update was read before the barrier's reply")
	require.Len(t, got, 1)
	require.Equal(t, update, <-got)

	// A reply to a waiting request goes to the request only.
	xid := c.NextXid()
	ch, done := c.Expect(xid)
	defer done()
	require.NoError(t, s.send(encode(TypeMultipartReply, xid, []byte{0, 3, 0, 0, 0, 0, 0, 0})))
	r, err := c.Await(ctx, ch)
	require.NoError(t, err)
	require.Equal(t, xid, binaryXid(r.Msg))
	require.Empty(t, got)

	cancelHandler()
	require.NoError(t, s.send(update))
	require.NoError(t, c.Barrier(ctx))
	require.Empty(t, got, "no handler after cancel")
}

func binaryXid(msg []byte) uint32 { h, _ := ParseHeader(msg); return h.Xid }
