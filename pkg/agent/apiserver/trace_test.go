package apiserver

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver/apiv1"
)

// errTracer fails every trace with err.
type errTracer struct{ err error }

func (e errTracer) Trace(context.Context, apiv1.TraceRequest) (apiv1.Trace, error) {
	return apiv1.Trace{}, e.err
}

// TestTraceStatuses: no tracer and a tracer that is not ready answer 503, an unknown source
// 404, a bad query 400, any other failure 500; errors keep their message.
func TestTraceStatuses(t *testing.T) {
	const q = "/v1/trace?from=node&to=10.96.0.10:80"
	for _, tc := range []struct {
		name   string
		tracer TraceSource
		path   string
		code   int
		msg    string
	}{
		{"no tracer", nil, q, http.StatusServiceUnavailable, "tracing needs AntreaProxy and the node data path"},
		{"not started", errTracer{TraceUnavailable(errors.New("the node data path has not started yet"))}, q, http.StatusServiceUnavailable, "has not started yet"},
		{"unknown pod", errTracer{TraceNotFound(errors.New("pod a/b: not found on this node"))}, "/v1/trace?from=pod:a/b&to=10.96.0.10:80", http.StatusNotFound, "pod a/b: not found on this node"},
		{"bad query", errTracer{nil}, "/v1/trace?from=pod:a&to=10.96.0.10", http.StatusBadRequest, `from "pod:a": a pod is pod:NAMESPACE/NAME; to "10.96.0.10"`},
		{"failure", errTracer{errors.New("ambiguous flows")}, q, http.StatusInternalServerError, "tracing from node to 10.96.0.10:80/TCP: ambiguous flows"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sock := filepath.Join(t.TempDir(), "a.sock")
			start(t, Options{Config: testConfig(t, sock), Trace: tc.tracer})
			code, body, ctype := get(t, unixClient(sock), "http://agent"+tc.path)
			requireJSONError(t, code, body, ctype, tc.code, tc.msg)
		})
	}
}
