package agent

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/antrea-proxy/antrea-proxy/pkg/proxy"
)

// serviceEvents reports the proxier's problems with a Service (OVS rejected its flows, another
// Service holds its match) as Warning Events on that Service, from "antrea-agent" on this node.
type serviceEvents struct {
	recorder record.EventRecorder
}

// NewServiceEvents returns the proxier's event sink: a broadcaster writing to the API server
// until ctx is done.
func NewServiceEvents(ctx context.Context, client kubernetes.Interface, node string) proxy.EventSink {
	return &serviceEvents{recorder: newEventRecorder(ctx, client, node)}
}

// newEventRecorder returns a recorder of events from "antrea-agent" on node, written to the API
// server until ctx is done.
func newEventRecorder(ctx context.Context, client kubernetes.Interface, node string) record.EventRecorder {
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartStructuredLogging(0)
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	go func() {
		<-ctx.Done()
		b.Shutdown()
	}()
	return b.NewRecorder(scheme.Scheme, v1.EventSource{Component: "antrea-agent", Host: node})
}

// Warning records a Warning Event on the Service svc.
func (e *serviceEvents) Warning(svc types.NamespacedName, reason, message string) {
	ref := &v1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: svc.Namespace, Name: svc.Name}
	e.recorder.Event(ref, v1.EventTypeWarning, reason, message)
}
