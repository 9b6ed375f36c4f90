package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver/apiv1"
)

// serveAgentAPI serves h on a unix socket, as the agent does, and returns an AgentAPI for it.
func serveAgentAPI(t *testing.T, h http.HandlerFunc) *AgentAPI {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "agent.sock")
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return newAgentAPI(sock)
}

// TestAgentAPILargeServiceMap: the servicemap of 30,000 Services is about 25 MB; the client
// used to cut answers at 8 MiB, so a scale run could never see the agent's Services.
func TestAgentAPILargeServiceMap(t *testing.T) {
	const n = 15000 // about 12 MB of items
	m := apiv1.ServiceMap{Kind: "ServiceMap", APIVersion: apiv1.APIVersion}
	for i := range n {
		m.Items = append(m.Items, apiv1.ServicePort{Namespace: "bench", Name: fmt.Sprintf("svc-%05d-%s", i, strings.Repeat("x", 700))})
	}
	body, err := json.Marshal(m)
	require.NoError(t, err)
	require.Greater(t, len(body), 8<<20)
	api := serveAgentAPI(t, func(w http.ResponseWriter, _ *http.Request) { w.Write(body) })

	got, err := api.ServiceMap(context.Background(), "bench", "")
	require.NoError(t, err)
	require.Len(t, got.Items, n)
}

// TestAgentAPIErrorsQuoteLittle: a broken answer is reported with its size and its first
// bytes, not all of it.
func TestAgentAPIErrorsQuoteLittle(t *testing.T) {
	body := `{"kind": "ServiceMap", "items": [` + strings.Repeat(`{"name": "x"},`, 10000)
	api := serveAgentAPI(t, func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(body)) })
	_, err := api.ServiceMap(context.Background(), "bench", "")
	require.Error(t, err)
	require.Contains(t, err.Error(), fmt.Sprintf("decoding %d bytes", len(body)))
	require.Less(t, len(err.Error()), 2*errorBodyQuote)
}

// TestAgentAPITimeouts: a call without a deadline still ends after the client's timeout
// (defaultAPITimeout; 100 ms here); a call with its own deadline may take longer than that.
func TestAgentAPITimeouts(t *testing.T) {
	delay := make(chan time.Duration, 2)
	api := serveAgentAPI(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(<-delay):
			w.Write([]byte(`{"kind": "AgentInfo"}`))
		case <-r.Context().Done():
		}
	})
	api.timeout = 100 * time.Millisecond
	delay <- time.Minute
	_, err := api.AgentInfo(context.Background())
	require.ErrorIs(t, err, context.DeadlineExceeded)

	delay <- 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	info, err := api.AgentInfo(ctx)
	require.NoError(t, err)
	require.Equal(t, "AgentInfo", info.Kind)
}
