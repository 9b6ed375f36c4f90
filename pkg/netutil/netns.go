package netutil

import (
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
)

// InNetNS runs fn on an OS thread that has entered the network namespace at path (e.g.
// /var/run/netns/node1). Sockets fn creates, processes it starts and /proc/sys/net files it
// opens belong to that namespace. fn must not hand work to other goroutines. The thread goes
// back to the pool only once it is back in its own namespace; otherwise it exits with its
// goroutine.
func InNetNS(path string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- fmt.Errorf("reading the thread's network namespace: %w", err)
			return
		}
		defer orig.Close()
		target, err := netns.GetFromPath(path)
		if err != nil {
			errc <- fmt.Errorf("opening network namespace %s: %w", path, err)
			return
		}
		defer target.Close()
		if err := netns.Set(target); err != nil {
			errc <- fmt.Errorf("entering network namespace %s: %w", path, err)
			return
		}
		ferr := fn()
		if err := netns.Set(orig); err == nil {
			runtime.UnlockOSThread()
		}
		errc <- ferr
	}()
	return <-errc
}
