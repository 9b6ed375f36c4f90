package ofconn

import (
	"context"
	"encoding/binary"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// pipePeer is the switch's end of a net.Pipe: the test reads what the connection sends and
// writes what the switch answers, message by message.
type pipePeer struct {
	t  *testing.T
	nc net.Conn
	v  uint8
}

// read returns the next message the connection sent.
func (p *pipePeer) read() []byte {
	p.t.Helper()
	_ = p.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	msg, err := ReadMessage(p.nc)
	require.NoError(p.t, err)
	return msg
}

// expect reads the next message and checks its type and version.
func (p *pipePeer) expect(typ uint8) Header {
	p.t.Helper()
	msg := p.read()
	h, err := ParseHeader(msg)
	require.NoError(p.t, err)
	require.Equal(p.t, typ, h.Type, "message type")
	require.Equal(p.t, p.v, h.Version, "message version")
	return h
}

// drain reads and drops whatever the connection sends until it ends.
func (p *pipePeer) drain() {
	_ = p.nc.SetReadDeadline(time.Time{})
	for {
		if _, err := ReadMessage(p.nc); err != nil {
			return
		}
	}
}

func (p *pipePeer) send(typ uint8, xid uint32, body []byte) {
	p.t.Helper()
	_ = p.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, err := p.nc.Write(encodeV(p.v, typ, xid, body))
	require.NoError(p.t, err)
}

// handshake plays the switch's side of a handshake without packet-ins: hello, features.
func (p *pipePeer) handshake(dpid uint64) {
	p.expect(TypeHello)
	p.send(TypeHello, 1, []byte{0, 1, 0, 8, 0, 0, 0, 1 << p.v})
	h := p.expect(TypeFeaturesRequest)
	body := make([]byte, 24)
	binary.BigEndian.PutUint64(body, dpid)
	p.send(TypeFeaturesReply, h.Xid, body)
}

// pipeConn runs Handshake over a net.Pipe with peer playing the switch.
func pipeConn(t *testing.T, opts Options, peer func(p *pipePeer)) (*Conn, *pipePeer, error) {
	t.Helper()
	a, b := net.Pipe()
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	p := &pipePeer{t: t, nc: b, v: opts.Defaults().Version}
	done := make(chan struct{})
	go func() { defer close(done); peer(p) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Handshake(ctx, a, "pipe", opts)
	<-done
	if c != nil {
		t.Cleanup(func() { _ = c.Close() })
	}
	return c, p, err
}

func TestPipeHelloVersionMismatchIsAClearError(t *testing.T) {
	_, _, err := pipeConn(t, Options{Version: Version15, IgnorePacketIns: true}, func(p *pipePeer) {
		p.expect(TypeHello)
		// The switch offers OpenFlow 1.0 and 1.3 only.
		p.send(TypeHello, 1, []byte{0, 1, 0, 8, 0, 0, 0, 1<<1 | 1<<4})
	})
	require.ErrorContains(t, err, "openflow 1.5 handshake with pipe")
	require.ErrorContains(t, err, "peer does not offer OpenFlow 1.5")
	require.ErrorContains(t, err, "enable it in the bridge's protocols")

	// Without a version bitmap, the header's version is the highest the peer speaks.
	_, _, err = pipeConn(t, Options{}, func(p *pipePeer) {
		p.expect(TypeHello)
		_, _ = p.nc.Write(encodeV(0x01, TypeHello, 1, nil))
	})
	require.ErrorContains(t, err, "peer speaks OpenFlow version 0x01 at most, need 0x04 (OpenFlow 1.3)")
}

func TestPipeHandshakeWithPacketInsSetsConfig(t *testing.T) {
	c, _, err := pipeConn(t, Options{}, func(p *pipePeer) {
		p.handshake(0x42)
		msg := p.read()
		require.Equal(t, encodeV(Version13, TypeSetConfig, binary.BigEndian.Uint32(msg[4:]), []byte{0, 0, 0xff, 0xff}), msg,
			"set-config asks for whole packets")
		p.send(TypeBarrierReply, p.expect(TypeBarrierRequest).Xid, nil)
	})
	require.NoError(t, err)
	require.Equal(t, uint64(0x42), c.Features().DatapathID)
}

func TestPipeEchoRequestIsAnsweredInTheConnectionsVersion(t *testing.T) {
	_, p, err := pipeConn(t, Options{Version: Version15, IgnorePacketIns: true}, func(p *pipePeer) { p.handshake(1) })
	require.NoError(t, err)
	p.send(TypeEchoRequest, 77, []byte("ping"))
	msg := p.read()
	require.Equal(t, encodeV(Version15, TypeEchoReply, 77, []byte("ping")), msg)
}

func TestPipeEchoTimeoutEndsTheConnection(t *testing.T) {
	c, p, err := pipeConn(t, Options{Version: Version15, IgnorePacketIns: true,
		EchoInterval: 20 * time.Millisecond, EchoTimeout: 50 * time.Millisecond}, func(p *pipePeer) { p.handshake(1) })
	require.NoError(t, err)
	// The switch reads the echo request but never answers it.
	p.expect(TypeEchoRequest)
	go p.drain()
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("an unanswered echo did not end the connection")
	}
	require.ErrorContains(t, c.Err(), "no echo reply within 50ms")
}

func TestPipeHoldSuspendsTheKeepalive(t *testing.T) {
	c, p, err := pipeConn(t, Options{Version: Version15, IgnorePacketIns: true,
		EchoInterval: 20 * time.Millisecond, EchoTimeout: 20 * time.Millisecond}, func(p *pipePeer) { p.handshake(1) })
	require.NoError(t, err)
	release := c.Hold()
	// Over five echo intervals, a held connection (a big request in flight, which has its own
	// deadline) sends no echo and stays up.
	_ = p.nc.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	_, err = ReadMessage(p.nc)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "no echo while held")
	require.True(t, c.Alive())
	release()
	go p.drain()
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a missed echo after the hold was released did not end the connection")
	}
}

