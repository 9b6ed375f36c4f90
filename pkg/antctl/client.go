// Package antctl is the antctl command line: it reads antrea-agent's local API (a unix socket,
// or optionally a loopback TCP listener with a bearer token) and prints what the agent
// programmed, following kubectl's output conventions. cmd/antctl only calls Main.
package antctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver/apiv1"
)

// ClientOptions say how to reach the agent.
type ClientOptions struct {
	// Socket is the agent's unix socket; used unless Server is set.
	Socket string
	// Server is the agent's TCP listener ("127.0.0.1:10350" or "http://127.0.0.1:10350").
	Server string
	// TokenFile holds the bearer token for Server.
	TokenFile string
	// Timeout bounds each request; 0 means 10s.
	Timeout time.Duration
}

// Client reads the agent API.
type Client struct {
	http   *http.Client
	base   string
	target string // "socket <path>" or "server <addr>", for error messages
	token  string
}

// NewClient returns a client for the agent described by o.
func NewClient(o ClientOptions) (*Client, error) {
	timeout := o.Timeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	if o.Server != "" {
		base := o.Server
		if !strings.Contains(base, "://") {
			base = "http://" + base
		}
		u, err := url.Parse(base)
		if err != nil || u.Scheme != "http" || u.Host == "" {
			return nil, fmt.Errorf("--server %q: want host:port or http://host:port", o.Server)
		}
		if o.TokenFile == "" {
			return nil, errors.New("--server needs --token-file: the agent's TCP listener requires a bearer token")
		}
		data, err := os.ReadFile(o.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("reading the token file: %w", err)
		}
		tok := strings.TrimSpace(string(data))
		if tok == "" {
			return nil, fmt.Errorf("token file %s is empty", o.TokenFile)
		}
		return &Client{http: &http.Client{Timeout: timeout}, base: strings.TrimRight(u.String(), "/"),
			target: "server " + u.Host, token: tok}, nil
	}
	if o.Socket == "" {
		return nil, errors.New("no agent socket given (--socket)")
	}
	socket := o.Socket
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		DisableKeepAlives: true,
	}
	return &Client{http: &http.Client{Transport: tr, Timeout: timeout}, base: "http://antrea-agent", target: "socket " + socket}, nil
}

// UnreachableError is returned when the agent cannot be reached at all.
type UnreachableError struct {
	Target string // "socket <path>" or "server <addr>"
	Err    error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach antrea-agent: is antrea-agent running? %s: %s", e.Target, rootCause(e.Err))
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// rootCause names the system error behind a failed dial ("permission denied", "connection
// refused", ...) rather than Go's whole wrapping chain.
func rootCause(err error) string {
	var se *os.SyscallError
	if errors.As(err, &se) {
		return se.Err.Error()
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Err.Error()
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}

// APIError is an error answer of the agent.
type APIError struct {
	Code    int
	Reason  string
	Message string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("agent API (%s): %s", e.Reason, e.Message)
}

// Get fetches path with the query q and decodes the JSON answer into out.
func (c *Client) Get(ctx context.Context, path string, q url.Values, out any) error {
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return &UnreachableError{Target: c.target, Err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return &UnreachableError{Target: c.target, Err: err}
	}
	if resp.StatusCode != http.StatusOK {
		var e apiv1.Error
		if json.Unmarshal(body, &e) == nil && e.Message != "" {
			return &APIError{Code: e.Code, Reason: e.Reason, Message: e.Message}
		}
		return &APIError{Code: resp.StatusCode, Reason: http.StatusText(resp.StatusCode), Message: strings.TrimSpace(string(body))}
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("decoding the agent's answer to %s: %w", path, err)
	}
	return nil
}
