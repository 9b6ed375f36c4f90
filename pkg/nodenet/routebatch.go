package nodenet

import (
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// routeBatchSize is how many route requests one netlink send carries. Each is 60 to 80 bytes,
// well within the socket's send buffer.
const routeBatchSize = 1000

// routeOp is one change of a host route: a replace (add or change) or a delete.
type routeOp struct {
	del   bool
	route *netlink.Route
}

// writeRoutes applies ops in order, in batches of routeBatchSize requests per send instead of
// one request and acknowledgement at a time (a ClusterIP route per Service: tens of
// thousands). Only the last request of a batch asks for an acknowledgement; the kernel handles
// a batch in order before the send returns and reports every failed request, so once that
// acknowledgement arrives, every error of the batch has too. It returns one error per op (nil
// when it succeeded), or an error for the whole call when the socket failed.
func (h Host) writeRoutes(ops []routeOp) ([]error, error) {
	if len(ops) == 0 {
		return nil, nil
	}
	sock, err := h.routeSocket()
	if err != nil {
		return nil, err
	}
	defer sock.Close()
	if err := sock.SetReceiveTimeout(&unix.Timeval{Sec: 10}); err != nil {
		return nil, err
	}
	errs := make([]error, len(ops))
	for start := 0; start < len(ops); start += routeBatchSize {
		end := min(start+routeBatchSize, len(ops))
		if err := sendRouteBatch(sock, ops[start:end], errs[start:end]); err != nil {
			return nil, err
		}
	}
	return errs, nil
}

// routeSocket opens a NETLINK_ROUTE socket in the host namespace.
func (h Host) routeSocket() (*nl.NetlinkSocket, error) {
	target := netns.None()
	if h.NetNS != "" {
		ns, err := netns.GetFromPath(h.NetNS)
		if err != nil {
			return nil, fmt.Errorf("opening host network namespace %s: %w", h.NetNS, err)
		}
		defer ns.Close()
		target = ns
	}
	sock, err := nl.GetNetlinkSocketAt(target, netns.None(), unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink socket in host network namespace %q: %w", h.NetNS, err)
	}
	return sock, nil
}

// sendRouteBatch sends ops in one message and fills errs (one per op) from the kernel's answers.
func sendRouteBatch(sock *nl.NetlinkSocket, ops []routeOp, errs []error) error {
	var buf []byte
	first := uint32(0)
	for i, op := range ops {
		req := routeRequest(op, i == len(ops)-1)
		if i == 0 {
			first = req.Seq
		}
		req.Seq = first + uint32(i)
		buf = append(buf, req.Serialize()...)
	}
	last := first + uint32(len(ops)-1)
	if err := unix.Sendto(sock.GetFd(), buf, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("sending %d route requests: %w", len(ops), err)
	}
	native := nl.NativeEndian()
	for {
		msgs, _, err := sock.Receive()
		if err != nil {
			return fmt.Errorf("reading the answers to %d route requests: %w", len(ops), err)
		}
		for _, m := range msgs {
			if m.Header.Type != unix.NLMSG_ERROR || len(m.Data) < 4 || m.Header.Seq < first || m.Header.Seq > last {
				continue
			}
			if errno := -int32(native.Uint32(m.Data[:4])); errno != 0 {
				errs[m.Header.Seq-first] = syscall.Errno(errno)
			}
			if m.Header.Seq == last {
				return nil
			}
		}
	}
}

// routeRequest builds the RTM_NEWROUTE (replace) or RTM_DELROUTE request of op; ack asks for
// an acknowledgement even when it succeeds.
func routeRequest(op routeOp, ack bool) *nl.NetlinkRequest {
	r := op.route
	typ, flags, msg := unix.RTM_NEWROUTE, unix.NLM_F_CREATE|unix.NLM_F_REPLACE, nl.NewRtMsg()
	if op.del {
		typ, flags, msg = unix.RTM_DELROUTE, 0, nl.NewRtDelMsg()
	} else {
		msg.Scope = uint8(r.Scope)
		msg.Flags = uint32(r.Flags)
	}
	if ack {
		flags |= unix.NLM_F_ACK
	}
	req := nl.NewNetlinkRequest(typ, flags)
	msg.Family = uint8(r.Family)
	msg.Protocol = uint8(RouteProtocol)
	ones, _ := r.Dst.Mask.Size()
	msg.Dst_len = uint8(ones)
	req.AddData(msg)
	if r.Dst != nil {
		req.AddData(nl.NewRtAttr(unix.RTA_DST, addrBytes(r.Dst.IP, r.Family)))
	}
	if r.Gw != nil {
		req.AddData(nl.NewRtAttr(unix.RTA_GATEWAY, addrBytes(r.Gw, r.Family)))
	}
	if r.LinkIndex != 0 {
		req.AddData(nl.NewRtAttr(unix.RTA_OIF, nl.Uint32Attr(uint32(r.LinkIndex))))
	}
	return req
}

// addrBytes is ip in the length of its family.
func addrBytes(ip net.IP, family int) []byte {
	if family == unix.AF_INET {
		return ip.To4()
	}
	return ip.To16()
}

// errIgnorable reports whether a failed delete only found the route already gone.
func errIgnorable(op routeOp, err error) bool { return op.del && errors.Is(err, unix.ESRCH) }
