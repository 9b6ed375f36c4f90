package antctl

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver"
	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver/apiv1"
	"github.com/antrea-proxy/antrea-proxy/pkg/agent/servicetrace"
	st "github.com/antrea-proxy/antrea-proxy/pkg/agent/servicetrace/servicetracetest"
)

// traceNode serves /v1/trace with the real tracer over a node's installed flows (as the agent's
// TraceSource does, from servicetracetest's proxier, gateway and pods).
type traceNode struct{ in *servicetrace.Inputs }

func (n traceNode) Trace(_ context.Context, req apiv1.TraceRequest) (apiv1.Trace, error) {
	tr, err := servicetrace.Run(n.in, req)
	if errors.Is(err, servicetrace.ErrNotFound) {
		return tr, apiserver.TraceNotFound(err)
	}
	return tr, err
}

// TestGoldenTrace traces, through antctl → socket → agent API → tracer, a connection that
// reaches an endpoint and each kind of connection that does not, in every output format.
func TestGoldenTrace(t *testing.T) {
	proxyMode := v1.LoadBalancerIPModeProxy
	in := st.NewNode(t, true).Add(
		st.Service("web", "10.96.0.10"), st.Slice("web", []string{st.Endpoint1IP}, st.RemoteEndpoint),
		st.Service("empty", "10.96.0.20"),
		st.Service("proxied", "10.96.0.21", st.LoadBalancer("172.18.0.21", &proxyMode)), st.Slice("proxied", nil, st.RemoteEndpoint),
		st.Service("local", "10.96.0.22", st.NodePort(30022), st.ExternalLocal), st.Slice("local", nil, st.RemoteEndpoint),
		st.Service("ranged", "10.96.0.23", st.LoadBalancer("172.18.0.23", nil), st.SourceRanges("203.0.113.0/24")), st.Slice("ranged", nil, st.RemoteEndpoint),
	).Inputs()
	sock := startAgentWith(t, apiserver.Options{Trace: traceNode{in}})
	for _, tc := range []struct {
		golden string
		args   []string
	}{
		{"trace-clusterip", []string{"trace", "--from", "pod", "ns/client", "--to", "10.96.0.10:80"}},
		{"trace-clusterip-json", []string{"trace", "--from", "pod:ns/client", "--to", "10.96.0.10:80/TCP", "-o", "json"}},
		{"trace-clusterip-yaml", []string{"trace", "--from", "node", "--to", "10.96.0.10:80", "-o", "yaml"}},
		{"trace-no-endpoints", []string{"trace", "--from", "pod", "ns/client", "--to", "10.96.0.20:80"}},
		{"trace-undefined-port", []string{"trace", "--from", "pod", "ns/client", "--to", "10.96.0.10:81"}},
		{"trace-ipmode-proxy", []string{"trace", "--from", "external", "--to", "172.18.0.21:80"}},
		{"trace-etp-local", []string{"trace", "--from", "external:198.51.100.7", "--to", "192.168.77.10:30022"}},
		{"trace-source-range", []string{"trace", "--from", "external:198.51.100.7", "--to", "172.18.0.23:80"}},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			out, errOut, code := run(append(tc.args, "--socket", sock)...)
			require.Equal(t, 0, code, "stderr: %s", errOut)
			require.Empty(t, errOut)
			checkGolden(t, tc.golden, out)
		})
	}
}

// TestTraceErrors: bad flags are refused by antctl or by the agent (400), an unknown pod is a 404.
func TestTraceErrors(t *testing.T) {
	in := st.NewNode(t, true).Add(st.Service("web", "10.96.0.10")).Inputs()
	sock := startAgentWith(t, apiserver.Options{Trace: traceNode{in}})
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"trace", "--to", "10.96.0.10:80"}, "error: --from pod NS/NAME|node|external[:IP] is required\n"},
		{[]string{"trace", "--from", "node"}, "error: --to IP:PORT[/PROTO] is required\n"},
		{[]string{"trace", "--from", "pod", "--to", "10.96.0.10:80"}, "error: --from pod needs the pod as NAMESPACE/NAME\n"},
		{[]string{"trace", "--from", "node", "--to", "10.96.0.10"}, "error: agent API (BadRequest): to \"10.96.0.10\": want IP:PORT[/PROTO] with a port from 1 to 65535 ([IPv6]:PORT)\n"},
		{[]string{"trace", "--from", "somewhere", "--to", "10.96.0.10:80/ICMP"}, "error: agent API (BadRequest): from \"somewhere\": want pod:NAMESPACE/NAME, node, external or external:IP; to \"10.96.0.10:80/ICMP\": protocol \"ICMP\" is not TCP, UDP or SCTP\n"},
		{[]string{"trace", "--from", "pod", "ns/nobody", "--to", "10.96.0.10:80"}, "error: agent API (NotFound): pod ns/nobody: not found on this node\n"},
	} {
		_, errOut, code := run(append(tc.args, "--socket", sock)...)
		require.Equal(t, 1, code)
		require.Equal(t, tc.want, errOut, "args %q", tc.args)
	}
}
