package ovssandbox

import (
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// SendFrames sends raw Ethernet frames (destination MAC first, no FCS) out of interface ifName
// of the namespace, as a process inside it could with an AF_PACKET socket: whatever a pod may
// put on its wire, whichever addresses the frames claim.
func (ns *NetNS) SendFrames(ifName string, frames ...[]byte) error {
	idx, err := ns.ifIndex(ifName)
	if err != nil {
		return err
	}
	fd, err := ns.packetSocket()
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	to := &unix.SockaddrLinklayer{Ifindex: idx, Protocol: htons(unix.ETH_P_ALL)}
	for _, f := range frames {
		if err := unix.Sendto(fd, f, 0, to); err != nil {
			return fmt.Errorf("netns %s: sending on %s: %w", ns.Name, ifName, err)
		}
	}
	return nil
}

// packetSocket opens an AF_PACKET socket inside the namespace: a socket stays in the namespace
// it was created in. It is created on a goroutine of its own that holds its OS thread, so that a
// thread that could not return to its namespace is retired when the goroutine ends.
func (ns *NetNS) packetSocket() (int, error) {
	type result struct {
		fd  int
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		fd, back, err := ns.socketInside()
		if back {
			runtime.UnlockOSThread()
		}
		done <- result{fd, err}
	}()
	r := <-done
	return r.fd, r.err
}

// socketInside enters the namespace on the current (locked) thread, opens the socket and
// returns; back reports whether the thread is in its original namespace again.
func (ns *NetNS) socketInside() (fd int, back bool, err error) {
	orig, err := netns.Get()
	if err != nil {
		return -1, true, fmt.Errorf("current netns: %w", err)
	}
	defer orig.Close()
	target, err := netns.GetFromName(ns.Name)
	if err != nil {
		return -1, true, fmt.Errorf("netns %s: %w", ns.Name, err)
	}
	defer target.Close()
	if err := netns.Set(target); err != nil {
		return -1, true, fmt.Errorf("entering netns %s: %w", ns.Name, err)
	}
	fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
	if err != nil {
		err = fmt.Errorf("netns %s: packet socket: %w", ns.Name, err)
	}
	if serr := netns.Set(orig); serr != nil {
		if err == nil {
			unix.Close(fd)
		}
		return -1, false, fmt.Errorf("leaving netns %s: %w", ns.Name, serr)
	}
	return fd, true, err
}

// ifIndex returns the index of interface ifName inside the namespace.
func (ns *NetNS) ifIndex(ifName string) (int, error) {
	out, err := ns.Exec("cat", "/sys/class/net/"+ifName+"/ifindex")
	if err != nil {
		return 0, fmt.Errorf("netns %s: index of %s: %v: %s", ns.Name, ifName, err, out)
	}
	var idx int
	if _, err := fmt.Sscanf(out, "%d", &idx); err != nil {
		return 0, fmt.Errorf("netns %s: index of %s: %q", ns.Name, ifName, out)
	}
	return idx, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
