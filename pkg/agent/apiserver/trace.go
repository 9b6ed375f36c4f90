package apiserver

import (
	"context"
	"errors"
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
