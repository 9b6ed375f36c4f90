package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver/apiv1"
)

// TraceSource traces a packet through the agent's installed flows and groups (antctl trace).
// pkg/agent implements it with pkg/agent/servicetrace.
type TraceSource interface {
	Trace(ctx context.Context, req apiv1.TraceRequest) (apiv1.Trace, error)
}

// Errors a TraceSource wraps to choose the answer's status (any other error is a 500).
var (
	// ErrTraceNotFound: the request names something the node does not have (404).
	ErrTraceNotFound = errors.New("not found")
	// ErrTraceUnavailable: the agent cannot trace yet or at all (503).
	ErrTraceUnavailable = errors.New("unavailable")
)

// TraceNotFound returns err (its message unchanged) marked as ErrTraceNotFound.
func TraceNotFound(err error) error { return &traceError{err: err, kind: ErrTraceNotFound} }

// TraceUnavailable returns err (its message unchanged) marked as ErrTraceUnavailable.
func TraceUnavailable(err error) error { return &traceError{err: err, kind: ErrTraceUnavailable} }

type traceError struct{ err, kind error }

func (e *traceError) Error() string   { return e.err.Error() }
func (e *traceError) Unwrap() []error { return []error{e.err, e.kind} }

// MaxConcurrentTraces is how many traces the agent runs at once. A trace copies the installed
// flows and groups and builds a tracer over them (at 2,000 Services about 0.5 ms and 2 MB; it
// grows with the number of flows and groups): more requests while one runs are answered 503
// at once rather than queued.
const MaxConcurrentTraces = 1

// limitTraces returns src behind a semaphore of MaxConcurrentTraces; nil stays nil.
func limitTraces(src TraceSource) TraceSource {
	if src == nil {
		return nil
	}
	return &limitedTracer{src: src, sem: make(chan struct{}, MaxConcurrentTraces)}
}

type limitedTracer struct {
	src TraceSource
	sem chan struct{}
}

func (l *limitedTracer) Trace(ctx context.Context, req apiv1.TraceRequest) (apiv1.Trace, error) {
	select {
	case l.sem <- struct{}{}:
		defer func() { <-l.sem }()
		return l.src.Trace(ctx, req)
	default:
		return apiv1.Trace{}, TraceUnavailable(fmt.Errorf("%d trace(s) already running on this agent; try again when it is done", MaxConcurrentTraces))
	}
}

func (h *handlers) trace(r *http.Request) (any, *apiError) {
	if h.tracer == nil {
		return nil, errorf(http.StatusServiceUnavailable, "tracing needs AntreaProxy and the node data path, which this agent does not run")
	}
	q := r.URL.Query()
	req, err := apiv1.ParseTraceRequest(q.Get(apiv1.QueryFrom), q.Get(apiv1.QueryTo))
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "%v", err)
	}
	tr, err := h.tracer.Trace(r.Context(), req)
	switch {
	case errors.Is(err, ErrTraceNotFound):
		return nil, errorf(http.StatusNotFound, "%v", err)
	case errors.Is(err, ErrTraceUnavailable):
		return nil, errorf(http.StatusServiceUnavailable, "%v", err)
	case err != nil:
		return nil, errorf(http.StatusInternalServerError, "tracing from %s to %s: %v", req.From(), req.ToString(), err)
	}
	return tr, nil
}
