//go:build cluster

package cluster

import (
	"context"
	"errors"
	"hash/fnv"
	"net"
	"net/netip"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// netOps opens the load balancer's sockets: inside the cluster's switch namespace in the real
// cluster (nsOps), in the test's own namespace in unit tests.
type netOps interface {
	Listen(network, addr string) (net.Listener, error)
	ListenPacket(network, addr string) (net.PacketConn, error)
	Dial(ctx context.Context, network, addr string) (net.Conn, error)
}

const (
	// dialTimeout bounds one connection attempt to a target; a failed attempt tries the next
	// target once.
	dialTimeout = 5 * time.Second
	// udpIdle ends a UDP flow (client address to target) after this long without a datagram
	// either way, as conntrack's default UDP timeout does.
	udpIdle = 30 * time.Second
)

// frontend is one address:port/protocol of the load balancer: a TCP listener that relays every
// admitted connection to a target, or a UDP socket that relays every admitted client's flow
// through its own socket to a target.
type frontend struct {
	key  frontendKey
	ops  netOps
	cfg  atomic.Pointer[frontendConfig]
	rr   atomic.Uint64
	ln   net.Listener   // TCP
	pc   net.PacketConn // UDP
	wg   sync.WaitGroup
	logf func(format string, args ...any)

	mu       sync.Mutex
	done     bool
	conns    map[net.Conn]struct{}
	sessions map[netip.AddrPort]*udpSession
}

// udpSession is one client's UDP flow through the load balancer.
type udpSession struct {
	target string
	up     net.Conn
	last   atomic.Int64 // unix nanoseconds of the last datagram either way
}

// startFrontend listens on the key's address with ops and relays by cfg until close.
func startFrontend(ops netOps, key frontendKey, cfg frontendConfig, logf func(string, ...any)) (*frontend, error) {
	f := &frontend{key: key, ops: ops, logf: logf, conns: map[net.Conn]struct{}{}, sessions: map[netip.AddrPort]*udpSession{}}
	f.cfg.Store(&cfg)
	var err error
	switch key.Proto {
	case corev1.ProtocolTCP:
		if f.ln, err = ops.Listen("tcp", key.Addr.String()); err != nil {
			return nil, err
		}
		f.wg.Add(1)
		go f.acceptTCP()
	case corev1.ProtocolUDP:
		if f.pc, err = ops.ListenPacket("udp", key.Addr.String()); err != nil {
			return nil, err
		}
		f.wg.Add(1)
		go f.readUDP()
	default:
		return nil, errors.New("unsupported protocol " + string(key.Proto))
	}
	return f, nil
}

// addr is the address the frontend listens on.
func (f *frontend) addr() net.Addr {
	if f.ln != nil {
		return f.ln.Addr()
	}
	return f.pc.LocalAddr()
}

// update replaces the frontend's configuration; flows already relayed keep their target unless
// it is no longer one (UDP) or end on their own (TCP).
func (f *frontend) update(cfg frontendConfig) { f.cfg.Store(&cfg) }

// pick chooses the target of a client's connection: by a hash of the client address with
// session affinity, round robin otherwise; attempt moves to the next target after a failure.
func (f *frontend) pick(cfg *frontendConfig, client netip.Addr, attempt int) string {
	n := uint64(len(cfg.Targets))
	var i uint64
	if cfg.Affinity {
		h := fnv.New64a()
		b := client.Unmap().AsSlice()
		_, _ = h.Write(b)
		i = h.Sum64()
	} else {
		i = f.rr.Add(1)
	}
	return cfg.Targets[(i+uint64(attempt))%n]
}

func (f *frontend) acceptTCP() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			f.relayTCP(c)
		}()
	}
}

// relayTCP refuses (RST) a client the source ranges do not admit or when there is no target,
// and otherwise pipes the connection to a target.
func (f *frontend) relayTCP(down net.Conn) {
	client := addrOf(down.RemoteAddr())
	cfg := f.cfg.Load()
	if !cfg.admits(client) || len(cfg.Targets) == 0 || !f.track(down) {
		reset(down)
		return
	}
	defer f.untrack(down)
	var up net.Conn
	for attempt := 0; attempt < min(2, len(cfg.Targets)); attempt++ {
		target := f.pick(cfg, client, attempt)
		ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
		c, err := f.ops.Dial(ctx, "tcp", target)
		cancel()
		if err == nil {
			up = c
			break
		}
		f.logf("%s: %s: dial %s: %v", f.key, cfg.Service, target, err)
	}
	if up == nil {
		reset(down)
		return
	}
	if !f.track(up) {
		return
	}
	defer f.untrack(up)
	framework.Splice(up, down)
}

