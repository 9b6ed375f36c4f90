package reject_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/ofconn"
	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/reject"
	"github.com/antrea-proxy/antrea-proxy/test/lab"
)

// TestIntegrationRejectWithRealOVS installs the pipeline's base flows and the flows of two
// Service ports without endpoints (TCP 80 and UDP 53 on one ClusterIP) as pipeline.ServicePort
// computes them, which send new connections to the controller (pipeline.RejectAction). A responder on
// the bridge's management socket answers: a TCP client in a namespace gets "connection
// refused" and a UDP client ECONNREFUSED (from the ICMP port unreachable), each in under 1 s.
// Before the responder runs, the same TCP connection times out, so the answer is its doing.
func TestIntegrationRejectWithRealOVS(t *testing.T) {
	l := lab.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client := l.AddHost(t, "cli", "10.10.0.10")

	const vip = "10.96.0.99"
	n := pipeline.NodeConfig{Round: 1, IPv4: true}
	var ops []of.Op
	for _, f := range pipeline.BaseFlows(n) {
		ops = append(ops, of.Op{Kind: of.AddFlow, Flow: &f})
	}
	rejecting := 0
	for i, port := range []struct {
		proto model.Protocol
		port  uint16
	}{{model.TCP, 80}, {model.UDP, 53}} {
		sp := model.ServicePort{ClusterIPs: []netip.Addr{netip.MustParseAddr(vip)}, Port: port.port, Protocol: port.proto}
		out := pipeline.ServicePort(n, pipeline.ServicePortInput{Port: sp, GroupID: uint32(i + 1)})
		for _, f := range out.Flows {
			for _, a := range f.Actions {
				if c, ok := a.(of.Controller); ok && c.MaxLen == pipeline.RejectMaxLen {
					rejecting++
				}
			}
			ops = append(ops, of.Op{Kind: of.AddFlow, Flow: &f})
		}
	}
	require.Equal(t, 2, rejecting, "each Service port without endpoints has one flow sending new connections to the responder")
	require.NoError(t, l.OF.Apply(ctx, ops))

	// Without a responder the connection attempt goes unanswered.
	_, _, err := l.Dial(ctx, client, vip+":80", 500*time.Millisecond)
	require.Error(t, err)
	require.NotContains(t, err.Error(), "connection refused", "nothing answers before the responder runs")

	conn, err := ofconn.Dial(ctx, l.OVS.MgmtSocket(l.Bridge), ofconn.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	r := reject.New(reject.Config{Accept: reject.FromFlows(pipeline.TableServiceLB,
		pipeline.Cookie(0, pipeline.CategoryService, 0), pipeline.CategoryMask)})
	serveCtx, stop := context.WithCancel(ctx)
	served := make(chan struct{})
	go func() { r.Serve(serveCtx, conn); close(served) }()
	t.Cleanup(func() { stop(); <-served })

	for _, tc := range []struct{ proto, addr string }{
		{"tcp", vip + ":80"},
		{"udp", vip + ":53"},
		{"tcp", vip + ":80"}, // again: every attempt is answered, nothing is cached
	} {
		start := time.Now()
		reply, err := l.Echo.Dial(ctx, client.NS, tc.proto, tc.addr, 3*time.Second)
		elapsed := time.Since(start)
		require.Error(t, err, "%s %s answered %q", tc.proto, tc.addr, reply)
		require.Contains(t, err.Error(), "connection refused", "%s %s\nflows:\n%s", tc.proto, tc.addr, l.Flows())
		require.Less(t, elapsed, time.Second, "%s %s: refused only after %v", tc.proto, tc.addr, elapsed)
		t.Logf("%s %s refused after %v", tc.proto, tc.addr, elapsed)
	}
	st := r.Stats()
	require.GreaterOrEqual(t, st.Replied, uint64(3))
	require.Zero(t, st.SendFailed)
	require.Zero(t, conn.Stats().Dropped)
}
