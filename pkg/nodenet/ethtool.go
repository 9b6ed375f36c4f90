package nodenet

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ethtoolSTXCSUM is ETHTOOL_STXCSUM (linux/ethtool.h): set TX checksum offload.
const ethtoolSTXCSUM = 0x17

// ethtoolValue mirrors struct ethtool_value.
type ethtoolValue struct {
	cmd, data uint32
}

// ifreq mirrors struct ifreq with its ifr_data member (the union is 24 bytes on 64-bit).
type ifreq struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [16]byte
}

// disableTXChecksum turns TX checksum offload off on ifName in the calling thread's network
// namespace, as `ethtool -K <ifName> tx off` does.
func disableTXChecksum(ifName string) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("disabling TX checksum offload on %s: socket: %w", ifName, err)
	}
	defer unix.Close(fd)
	val := ethtoolValue{cmd: ethtoolSTXCSUM}
	var req ifreq
	copy(req.name[:unix.IFNAMSIZ-1], ifName)
	req.data = unsafe.Pointer(&val)
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&req)))
	runtime.KeepAlive(&val)
	if errno != 0 {
		return fmt.Errorf("disabling TX checksum offload on %s: %w", ifName, errno)
	}
	return nil
}
