package protocol

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// HTTPPath is the URL path of the CNI endpoint on the agent's socket.
const HTTPPath = "/v1/cni"

// maxBody bounds request and response bodies.
const maxBody = 1 << 20

// Handler answers CNI requests in the agent.
type Handler interface {
	Handle(ctx context.Context, req Request) Response
}

// ErrUnreachable wraps every error of Call that means the agent did not get the request: no
// socket, connection refused, connection failure.
var ErrUnreachable = errors.New("antrea-agent unreachable")

// Call sends req to the agent listening on socketPath and returns its response.
func Call(ctx context.Context, socketPath string, req Request) (*Response, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encoding CNI request: %w", err)
	}
	client := &http.Client{Transport: unixTransport(socketPath)}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://antrea-agent"+HTTPPath, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("building CNI request: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hresp, err := client.Do(hreq)
	if err != nil {
		var opErr *net.OpError
		if errors.As(err, &opErr) && opErr.Op == "dial" {
			return nil, fmt.Errorf("%w at %s: %v", ErrUnreachable, socketPath, err)
		}
		return nil, fmt.Errorf("calling antrea-agent at %s: %w", socketPath, err)
	}
	defer hresp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(hresp.Body, maxBody))
	if err != nil {
		return nil, fmt.Errorf("reading antrea-agent response: %w", err)
	}
	if hresp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("antrea-agent answered HTTP %d: %s", hresp.StatusCode, bytes.TrimSpace(data))
	}
	var resp Response
	if err := json.Unmarshal(data, &resp); err != nil {
		return nil, fmt.Errorf("decoding antrea-agent response: %w", err)
	}
	return &resp, nil
}

// unixTransport is an HTTP transport that connects to a unix socket whatever the URL says.
func unixTransport(socketPath string) *http.Transport {
	return &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socketPath)
		},
		DisableKeepAlives: true,
	}
}

// NewHTTPHandler serves h at HTTPPath.
func NewHTTPHandler(h Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(HTTPPath, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		var req Request
		dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
		var resp Response
		if err := dec.Decode(&req); err != nil {
			resp = Response{Error: NewError(ErrDecodingFailure, "decoding CNI request", err.Error())}
		} else {
			resp = h.Handle(r.Context(), req)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(resp)
	})
	return mux
}

// Listen opens the unix socket at path, replacing a stale socket file left by an earlier run,
// and makes it accessible to root only.
func Listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("creating directory of CNI socket %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("removing stale CNI socket %s: %w", path, err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listening on CNI socket %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("restricting CNI socket %s: %w", path, err)
	}
	return l, nil
}

// Serve answers requests on l with h until ctx is done, then shuts down gracefully (in-flight
// requests get up to 30 s).
func Serve(ctx context.Context, l net.Listener, h Handler) error {
	srv := &http.Server{Handler: NewHTTPHandler(h), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	err := srv.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		<-done
		return nil
	}
	return err
}