// reset closes a TCP connection with a RST, as a load balancer refusing a client does.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

func addrOf(a net.Addr) netip.Addr {
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// track records c for close; it reports false (and closes c) once the frontend is closed.
func (f *frontend) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		_ = c.Close()
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *frontend) untrack(c net.Conn) {
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
	_ = c.Close()
}

// readUDP relays every admitted datagram through its client's session.
func (f *frontend) readUDP() {
	defer f.wg.Done()
	buf := make([]byte, 65535)
	for {
		n, from, err := f.pc.ReadFrom(buf)
		if err != nil {
			return
		}
		client, err := netip.ParseAddrPort(from.String())
		if err != nil {
			continue
		}
		cfg := f.cfg.Load()
		if !cfg.admits(client.Addr().Unmap()) || len(cfg.Targets) == 0 {
			continue
		}
		s := f.session(client, from, cfg)
		if s == nil {
			continue
		}
		s.last.Store(time.Now().UnixNano())
		_, _ = s.up.Write(buf[:n])
	}
}

// session returns the client's flow, opening one to a new target when there is none or its
// target is no longer one.
func (f *frontend) session(client netip.AddrPort, from net.Addr, cfg *frontendConfig) *udpSession {
	f.mu.Lock()
	s := f.sessions[client]
	f.mu.Unlock()
	if s != nil && hasTarget(cfg.Targets, s.target) {
		return s
	}
	if s != nil {
		f.endSession(client, s)
	}
	target := f.pick(cfg, client.Addr(), 0)
	ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
	up, err := f.ops.Dial(ctx, "udp", target)
	cancel()
	if err != nil {
		f.logf("%s: %s: dial %s: %v", f.key, cfg.Service, target, err)
		return nil
	}
	s = &udpSession{target: target, up: up}
	s.last.Store(time.Now().UnixNano())
	f.mu.Lock()
	if f.done {
		f.mu.Unlock()
		_ = up.Close()
		return nil
	}
	f.sessions[client] = s
	f.wg.Add(1)
	f.mu.Unlock()
	go f.replies(client, from, s)
	return s
}

func hasTarget(targets []string, t string) bool {
	i := sort.SearchStrings(targets, t)
	return i < len(targets) && targets[i] == t
}

// replies sends the target's datagrams back to the client until the flow is idle for udpIdle
// or ends.
func (f *frontend) replies(client netip.AddrPort, to net.Addr, s *udpSession) {
	defer f.wg.Done()
	buf := make([]byte, 65535)
	for {
		_ = s.up.SetReadDeadline(time.Now().Add(udpIdle))
		n, err := s.up.Read(buf)
		if err == nil {
			s.last.Store(time.Now().UnixNano())
			_, _ = f.pc.WriteTo(buf[:n], to)
			continue
		}
		// A refused datagram (ICMP port unreachable) does not end the flow; idleness and
		// closing do.
		if errors.Is(err, net.ErrClosed) || time.Since(time.Unix(0, s.last.Load())) >= udpIdle {
			f.endSession(client, s)
			return
		}
	}
}

// endSession forgets a client's flow (if it is still s) and closes its socket.
func (f *frontend) endSession(client netip.AddrPort, s *udpSession) {
	f.mu.Lock()
	if f.sessions[client] == s {
		delete(f.sessions, client)
	}
	f.mu.Unlock()
	_ = s.up.Close()
}

// close stops listening, cuts every relayed connection and flow, and waits for the frontend's
// goroutines.
func (f *frontend) close() {
	f.mu.Lock()
	f.done = true
	if f.ln != nil {
		_ = f.ln.Close()
	}
	if f.pc != nil {
		_ = f.pc.Close()
	}
	for c := range f.conns {
		_ = c.Close()
	}
	for _, s := range f.sessions {
		_ = s.up.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}
