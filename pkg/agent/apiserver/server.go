// Package apiserver serves antrea-agent's local API, which antctl reads: HTTP with JSON on a unix
// socket that only root may use (mode 0600, owned by root, and every peer's credentials checked
// with SO_PEERCRED), plus an optional loopback-only TCP listener that requires a bearer token.
// The paths and their JSON schema are in package apiv1 and docs/antctl.md.
package apiserver

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver/apiv1"
	"github.com/antrea-proxy/antrea-proxy/pkg/config"
)

// Options configure a Server.
type Options struct {
	// Config is the agent's configuration in effect: APISocket, APITCPAddress and APITokenFile
	// select the listeners, and /v1/agentinfo shows it. Required.
	Config *config.AgentConfig
	// Services is the proxier; nil when AntreaProxy is disabled (its paths then answer 503).
	Services ServiceSource
	// OVS reports the OVS version and connection; may be nil.
	OVS OVSStatus
	// Livez serves /livez (the kubelet's liveness probe, no token needed), e.g.
	// healthcheck.ProxyHealth.LivezHandler(); nil answers 200 "ok" like /healthz.
	Livez http.Handler
	// Trace serves /v1/trace (antctl trace); nil answers 503.
	Trace TraceSource
}

// Server is a running agent API.
type Server struct {
	servers []*http.Server
	unix    *unixListener
	tcpAddr net.Addr
	wg      sync.WaitGroup
	once    sync.Once
}

// Start listens on the configured socket (and TCP address, if any) and serves in the
// background until ctx is done or Close is called. It fails when a listener cannot be created
// safely: another agent serves the socket, the path is not a socket, the TCP address is not
// loopback, or the token file is missing, empty or readable by others.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if opts.Config == nil {
		return nil, errors.New("agent API: no configuration given")
	}
	h := &handlers{cfg: opts.Config, services: opts.Services, ovs: opts.OVS, livez: opts.Livez, tracer: limitTraces(opts.Trace)}
	mux := h.mux()

	s := &Server{}
	var token []byte
	var tcpL net.Listener
	if addr := opts.Config.APITCPAddress; addr != "" {
		var err error
		if token, err = ReadTokenFile(opts.Config.APITokenFile); err != nil {
			return nil, fmt.Errorf("agent API TCP listener %s: %w", addr, err)
		}
		if tcpL, err = listenLoopback(addr); err != nil {
			return nil, err
		}
	}
	ul, err := listenUnix(opts.Config.APISocket)
	if err != nil {
		if tcpL != nil {
			tcpL.Close()
		}
		return nil, err
	}
	s.unix = ul
	s.serve(ul, &http.Server{Handler: requireRootPeer(mux), ConnContext: withPeerCred, ReadHeaderTimeout: 10 * time.Second})
	klog.InfoS("Serving the agent API", "socket", ul.path)
	if tcpL != nil {
		s.tcpAddr = tcpL.Addr()
		s.serve(tcpL, &http.Server{Handler: requireLoopbackBearer(mux, token), ReadHeaderTimeout: 10 * time.Second})
		klog.InfoS("Serving the agent API over TCP (loopback, bearer token)", "address", tcpL.Addr().String())
	}
	go func() {
		<-ctx.Done()
		s.Close()
	}()
	return s, nil
}

func (s *Server) serve(l net.Listener, srv *http.Server) {
	s.servers = append(s.servers, srv)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.ErrorS(err, "Agent API listener failed", "address", l.Addr().String())
		}
	}()
}

// SocketPath is the unix socket the server listens on.
func (s *Server) SocketPath() string { return s.unix.path }

// TCPAddr is the TCP listener's address, or nil when there is none.
func (s *Server) TCPAddr() net.Addr { return s.tcpAddr }

// Close stops serving, waits for the listeners to stop and removes the socket file.
func (s *Server) Close() {
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, srv := range s.servers {
			if err := srv.Shutdown(ctx); err != nil {
				_ = srv.Close()
			}
		}
		s.wg.Wait()
		s.unix.removeSocket()
	})
}

// listenLoopback listens on a TCP address whose host must be a loopback IP.
func listenLoopback(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("agent API TCP address %q: %w", addr, err)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.Unmap().IsLoopback() {
		return nil, fmt.Errorf("agent API TCP address %q: must be a loopback IP address (127.0.0.0/8 or ::1)", addr)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("agent API TCP listener: %w", err)
	}
	return l, nil
}

// requireLoopbackBearer refuses requests that do not come from a loopback address or lack
// "Authorization: Bearer <token>". /healthz and /livez, which only say whether the agent is
// healthy, need no token (the kubelet probes them).
func requireLoopbackBearer(next http.Handler, token []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ap, err := netip.ParseAddrPort(r.RemoteAddr)
		if err != nil || !ap.Addr().Unmap().IsLoopback() {
			writeError(w, http.StatusForbidden, "the agent API only serves loopback clients, not %s", r.RemoteAddr)
			return
		}
		if r.URL.Path == apiv1.PathHealthz || r.URL.Path == apiv1.PathLivez {
			next.ServeHTTP(w, r)
			return
		}
		scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), token) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="antrea-agent"`)
			writeError(w, http.StatusUnauthorized, "a valid \"Authorization: Bearer <token>\" header is required on the TCP listener")
			return
		}
		next.ServeHTTP(w, r)
	})
}
