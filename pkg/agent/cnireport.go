package agent

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	"github.com/antrea-proxy/antrea-proxy/pkg/cni/server"
	"github.com/antrea-proxy/antrea-proxy/pkg/config"
)

// Reasons of the Warning Events the agent records on its Node about CNI state.
const (
	// EventCNIStateQuarantined: a pod record, spooled DEL or address reservation could not be
	// used and was moved into the CNI state directory's quarantine.
	EventCNIStateQuarantined = "CNIStateQuarantined"
	// EventCNIStateUnsaved: the disk is full; CNI state is kept in memory until it has room.
	EventCNIStateUnsaved = "CNIStateUnsaved"
)

// CNIReporting is where the CNI server's state problems go: Warning Events on the Node and
// metrics. Both may be nil.
type CNIReporting struct {
	Reporter server.Reporter
	Metrics  prometheus.Registerer
}

// wireCNIReporting sends the CNI server's reports to Node Events (with a client) and its
// metrics to the agent's registry. Call it before the data path starts.
func (c *Components) wireCNIReporting(ctx context.Context, cfg *config.AgentConfig, client kubernetes.Interface) {
	if c.DataPath == nil {
		return
	}
	c.DataPath.opts.CNI.Metrics = c.observers.metrics.Registry()
	if client != nil {
		c.DataPath.opts.CNI.Reporter = newNodeEvents(ctx, client, cfg.NodeName)
	}
}

// nodeEvents records the CNI server's reports as Warning Events on the agent's Node.
type nodeEvents struct {
	recorder record.EventRecorder
	node     *v1.ObjectReference
}

func newNodeEvents(ctx context.Context, client kubernetes.Interface, node string) *nodeEvents {
	return &nodeEvents{
		recorder: newEventRecorder(ctx, client, node),
		// As the kubelet's Node events: the UID is the Node's name.
		node: &v1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: node, UID: types.UID(node)},
	}
}

// Quarantined implements server.Reporter.
func (e *nodeEvents) Quarantined(q server.Quarantined) {
	where := "removed it (it could not be kept)"
	switch {
	case q.MovedTo != "":
		where = "moved it to " + q.MovedTo
	case q.LeftInPlace != "":
		where = "ignoring it, as it can be neither moved nor removed (" + q.LeftInPlace + ")"
	}
	e.recorder.Event(e.node, v1.EventTypeWarning, EventCNIStateQuarantined,
		fmt.Sprintf("unusable CNI %s %s (%s): %s; the other pods are served", q.Kind, q.File, q.Reason, where))
}

// StateUnsaved implements server.Reporter.
func (e *nodeEvents) StateUnsaved(err error) {
	e.recorder.Event(e.node, v1.EventTypeWarning, EventCNIStateUnsaved, err.Error())
}