func TestPipeRepliesAreRoutedByXid(t *testing.T) {
	c, p, err := pipeConn(t, Options{Version: Version15, IgnorePacketIns: true}, func(p *pipePeer) { p.handshake(1) })
	require.NoError(t, err)
	first := c.ReserveXids(2)
	ch1, cancel1 := c.Expect(first)
	defer cancel1()
	ch2, cancel2 := c.Expect(first + 1)
	defer cancel2()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() {
		_ = c.Write(ctx, append(encodeV(Version15, TypeBarrierRequest, first, nil), encodeV(Version15, TypeBarrierRequest, first+1, nil)...))
	}()
	p.expect(TypeBarrierRequest)
	p.expect(TypeBarrierRequest)
	// Answered out of order, with an asynchronous message and an error in between.
	p.send(TypePortStatus, 0, make([]byte, 8))
	p.send(TypeError, first, []byte{0, 1, 0, 1})
	p.send(TypeBarrierReply, first+1, nil)
	r2, err := c.Await(ctx, ch2)
	require.NoError(t, err)
	require.Equal(t, first+1, binary.BigEndian.Uint32(r2.Msg[4:]))
	require.Nil(t, r2.Err)
	r1, err := c.Await(ctx, ch1)
	require.NoError(t, err)
	require.Equal(t, &Error{Xid: first, Type: 1, Code: 1}, r1.Err)

	// Errors about xids no request waits for go to the collecting range.
	rng, stop := c.CollectErrors(100, 200)
	defer stop()
	p.send(TypeError, 150, []byte{0, 6, 0, 0})
	p.send(TypeError, 300, []byte{0, 6, 0, 0}) // outside: logged
	go func() {
		msg, err := ReadMessage(p.nc)
		if err == nil {
			_, _ = p.nc.Write(encodeV(Version15, TypeBarrierReply, binary.BigEndian.Uint32(msg[4:]), nil))
		}
	}()
	// The switch answers in order: the errors were dispatched before the barrier's reply.
	require.NoError(t, c.Barrier(ctx))
	require.Len(t, rng.List(), 1)
	require.Equal(t, "OFPGMFC_GROUP_EXISTS", rng.List()[0].Error())
}

