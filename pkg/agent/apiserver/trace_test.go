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

// blockingTracer holds every trace until release is closed.
type blockingTracer struct{ started, release chan struct{} }

func (b blockingTracer) Trace(context.Context, apiv1.TraceRequest) (apiv1.Trace, error) {
	b.started <- struct{}{}
	<-b.release
	return apiv1.Trace{Kind: "Trace"}, nil
}

// TestTraceOneAtATime: while a trace runs, another request is answered 503 at once; once it is
// done the next one runs.
func TestTraceOneAtATime(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "a.sock")
	b := blockingTracer{started: make(chan struct{}), release: make(chan struct{})}
	start(t, Options{Config: testConfig(t, sock), Trace: b})
	c := unixClient(sock)
	const u = "http://agent/v1/trace?from=node&to=10.96.0.10:80"
	first := make(chan int)
	go func() {
		resp, err := c.Get(u)
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	<-b.started
	code, body, ctype := get(t, c, u)
	requireJSONError(t, code, body, ctype, http.StatusServiceUnavailable, "1 trace(s) already running on this agent")
	close(b.release)
	if code := <-first; code != http.StatusOK {
		t.Fatalf("the first trace: %d", code)
	}
	go func() { <-b.started }()
	if code, body, _ := get(t, c, u); code != http.StatusOK {
		t.Fatalf("a trace after the first: %d %s", code, body)
	}
}
