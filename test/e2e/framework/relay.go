package framework

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// Relay gives a node network namespace its own 127.0.0.1:<port> that forwards every TCP
// connection to an address of the test's own namespace (the kube-apiserver on the host's
// 127.0.0.1). Agents run unchanged with a kubeconfig naming https://127.0.0.1:6443: the
// listening socket is created inside the node namespace and stays there; the upstream
// connection is dialled from the test's namespace. TLS passes through untouched.
type Relay struct {
	ln       net.Listener
	upstream string
	wg       sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	done  bool
}

// StartRelay listens on listenAddr inside ns and forwards to upstream.
func StartRelay(ns *NetNS, listenAddr, upstream string) (*Relay, error) {
	ln, err := ns.Listen("tcp", listenAddr)
	if err != nil {
		return nil, err
	}
	r := &Relay{ln: ln, upstream: upstream, conns: map[net.Conn]struct{}{}}
	r.wg.Add(1)
	go r.accept()
	return r, nil
}

func (r *Relay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.forward(c)
		}()
	}
}

// track records c for Close; it reports false (and closes c) once the relay is closed.
func (r *Relay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		_ = c.Close()
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

func (r *Relay) untrack(c net.Conn) {
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
	_ = c.Close()
}

func (r *Relay) forward(down net.Conn) {
	if !r.track(down) {
		return
	}
	defer r.untrack(down)
	up, err := net.DialTimeout("tcp", r.upstream, 10*time.Second)
	if err != nil {
		return
	}
	if !r.track(up) {
		return
	}
	defer r.untrack(up)
	Splice(up, down)
}

// Close stops listening, cuts every relayed connection and waits for the relay's goroutines.
func (r *Relay) Close() error {
	err := r.ln.Close()
	r.mu.Lock()
	r.done = true
	for c := range r.conns {
		_ = c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("closing relay to %s: %w", r.upstream, err)
	}
	return nil
}
