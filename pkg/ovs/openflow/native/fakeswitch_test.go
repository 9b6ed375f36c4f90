package native

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"path/filepath"
	"sync"
	"testing"
)

// fakeSwitch is an OpenFlow 1.5 switch on a unix socket that answers the handshake, echo,
// features, barrier and bundle control requests, and records every message it receives. A
// reject function can make it answer a bundle add with an error, and a bundle commit then fails.
type fakeSwitch struct {
	path string
	ln   net.Listener

	mu     sync.Mutex
	msgs   [][]byte                    // every message received, in order, on every connection
	reject func(inner []byte) *ofError // refuses a bundle add when it arrives; nil accepts all
	// rejectAtCommit refuses a bundled message at commit, as Open vSwitch does for a group
	// add of an existing group.
	rejectAtCommit func(inner []byte) *ofError
	// rejectDirect refuses a message sent outside a bundle (a meter mod); nil accepts all.
	rejectDirect func(msg []byte) *ofError
	hang         bool // stop answering anything
	// refuseMultipart refuses multipart requests of this type (OFPBRC_BAD_STAT); 0 none.
	refuseMultipart uint16
	committed       [][]byte // the inner messages of every committed bundle, in order
	conns           []net.Conn
	wg              sync.WaitGroup
}

type ofError struct{ typ, code uint16 }

func startFakeSwitch(t testing.TB) *fakeSwitch {
	t.Helper()
	path := filepath.Join(t.TempDir(), "br.mgmt")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	s := &fakeSwitch{path: path, ln: ln}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.close)
	return s
}

func (s *fakeSwitch) target() string { return "unix:" + s.path }

func (s *fakeSwitch) close() {
	_ = s.ln.Close()
	s.dropConns()
	s.wg.Wait()
}

// dropConns closes every open connection, as an ovs-vswitchd restart would.
func (s *fakeSwitch) dropConns() {
	s.mu.Lock()
	for _, c := range s.conns {
		_ = c.Close()
	}
	s.conns = nil
	s.mu.Unlock()
}

func (s *fakeSwitch) setReject(f func(inner []byte) *ofError) {
	s.mu.Lock()
	s.reject = f
	s.mu.Unlock()
}

// messages returns a copy of what the switch received so far.
func (s *fakeSwitch) messages() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.msgs...)
}

func (s *fakeSwitch) reset() {
	s.mu.Lock()
	s.msgs = nil
	s.mu.Unlock()
}

func (s *fakeSwitch) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns = append(s.conns, c)
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer c.Close()
			_ = s.serve(c)
		}()
	}
}

func fakeMsg(typ uint8, xid uint32, body []byte) []byte {
	m := make([]byte, 8+len(body))
	m[0], m[1] = ofVersion, typ
	binary.BigEndian.PutUint16(m[2:], uint16(len(m)))
	binary.BigEndian.PutUint32(m[4:], xid)
	copy(m[8:], body)
	return m
}

func (s *fakeSwitch) serve(c net.Conn) error {
	hello := []byte{0, 1, 0, 8, 0, 0, 0, 1 << ofVersion}
	if _, err := c.Write(fakeMsg(typeHello, 1, hello)); err != nil {
		return err
	}
	failed := map[uint32]bool{}      // bundle id -> an add was rejected
	bundles := map[uint32][][]byte{} // bundle id -> its add messages
	for {
		msg, err := readMsg(c)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		s.mu.Lock()
		s.msgs = append(s.msgs, msg)
		reject, atCommit, hang, direct, refuseMP := s.reject, s.rejectAtCommit, s.hang, s.rejectDirect, s.refuseMultipart
		s.mu.Unlock()
		if hang {
			continue
		}
		xid := binary.BigEndian.Uint32(msg[4:])
		var out []byte
		switch msg[1] {
		case typeEchoRequest:
			out = fakeMsg(typeEchoReply, xid, msg[8:])
		case typeFeaturesRequest:
			body := make([]byte, 24)
			binary.BigEndian.PutUint64(body, 0xabcdef)
			body[12] = 254
			out = fakeMsg(typeFeaturesReply, xid, body)
		case typeGetConfigRequest:
			out = fakeMsg(typeGetConfigReply, xid, []byte{0, 0, 0xff, 0xff})
		case typeBarrierRequest:
			out = fakeMsg(typeBarrierReply, xid, nil)
		case typeMultipartRequest:
			if refuseMP != 0 && binary.BigEndian.Uint16(msg[8:]) == refuseMP {
				out = fakeError(xid, errTypeBadRequest, 2, msg) // OFPBRC_BAD_STAT
				break
			}
			out = fakeMultipartReply(xid, msg)
		case typeBundleControl:
			out = s.bundleControl(c, msg, bundles, failed, atCommit)
		case typeMeterMod:
			if direct != nil {
				if e := direct(msg); e != nil {
					out = fakeError(xid, e.typ, e.code, msg)
				}
			}
		case typeBundleAdd:
			id := binary.BigEndian.Uint32(msg[8:])
			if reject != nil {
				if e := reject(msg[16:]); e != nil {
					failed[id] = true
					out = fakeError(xid, e.typ, e.code, msg[16:])
					break
				}
			}
			bundles[id] = append(bundles[id], msg)
		}
		if out != nil {
			if _, err := c.Write(out); err != nil {
				return err
			}
		}
	}
}

