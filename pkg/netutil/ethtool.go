// Package netutil holds small host-networking helpers shared by the CNI server and the node
// data path.
package netutil

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// ethtoolSetTXCsum is ETHTOOL_STXCSUM from linux/ethtool.h.
const ethtoolSetTXCsum = 0x00000017

// ethtoolValue is struct ethtool_value.
type ethtoolValue struct {
	cmd  uint32
	data uint32
}

// ifreqData is struct ifreq with the ifr_data member.
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [16]byte // rest of the ifreq union
}

// socketIn opens a datagram socket in namespace ns (netns.None: the current one). A socket stays
// in the namespace it was created in, so ioctls on it act there.
func socketIn(ns netns.NsHandle) (int, error) {
	if !ns.IsOpen() {
		return unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	}
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return -1, fmt.Errorf("reading the thread's network namespace: %w", err)
	}
	defer orig.Close()
	if err := netns.Set(ns); err != nil {
		runtime.UnlockOSThread()
		return -1, fmt.Errorf("entering network namespace: %w", err)
	}
	fd, serr := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err := netns.Set(orig); err != nil {
		// The thread is stuck in the wrong namespace: keep it locked so that it exits with the
		// goroutine instead of serving other goroutines.
		if serr == nil {
			unix.Close(fd)
		}
		return -1, fmt.Errorf("returning to the original network namespace: %w", err)
	}
	runtime.UnlockOSThread()
	return fd, serr
}

// DisableTXChecksum turns TX checksum offload off on ifName in namespace ns (netns.None(): the
// calling thread's), like `ethtool -K <if> tx off`. The userspace datapath needs it on veths:
// otherwise conntrack sees unfinished checksums and marks packets invalid.
func DisableTXChecksum(ns netns.NsHandle, ifName string) error {
	fd, err := socketIn(ns)
	if err != nil {
		return fmt.Errorf("disabling TX checksum offload on %s: %w", ifName, err)
	}
	defer unix.Close(fd)
	val := ethtoolValue{cmd: ethtoolSetTXCsum, data: 0}
	var req ifreqData
	copy(req.name[:unix.IFNAMSIZ-1], ifName)
	req.data = unsafe.Pointer(&val)
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&req)))
	runtime.KeepAlive(&req)
	if errno != 0 {
		return fmt.Errorf("disabling TX checksum offload on %s: %w", ifName, errno)
	}
	return nil
}
