package framework

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver/apiv1"
)

// This file holds the helpers of the tenant-safety tests (test/e2e/tenant_*_test.go): a peer
// host on the underlay that owns addresses a Service may claim, TCP echo listeners that count
// what reached them, static routes that send a test range to such a peer, and servicemap
// conditions on a Service's Problem.

// AddPeer attaches a peer host to the underlay: a namespace called NSPrefix+role with underlay
// address ip (like AddExternalClient) that also owns extra (on its loopback), so that the nodes
// reach extra through it once a test routes them there (Node.RouteVia). role must be at most 7
// characters; the namespace is removed with the sandbox.
func (s *Sandbox) AddPeer(role string, ip netip.Addr, extra ...netip.Addr) (*NetNS, error) {
	ns, err := s.AddExternalClient(role, ip)
	if err != nil {
		return nil, err
	}
	for _, a := range extra {
		bits := 32
		if a.Is6() {
			bits = 128
		}
		if err := ns.MustExec([]string{"ip", "addr", "add", fmt.Sprintf("%s/%d", a, bits), "dev", "lo"}); err != nil {
			return nil, err
		}
	}
	return ns, nil
}

// RouteVia makes the node's host route dst through via (a neighbour on the underlay): how a
// test sends one of its address ranges to a peer it created. A more specific route the agent
// installs takes precedence while it exists.
func (n *Node) RouteVia(dst netip.Prefix, via netip.Addr) error {
	return n.NS.MustExec([]string{"ip", "route", "replace", dst.String(), "via", via.String()})
}

// EchoListener is a TCP echo server of the test process inside a namespace: it answers every
// connection with "<Name> <client ip:port>\n" (what NetNS.Echo parses) and counts them, so a
// test can tell whether a connection reached it at all.
type EchoListener struct {
	Name string
	Addr string
	l    net.Listener
	n    atomic.Int64
	wg   sync.WaitGroup
}

// ServeEcho listens on addr (TCP) inside ns and answers as name until Close.
func ServeEcho(ns *NetNS, name, addr string) (*EchoListener, error) {
	l, err := ns.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	e := &EchoListener{Name: name, Addr: addr, l: l}
	e.wg.Add(1)
	go e.serve()
	return e, nil
}

func (e *EchoListener) serve() {
	defer e.wg.Done()
	for {
		c, err := e.l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		e.n.Add(1)
		_, _ = fmt.Fprintf(c, "%s %s\n", e.Name, c.RemoteAddr())
		_ = c.Close()
	}
}

// Accepted is the number of connections that reached the listener.
func (e *EchoListener) Accepted() int64 { return e.n.Load() }

// Close stops the listener and waits for its loop to end.
func (e *EchoListener) Close() error {
	err := e.l.Close()
	e.wg.Wait()
	return err
}

// HasProblem is a WaitProgrammed condition: every row shows a Problem with one of reasons.
func HasProblem(reasons ...string) func(rows []apiv1.ServicePort) (bool, string) {
	want := strings.Join(reasons, " or ")
	return func(rows []apiv1.ServicePort) (bool, string) {
		for _, r := range rows {
			if r.Problem == nil {
				return false, fmt.Sprintf("port %s/%s (%s) shows no problem, want %s", r.PortName, r.Protocol, r.IPFamily, want)
			}
			if !slices.Contains(reasons, r.Problem.Reason) {
				return false, fmt.Sprintf("port %s/%s (%s) shows problem %s (%s), want %s", r.PortName, r.Protocol, r.IPFamily, r.Problem.Reason, r.Problem.Message, want)
			}
		}
		return true, ""
	}
}

// NoProblem is a WaitProgrammed condition: no row shows a Problem.
func NoProblem() func(rows []apiv1.ServicePort) (bool, string) {
	return func(rows []apiv1.ServicePort) (bool, string) {
		var bad []string
		for _, r := range rows {
			if r.Problem != nil {
				bad = append(bad, fmt.Sprintf("port %s/%s (%s): %s: %s", r.PortName, r.Protocol, r.IPFamily, r.Problem.Reason, r.Problem.Message))
			}
		}
		return len(bad) == 0, strings.Join(bad, "; ")
	}
}

// ServiceHolding returns the namespace/name of a Service that holds ip as a ClusterIP, "" when
// none does: a test checks that the address it probes as unallocated is.
func (s *Sandbox) ServiceHolding(ctx context.Context, ip netip.Addr) (string, error) {
	list, err := s.CP.Client.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("listing Services: %w", err)
	}
	for _, svc := range list.Items {
		for _, c := range svc.Spec.ClusterIPs {
			if a, err := netip.ParseAddr(c); err == nil && a == ip {
				return svc.Namespace + "/" + svc.Name, nil
			}
		}
	}
	return "", nil
}

// ServeOutsideOn makes the router own ips (on its loopback) and answer on each of them on port
// (TCP and UDP) as OutsideName, one echo server per address (so that UDP answers come from
// the address asked): a connection to one of ips on port that a node did not capture is routed
// to the router (the nodes' default gateway) and answered there, so a probe sees that it left
// the node. The servers stop with the sandbox.
func (s *Sandbox) ServeOutsideOn(port int, ips ...netip.Addr) error {
	procs := make([]*process, len(ips))
	for i, ip := range ips {
		if err := s.Net.AddRouterAddress(ip); err != nil {
			return err
		}
		p, err := s.startInNS(fmt.Sprintf("outside-%s-%d", ip, port), s.Net.Router, filepath.Join(s.Bins.Dir, "echoserver"),
			"-name", OutsideName, "-listen", ip.String(), "-port", strconv.Itoa(port), "-http-port", "0")
		if err != nil {
			return err
		}
		procs[i] = p
	}
	for i, ip := range ips {
		addr := net.JoinHostPort(ip.String(), strconv.Itoa(port))
		err := waitReady(procs[i], 30*time.Second, "the outside echo server to answer on "+addr, func(ctx context.Context) (bool, string) {
			r, err := s.Net.Router.Echo(ctx, "udp", addr, 2*time.Second)
			if err != nil {
				return false, err.Error()
			}
			return r.Server == OutsideName, "answered by " + r.Server
		})
		if err != nil {
			return err
		}
	}
	return nil
}
