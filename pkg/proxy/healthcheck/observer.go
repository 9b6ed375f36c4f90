package healthcheck

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/observe"
)

// serviceObserver feeds a ServiceHealthServer from the proxier's sync results. Results carry
// only the Services a sync recomputed, so it keeps the full picture.
type serviceObserver struct {
	srv *ServiceHealthServer

	mu     sync.Mutex
	ports  map[types.NamespacedName]uint16
	counts map[types.NamespacedName]int
}

// Observer returns a observe.Observer that keeps s in step with the proxier: after every
// successful sync it applies the node addresses, the health check NodePorts and the local ready
// endpoint counts (which also retries ports that could not be opened before).
func (s *ServiceHealthServer) Observer() observe.Observer {
	return &serviceObserver{srv: s, ports: map[types.NamespacedName]uint16{}, counts: map[types.NamespacedName]int{}}
}

func (o *serviceObserver) QueuedUpdate()        {}
func (o *serviceObserver) NodeUpdated(*v1.Node) {}

func (o *serviceObserver) SyncDone(r observe.SyncResult) {
	if r.Err != nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for nn, sum := range r.Services {
		if sum == nil || sum.HealthCheckNodePort == 0 {
			delete(o.ports, nn)
			delete(o.counts, nn)
			continue
		}
		o.ports[nn] = sum.HealthCheckNodePort
		o.counts[nn] = sum.LocalReady
	}
	// Errors are logged and reported through OnListenError by the server.
	_ = o.srv.sync(r.NodeAddresses, o.ports, o.counts)
}
