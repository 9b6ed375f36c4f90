package proxy

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/observe"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/tracker"
)

// syncResult describes the sync that started at start for an observe.Observer (metrics,
// health checks). Call it on the sync goroutine, after the installed state was committed or,
// on failure, left alone; computed holds every Service the sync recomputed (nil or empty = gone).
func (p *Proxier) syncResult(start time.Time, full bool, drained tracker.Drained, computed map[types.NamespacedName][]desired, err error) observe.SyncResult {
	flows, groups := p.installedCounts()
	res := observe.SyncResult{
		Start:           start,
		Duration:        p.opts.Clock.Since(start),
		Err:             err,
		Full:            full,
		ServiceChanges:  len(drained.ServiceChanges),
		EndpointChanges: drained.DirtyEndpoints.Len(),
		TriggerTimes:    drained.TriggerTimes,
		Flows:           flows,
		Groups:          groups,
		NodeAddresses:   p.nodeConfig().NodePortAddresses,
	}
	if err != nil {
		return res
	}
	res.Services = make(map[types.NamespacedName]*observe.ServiceSummary, len(computed))
	for nn, want := range computed {
		ports := make([]observe.PortEndpoints, 0, len(want))
		for _, d := range want {
			ports = append(ports, observe.PortEndpoints{Port: d.port, IPv6: d.ipv6, Endpoints: d.endpoints})
		}
		res.Services[nn] = observe.Summarize(ports)
	}
	return res
}
