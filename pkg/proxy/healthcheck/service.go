package healthcheck

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/httpserver"
)

// EventReason is the reason of the Warning event to record on a Service whose health check
// NodePort cannot be opened (kube-proxy's).
const EventReason = "FailedToStartServiceHealthcheck"

// ListenError says that a Service's health check NodePort could not be opened. Its Error() is
// suitable as an event message.
type ListenError struct {
	Node    string
	Service types.NamespacedName
	Port    uint16
	Err     error
}

func (e *ListenError) Error() string {
	return fmt.Sprintf("node %s failed to start healthcheck %q on port %d: %v", e.Node, e.Service.String(), e.Port, e.Err)
}

func (e *ListenError) Unwrap() error { return e.Err }

// ServiceOptions configure a ServiceHealthServer.
type ServiceOptions struct {
	// NodeName names this node in responses' logs and errors.
	NodeName string
	// Addresses are the node addresses to listen on; empty means all addresses. They can be
	// changed later with SyncNodeAddresses.
	Addresses []netip.Addr
	// ProxyHealthy, when set, is consulted on every request: an unhealthy proxier answers 503
	// even with local endpoints (kube-proxy does this too). Typically ProxyHealth.IsHealthy.
	ProxyHealthy func() bool
	// OnListenError is called for every health check NodePort that cannot be opened, e.g. to
	// record a Warning event (EventReason) on the Service. The port is retried at every
	// SyncServices call.
	OnListenError func(*ListenError)
	// Listen opens listeners; nil means net.Listen.
	Listen func(network, address string) (net.Listener, error)
	// Limiter gives every health check NodePort server its timeouts, and caps the connections
	// open at once on all of them together; nil means DefaultServiceLimiter().
	Limiter *httpserver.Limiter
}

// DefaultServiceMaxConnections caps the connections open at once on all of a node's health
// check NodePorts together, by default: load balancers' health checkers probe every Service's
// port from a few addresses each.
const DefaultServiceMaxConnections = 1024

// DefaultServiceLimiter returns the default limiter of the health check NodePorts: default
// timeouts, DefaultServiceMaxConnections.
func DefaultServiceLimiter() *httpserver.Limiter {
	lim, _ := httpserver.NewLimiter("service-healthcheck", httpserver.Limits{MaxConnections: DefaultServiceMaxConnections})
	return lim
}

// ServiceHealthServer serves the health check NodePorts of Services with
// externalTrafficPolicy=Local. It is safe for concurrent use.
type ServiceHealthServer struct {
	opts ServiceOptions

	mu        sync.Mutex
	addrs     []netip.Addr
	wanted    map[types.NamespacedName]uint16
	open      map[types.NamespacedName]*instance
	endpoints map[types.NamespacedName]int
}

// instance is one Service's open health check NodePort: one server per node address.
type instance struct {
	port      uint16
	servers   []*http.Server
	listeners []net.Listener
}

// NewServiceHealthServer returns a server with no Service.
func NewServiceHealthServer(opts ServiceOptions) *ServiceHealthServer {
	if opts.Listen == nil {
		opts.Listen = net.Listen
	}
	if opts.Limiter == nil {
		opts.Limiter = DefaultServiceLimiter()
	}
	return &ServiceHealthServer{
		opts:      opts,
		addrs:     slices.Clone(opts.Addresses),
		wanted:    map[types.NamespacedName]uint16{},
		open:      map[types.NamespacedName]*instance{},
		endpoints: map[types.NamespacedName]int{},
	}
}

// SyncServices makes the set of served Services exactly services (Service → health check
// NodePort): it closes the ports of Services that are gone or whose port changed and opens the
// missing ones. Ports that cannot be opened are reported (OnListenError, log, and the joined
// returned error of *ListenError) and retried by the next call.
func (s *ServiceHealthServer) SyncServices(services map[types.NamespacedName]uint16) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wanted = make(map[types.NamespacedName]uint16, len(services))
	for nn, port := range services {
		if port != 0 {
			s.wanted[nn] = port
		}
	}
	return s.reconcile()
}

// SyncEndpoints sets the number of ready local endpoints of each Service; Services absent
// from counts have none.
func (s *ServiceHealthServer) SyncEndpoints(counts map[types.NamespacedName]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endpoints = make(map[types.NamespacedName]int, len(counts))
	for nn, n := range counts {
		s.endpoints[nn] = n
	}
}

// SyncNodeAddresses changes the addresses to listen on (empty means all). When they change,
// every open port is closed and reopened on the new addresses.
func (s *ServiceHealthServer) SyncNodeAddresses(addrs []netip.Addr) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.setAddresses(addrs) {
		return nil
	}
	return s.reconcile()
}

// setAddresses records addrs and closes every open port when they changed; s.mu must be held.
func (s *ServiceHealthServer) setAddresses(addrs []netip.Addr) (changed bool) {
	if sameAddrs(s.addrs, addrs) {
		return false
	}
	klog.InfoS("Health check NodePort addresses changed; reopening ports", "old", s.addrs, "new", addrs, "services", len(s.open))
	for nn, inst := range s.open {
		inst.close()
		delete(s.open, nn)
	}
	s.addrs = slices.Clone(addrs)
	return true
}

