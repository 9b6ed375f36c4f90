package ovssandbox

import (
	"errors"
	"net"
	"sync/atomic"
	"syscall"
	"time"
)

// Flood writes small datagrams to c, perTick every 10 ms, until stop is closed, and counts
// them in sent; done is closed when it has stopped (also on a write error other than
// ECONNREFUSED, which a connected UDP socket reports after an ICMP port unreachable). The
// flood is paced so that it loads what it targets, not the machine's CPUs.
func Flood(c net.Conn, perTick int, stop <-chan struct{}) (sent *atomic.Uint64, done <-chan struct{}) {
	sent = new(atomic.Uint64)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			for range perTick {
				if _, err := c.Write([]byte("flood")); err == nil {
					sent.Add(1)
				} else if !errors.Is(err, syscall.ECONNREFUSED) {
					return
				}
			}
		}
	}()
	return sent, finished
}
