package framework

import (
	"io"
	"net"
	"sync"
)

// Splice copies a to b and b to a until both directions end, half-closing each TCP side when its
// source ends, as a relay (Relay, the real cluster's proxy load balancer) does.
func Splice(a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	}
	go pipe(a, b)
	go pipe(b, a)
	wg.Wait()
}