// sync applies addresses, endpoint counts and Services in one step (for the Observer).
func (s *ServiceHealthServer) sync(addrs []netip.Addr, services map[types.NamespacedName]uint16, counts map[types.NamespacedName]int) error {
	s.SyncEndpoints(counts)
	s.mu.Lock()
	s.setAddresses(addrs)
	s.mu.Unlock()
	return s.SyncServices(services)
}

// Close closes every open port. Later Sync calls open them again.
func (s *ServiceHealthServer) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for nn, inst := range s.open {
		inst.close()
		delete(s.open, nn)
	}
}

// Ports returns the open health check NodePorts by Service.
func (s *ServiceHealthServer) Ports() map[types.NamespacedName]uint16 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[types.NamespacedName]uint16, len(s.open))
	for nn, inst := range s.open {
		out[nn] = inst.port
	}
	return out
}

// reconcile makes open match wanted; s.mu must be held.
func (s *ServiceHealthServer) reconcile() error {
	for nn, inst := range s.open {
		if port, ok := s.wanted[nn]; !ok || port != inst.port {
			klog.V(2).InfoS("Closing health check NodePort", "service", nn, "port", inst.port)
			inst.close()
			delete(s.open, nn)
		}
	}
	var errs []error
	for nn, port := range s.wanted {
		if s.open[nn] != nil {
			continue
		}
		inst, err := s.listen(nn, port)
		if err != nil {
			lerr := &ListenError{Node: s.opts.NodeName, Service: nn, Port: port, Err: err}
			klog.ErrorS(err, "Failed to open health check NodePort; will retry", "node", s.opts.NodeName, "service", nn, "port", port)
			if s.opts.OnListenError != nil {
				s.opts.OnListenError(lerr)
			}
			errs = append(errs, lerr)
			continue
		}
		klog.V(2).InfoS("Opened health check NodePort", "service", nn, "port", port)
		s.open[nn] = inst
	}
	return errors.Join(errs...)
}

// listen opens port on every address (or on all addresses); on any failure it closes what it
// opened.
func (s *ServiceHealthServer) listen(nn types.NamespacedName, port uint16) (*instance, error) {
	hosts := []string{""}
	if len(s.addrs) > 0 {
		hosts = hosts[:0]
		for _, a := range s.addrs {
			hosts = append(hosts, a.String())
		}
	}
	inst := &instance{port: port}
	h := s.handler(nn)
	for _, host := range hosts {
		addr := net.JoinHostPort(host, strconv.Itoa(int(port)))
		ln, err := s.opts.Listen("tcp", addr)
		if err != nil {
			inst.close()
			return nil, fmt.Errorf("listening on %s: %w", addr, err)
		}
		srv := s.opts.Limiter.Server(h)
		inst.servers = append(inst.servers, srv)
		inst.listeners = append(inst.listeners, ln)
		limited := s.opts.Limiter.Listener(ln)
		go func() {
			if err := srv.Serve(limited); err != nil && !errors.Is(err, http.ErrServerClosed) {
				klog.ErrorS(err, "Health check NodePort server stopped", "service", nn, "address", addr)
			}
		}()
	}
	return inst, nil
}

// close stops the servers and releases the ports before it returns (Serve may not have
// started yet, so the listeners are closed here too).
func (i *instance) close() {
	for _, srv := range i.servers {
		_ = srv.Close()
	}
	for _, ln := range i.listeners {
		_ = ln.Close()
	}
	i.servers, i.listeners = nil, nil
}

// serviceResponse is the body of a health check NodePort response (kube-proxy's fields).
type serviceResponse struct {
	Service struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"service"`
	LocalEndpoints      int  `json:"localEndpoints"`
	ServiceProxyHealthy bool `json:"serviceProxyHealthy"`
}

func (s *ServiceHealthServer) handler(nn types.NamespacedName) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		count := s.endpoints[nn]
		s.mu.Unlock()
		healthy := s.opts.ProxyHealthy == nil || s.opts.ProxyHealthy()
		var body serviceResponse
		body.Service.Namespace, body.Service.Name = nn.Namespace, nn.Name
		body.LocalEndpoints, body.ServiceProxyHealthy = count, healthy

		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("X-Load-Balancing-Endpoint-Weight", strconv.Itoa(count))
		if count > 0 && healthy {
			w.WriteHeader(http.StatusOK)
		} else {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		if err := json.NewEncoder(w).Encode(body); err != nil {
			klog.V(4).InfoS("Writing health check response failed", "service", nn, "err", err)
		}
	})
}

func sameAddrs(a, b []netip.Addr) bool {
	if len(a) != len(b) {
		return false
	}
	x, y := slices.Clone(a), slices.Clone(b)
	slices.SortFunc(x, netip.Addr.Compare)
	slices.SortFunc(y, netip.Addr.Compare)
	return slices.Equal(x, y)
}