func TestPipeMultipartCollectsEveryPart(t *testing.T) {
	c, p, err := pipeConn(t, Options{Version: Version15, IgnorePacketIns: true}, func(p *pipePeer) { p.handshake(1) })
	require.NoError(t, err)
	go func() {
		h := p.expect(TypeMultipartReq)
		p.send(TypeMultipartReply, h.Xid, []byte{0, 3, 0, 1, 0, 0, 0, 0, 'a'}) // more
		p.send(TypeMultipartReply, h.Xid, []byte{0, 3, 0, 0, 0, 0, 0, 0, 'b'}) // last
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	xid := c.NextXid()
	var got []byte
	err = c.Multipart(ctx, xid, encodeV(Version15, TypeMultipartReq, xid, []byte{0, 3, 0, 0, 0, 0, 0, 0}), func(part []byte) (bool, error) {
		got = append(got, part[len(part)-1])
		return false, nil
	})
	require.NoError(t, err)
	require.Equal(t, "ab", string(got))
}

func TestPipeResetMidRequestFailsTheWaiter(t *testing.T) {
	c, p, err := pipeConn(t, Options{Version: Version15, IgnorePacketIns: true}, func(p *pipePeer) { p.handshake(1) })
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() { errc <- c.Barrier(context.Background()) }()
	p.expect(TypeBarrierRequest)
	_ = p.nc.Close() // the switch goes away before answering
	select {
	case err := <-errc:
		require.ErrorContains(t, err, "openflow connection to pipe")
		require.ErrorContains(t, err, "read")
	case <-time.After(10 * time.Second):
		t.Fatal("a request whose connection was reset hangs")
	}
	require.False(t, c.Alive())
}

func TestPipePacketOutNeedsOpenFlow13(t *testing.T) {
	c, _, err := pipeConn(t, Options{Version: Version15, IgnorePacketIns: true}, func(p *pipePeer) { p.handshake(1) })
	require.NoError(t, err)
	require.ErrorContains(t, c.SendPacketOut(PacketOut{Outputs: []uint32{1}}), "encoded for OpenFlow 1.3")
}

func TestOptionsValidateReportsEveryProblem(t *testing.T) {
	require.NoError(t, Options{}.Defaults().Validate())
	require.NoError(t, MonitorOptions{}.Defaults().Validate())
	err := Options{Version: 5, EchoInterval: -1}.Validate()
	for _, want := range []string{"version 0x05", "echoInterval", "echoTimeout", "handshakeTimeout", "writeTimeout", "packetInQueue"} {
		require.ErrorContains(t, err, want)
	}
	err = MonitorOptions{MinBackoff: 2, MaxBackoff: 1}.Validate()
	for _, want := range []string{"conn: ", "backoff", "dialTimeout"} {
		require.ErrorContains(t, err, want)
	}
}

// TestPipeMultipartNeverLosesPartsSilently: a reply with more parts than are buffered while the
// caller is busy with the first fails the request; it does not return a partial result.
func TestPipeMultipartNeverLosesPartsSilently(t *testing.T) {
	c, p, err := pipeConn(t, Options{Version: Version15, IgnorePacketIns: true}, func(p *pipePeer) { p.handshake(1) })
	require.NoError(t, err)
	sent := make(chan struct{})
	go func() {
		h := p.expect(TypeMultipartReq)
		for i := 0; i < maxMultipartParts+2; i++ {
			p.send(TypeMultipartReply, h.Xid, []byte{0, 3, 0, 1, 0, 0, 0, 0, 'a'}) // more
		}
		p.send(TypeMultipartReply, h.Xid, []byte{0, 3, 0, 0, 0, 0, 0, 0, 'b'}) // last
		close(sent)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	xid := c.NextXid()
	parts := 0
	err = c.Multipart(ctx, xid, encodeV(Version15, TypeMultipartReq, xid, []byte{0, 3, 0, 0, 0, 0, 0, 0}), func([]byte) (bool, error) {
		if parts == 0 {
			<-sent // busy with the first part while the switch sends the rest
		}
		parts++
		return false, nil
	})
	require.ErrorContains(t, err, "parts were dropped")
}

// TestMultipartAllocatesForItsParts: a multipart request queues the parts that come, it does
// not reserve room for the most it accepts (the healer reads table statistics every second:
// 32 KB a request were about 1.9 MB a minute of what an idle agent allocates).
func TestMultipartAllocatesForItsParts(t *testing.T) {
	const requests = 100
	c, p, err := pipeConn(t, Options{Version: Version15, IgnorePacketIns: true}, func(p *pipePeer) { p.handshake(1) })
	require.NoError(t, err)
	go func() {
		for range requests {
			h := p.expect(TypeMultipartReq)
			p.send(TypeMultipartReply, h.Xid, []byte{0, 3, 0, 1, 0, 0, 0, 0, 'a'}) // more
			p.send(TypeMultipartReply, h.Xid, []byte{0, 3, 0, 0, 0, 0, 0, 0, 'b'}) // last
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range requests {
		xid := c.NextXid()
		parts := 0
		require.NoError(t, c.Multipart(ctx, xid, encodeV(Version15, TypeMultipartReq, xid, []byte{0, 3, 0, 0, 0, 0, 0, 0}),
			func([]byte) (bool, error) { parts++; return false, nil }))
		require.Equal(t, 2, parts)
	}
	runtime.ReadMemStats(&after)
	// Everything both ends allocated, per request: the messages, the waiter and its queue.
	if per := (after.TotalAlloc - before.TotalAlloc) / requests; per > 16<<10 {
		t.Errorf("a two-part multipart request allocated %d bytes", per)
	}
}
