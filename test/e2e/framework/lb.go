package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"time"
)

// ProxyLB is one l4proxy (test/e2e/l4proxy) in the router namespace: it owns IP:Port (TCP and
// UDP) and relays every connection to Target, a node's NodePort, as an external load balancer
// in ipMode Proxy does.
type ProxyLB struct {
	IP     netip.Addr
	Port   int
	Target string
	stats  string
	router *NetNS
	proc   *process
}

// ProxyStats are the connections (TCP) and datagrams (UDP) an l4proxy relayed.
type ProxyStats struct {
	TCP int64 `json:"tcp"`
	UDP int64 `json:"udp"`
}

// StartProxyLB makes the router own ip and runs an l4proxy on ip:port relaying to target
// ("nodeIP:nodePort"). It is stopped (and the address removed) when the sandbox stops, or by
// Stop.
func (s *Sandbox) StartProxyLB(ip netip.Addr, port int, target string) (*ProxyLB, error) {
	if err := s.Net.AddRouterAddress(ip); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.lbSeq++
	statsAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(9100+s.lbSeq))
	s.mu.Unlock()
	name := fmt.Sprintf("l4proxy-%s-%d", ip, port)
	listen := net.JoinHostPort(ip.String(), strconv.Itoa(port))
	p, err := s.startInNS(name, s.Net.Router, filepath.Join(s.Bins.Dir, "l4proxy"),
		"-listen", listen, "-to", target, "-proto", "both", "-stats", statsAddr)
	if err != nil {
		return nil, err
	}
	lb := &ProxyLB{IP: ip, Port: port, Target: target, stats: statsAddr, router: s.Net.Router, proc: p}
	err = waitReady(p, 30*time.Second, "l4proxy "+name+" to serve its stats on "+statsAddr, func(ctx context.Context) (bool, string) {
		if _, err := lb.Stats(ctx); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	if err != nil {
		return nil, err
	}
	return lb, nil
}

// Stats reads the relay counts.
func (lb *ProxyLB) Stats(ctx context.Context) (ProxyStats, error) {
	body, err := lb.router.HTTPGet(ctx, "http://"+lb.stats+"/stats")
	if err != nil {
		return ProxyStats{}, err
	}
	var st ProxyStats
	if err := json.Unmarshal(body, &st); err != nil {
		return ProxyStats{}, fmt.Errorf("l4proxy %s:%d stats %q: %w", lb.IP, lb.Port, body, err)
	}
	return st, nil
}

// Stop ends the l4proxy. The router keeps the address, so that later connections to it are
// refused rather than routed elsewhere.
func (lb *ProxyLB) Stop() { lb.proc.Stop() }

// Outside is an echo server named "outside" in the router namespace, standing for the world
// beyond the nodes: it owns IP and answers on Port (TCP and UDP). A connection it answers left
// the node it came from.
type Outside struct {
	IP   netip.Addr
	Port int
	s    *Sandbox
	proc *process
}

// OutsideName is the name the Outside echo server answers with.
const OutsideName = "outside"

// StartOutside makes the router own ip and answer on ip:port as "outside".
func (s *Sandbox) StartOutside(ip netip.Addr, port int) (*Outside, error) {
	if err := s.Net.AddRouterAddress(ip); err != nil {
		return nil, err
	}
	name := fmt.Sprintf("outside-%s-%d", ip, port)
	p, err := s.startInNS(name, s.Net.Router, filepath.Join(s.Bins.Dir, "echoserver"),
		"-name", OutsideName, "-listen", ip.String(), "-port", strconv.Itoa(port), "-http-port", "0")
	if err != nil {
		return nil, err
	}
	o := &Outside{IP: ip, Port: port, s: s, proc: p}
	addr := net.JoinHostPort(ip.String(), strconv.Itoa(port))
	err = waitReady(p, 30*time.Second, "the outside echo server to answer on "+addr, func(ctx context.Context) (bool, string) {
		r, err := s.Net.Router.Echo(ctx, "tcp", addr, 2*time.Second)
		if err != nil {
			return false, err.Error()
		}
		return r.Server == OutsideName, "answered by " + r.Server
	})
	if err != nil {
		return nil, err
	}
	return o, nil
}

// Stop ends the server and gives the address up.
func (o *Outside) Stop() error {
	o.proc.Stop()
	return o.s.Net.RemoveRouterAddress(o.IP)
}
