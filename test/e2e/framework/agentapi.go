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
}

func newAgentAPI(socket string) *AgentAPI {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		DisableKeepAlives: true,
	}
	return &AgentAPI{Socket: socket, client: &http.Client{Transport: tr, Timeout: 5 * time.Second}}
}

func (a *AgentAPI) get(ctx context.Context, path string, q url.Values, into any) error {
	u := "http://antrea-agent" + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return fmt.Errorf("agent API %s on %s: %w", path, a.Socket, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return fmt.Errorf("agent API %s on %s: %w", path, a.Socket, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("agent API %s on %s: HTTP %d: %s", path, a.Socket, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, into); err != nil {
		return fmt.Errorf("agent API %s on %s: decoding %q: %w", path, a.Socket, body, err)
	}
	return nil
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