func fakeError(xid uint32, typ, code uint16, data []byte) []byte {
	body := make([]byte, 4, 4+64)
	binary.BigEndian.PutUint16(body, typ)
	binary.BigEndian.PutUint16(body[2:], code)
	if len(data) > 64 {
		data = data[:64]
	}
	return fakeMsg(typeError, xid, append(body, data...))
}

func readMsg(r io.Reader) ([]byte, error) {
	var hdr [8]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint16(hdr[2:]))
	if n < 8 {
		return nil, errors.New("short message")
	}
	m := make([]byte, n)
	copy(m, hdr[:])
	_, err := io.ReadFull(r, m[8:])
	return m, err
}

// fakeMultipartReply answers a table features request with 254 tables without properties, a
// table stats request with fakeTableStats (two messages), and any other multipart request with
// an empty reply.
func fakeMultipartReply(xid uint32, req []byte) []byte {
	body := append([]byte(nil), req[8:16]...)
	if binary.BigEndian.Uint16(req[8:]) == multipartTable {
		return fakeTableStatsReply(xid, body)
	}
	if binary.BigEndian.Uint16(req[8:]) == 12 { // OFPMP_TABLE_FEATURES
		for id := 0; id < 254; id++ {
			tf := make([]byte, 64)
			binary.BigEndian.PutUint16(tf, 64)
			tf[2] = byte(id)
			binary.BigEndian.PutUint32(tf[56:], 1000000)
			body = append(body, tf...)
		}
	}
	return fakeMsg(typeMultipartReply, xid, body)
}

// bundleControl answers a bundle control request; a commit applies the bundle's messages
// unless one was refused (then errors name the refused messages before the commit's error).
func (s *fakeSwitch) bundleControl(c net.Conn, msg []byte, bundles map[uint32][][]byte, failed map[uint32]bool,
	atCommit func([]byte) *ofError) []byte {
	xid := binary.BigEndian.Uint32(msg[4:])
	body := append([]byte(nil), msg[8:16]...)
	id := binary.BigEndian.Uint32(body)
	ctl := binary.BigEndian.Uint16(body[4:])
	switch ctl {
	case bundleCommitRequest:
		adds := bundles[id]
		delete(bundles, id)
		if failed[id] {
			return fakeError(xid, errTypeBundleFailed, errCodeBundleMsgFailed, msg)
		}
		for _, a := range adds {
			if atCommit == nil {
				break
			}
			if e := atCommit(a[16:]); e != nil {
				_, _ = c.Write(fakeError(binary.BigEndian.Uint32(a[4:]), e.typ, e.code, a[16:]))
				return fakeError(xid, errTypeBundleFailed, errCodeBundleMsgFailed, msg)
			}
		}
		s.mu.Lock()
		for _, a := range adds {
			s.committed = append(s.committed, a[16:])
		}
		s.mu.Unlock()
	case bundleDiscardRequest:
		delete(bundles, id)
		delete(failed, id)
	}
	binary.BigEndian.PutUint16(body[4:], ctl+1)
	return fakeMsg(typeBundleControl, xid, body)
}

func (s *fakeSwitch) committedMessages() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.committed...)
}

func (s *fakeSwitch) setRejectDirect(f func(msg []byte) *ofError) {
	s.mu.Lock()
	s.rejectDirect = f
	s.mu.Unlock()
}

func (s *fakeSwitch) setHang(h bool) {
	s.mu.Lock()
	s.hang = h
	s.mu.Unlock()
}

func (s *fakeSwitch) setRejectAtCommit(f func(inner []byte) *ofError) {
	s.mu.Lock()
	s.rejectAtCommit = f
	s.mu.Unlock()
}

func (s *fakeSwitch) setRefuseMultipart(t uint16) {
	s.mu.Lock()
	s.refuseMultipart = t
	s.mu.Unlock()
}
