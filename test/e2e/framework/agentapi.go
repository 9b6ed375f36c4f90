package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver/apiv1"
)

// AgentAPI reads a node agent's API on its unix socket, as antctl does.
type AgentAPI struct {
	Socket string
	client *http.Client
	// timeout bounds a call whose context has no deadline (defaultAPITimeout).
	timeout time.Duration
}

func newAgentAPI(socket string) *AgentAPI {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		DisableKeepAlives: true,
	}
	return &AgentAPI{Socket: socket, client: &http.Client{Transport: tr}, timeout: defaultAPITimeout}
}

// Limits of one agent API call: a call whose context has no deadline gets defaultAPITimeout;
// a body may be up to maxAPIBody (the servicemap of 30,000 Services is about 25 MB), and an
// error quotes at most errorBodyQuote bytes of it.
const (
	defaultAPITimeout = 5 * time.Second
	maxAPIBody        = 1 << 30
	errorBodyQuote    = 512
)

func (a *AgentAPI) get(ctx context.Context, path string, q url.Values, into any) error {
	body, err := a.Bytes(ctx, path, q)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, into); err != nil {
		return fmt.Errorf("agent API %s on %s: decoding %d bytes %s: %w", path, a.Socket, len(body), quote(body), err)
	}
	return nil
}

// Bytes is GET path?q on the agent's socket: the body of a 200 answer (at most maxAPIBody), an
// error quoting the body of any other. A ctx without a deadline gets defaultAPITimeout.
func (a *AgentAPI) Bytes(ctx context.Context, path string, q url.Values) ([]byte, error) {
	u := "http://antrea-agent" + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, a.timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("agent API %s on %s: %w", path, a.Socket, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAPIBody+1))
	if err != nil {
		return nil, fmt.Errorf("agent API %s on %s: %w", path, a.Socket, err)
	}
	if len(body) > maxAPIBody {
		return nil, fmt.Errorf("agent API %s on %s: the answer is larger than %d bytes", path, a.Socket, maxAPIBody)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("agent API %s on %s: HTTP %d: %s", path, a.Socket, resp.StatusCode, quote(body))
	}
	return body, nil
}

// AgentInfo is GET /v1/agentinfo.
func (a *AgentAPI) AgentInfo(ctx context.Context) (*apiv1.AgentInfo, error) {
	var info apiv1.AgentInfo
	if err := a.get(ctx, apiv1.PathAgentInfo, nil, &info); err != nil {
		return nil, err
	}
	return &info, nil
}

// ServiceMap is GET /v1/servicemap for one Service (every Service when name is "").
func (a *AgentAPI) ServiceMap(ctx context.Context, namespace, name string) (*apiv1.ServiceMap, error) {
	q := url.Values{}
	if namespace == "" {
		q.Set(apiv1.QueryAll, "true")
	} else {
		q.Set(apiv1.QueryNamespace, namespace)
		if name != "" {
			q.Set(apiv1.QueryName, name)
		}
	}
	var m apiv1.ServiceMap
	if err := a.get(ctx, apiv1.PathServiceMap, q, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// quote is body for an error message: quoted, and cut after errorBodyQuote bytes.
func quote(body []byte) string {
	if len(body) <= errorBodyQuote {
		return fmt.Sprintf("%q", body)
	}
	return fmt.Sprintf("%q… (%d more bytes)", body[:errorBodyQuote], len(body)-errorBodyQuote)
}
