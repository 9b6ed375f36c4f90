package agent

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver"
	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver/apiv1"
	"github.com/antrea-proxy/antrea-proxy/pkg/agent/servicetrace"
	"github.com/antrea-proxy/antrea-proxy/pkg/nodenet"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy"
)

var _ apiserver.TraceSource = (*traceSource)(nil)

// traceSource answers /v1/trace from what every writer of the bridge installed, as it
// remembers it (the healer replays the same): the proxier's flows and groups, the gateway's
// flows and the CNI server's pod flows. It never dumps OVS.
type traceSource struct {
	proxier *proxy.Proxier
	dp      *DataPath
	// started is set once the data path's Start returned: the gateway, the podCIDRs and the
	// CNI server are then set (and never change), and the store orders them before any read.
	started atomic.Bool
}

// newTraceSource returns the tracer of /v1/trace; nil when there is nothing to trace (no
// proxier or no node data path).
func newTraceSource(p *proxy.Proxier, dp *DataPath) *traceSource {
	if p == nil || dp == nil {
		return nil
	}
	return &traceSource{proxier: p, dp: dp}
}

// dataPathStarted records that the data path's Start returned.
func (t *traceSource) dataPathStarted() {
	if t != nil {
		t.started.Store(true)
	}
}

// Trace implements apiserver.TraceSource.
func (t *traceSource) Trace(_ context.Context, req apiv1.TraceRequest) (apiv1.Trace, error) {
	if !t.started.Load() || t.dp.CNIServer() == nil {
		return apiv1.Trace{}, apiserver.TraceUnavailable(errors.New("the node data path has not started yet"))
	}
	if _, syncs, _ := t.proxier.SyncState(); syncs == 0 {
		return apiv1.Trace{}, apiserver.TraceUnavailable(errors.New("the proxier has not installed its first sync yet"))
	}
	in, err := t.inputs()
	if err != nil {
		return apiv1.Trace{}, err
	}
	tr, err := servicetrace.Run(in, req)
	if errors.Is(err, servicetrace.ErrNotFound) {
		return apiv1.Trace{}, apiserver.TraceNotFound(err)
	}
	return tr, err
}

// inputs collects each writer's installed state. The writers are read one after the other,
// not atomically: a sync between two reads shows in the trace as it would on the bridge.
func (t *traceSource) inputs() (*servicetrace.Inputs, error) {
	d := t.dp
	cni := d.CNIServer()
	pods, err := cni.Pods()
	if err != nil {
		return nil, fmt.Errorf("reading the pods: %w", err)
	}
	flows, groups := t.proxier.InstalledState()
	flows = append(flows, d.installedGatewayFlows()...)
	flows = append(flows, cni.InstalledPodFlows()...)
	in := &servicetrace.Inputs{Flows: flows, Groups: groups, Services: t.proxier.Services(),
		Gateway:       servicetrace.Gateway{Name: d.gw.Name, OFPort: d.gw.OFPort, MAC: d.gw.MAC},
		NodeAddresses: append(t.proxier.NodePortAddresses(), d.nodePortVIPs...)}
	for _, a := range nodenet.GatewayAddresses(d.podCIDRs) {
		in.Gateway.IPs = append(in.Gateway.IPs, a.Addr())
	}
	for _, p := range pods {
		in.Pods = append(in.Pods, servicetrace.Pod{Namespace: p.Namespace, Name: p.Name, Interface: p.Interface,
			OFPort: p.OFPort, MAC: p.MAC, IPs: p.IPs})
	}
	return in, nil
}

// installedGatewayFlows are the gateway flows as installed: those of this round, which only
// Start and the healer's replay install (both from gatewayFlows).
func (d *DataPath) installedGatewayFlows() []openflow.Flow {
	d.gwFlows.mu.Lock()
	defer d.gwFlows.mu.Unlock()
	if d.gwFlows.installed < 0 {
		return nil
	}
	return d.gatewayFlows()
}
