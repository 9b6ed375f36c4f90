package servicetrace_test

import (
	"fmt"
	"testing"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver/apiv1"
	. "github.com/antrea-proxy/antrea-proxy/pkg/agent/servicetrace"
	st "github.com/antrea-proxy/antrea-proxy/pkg/agent/servicetrace/servicetracetest"
)

// BenchmarkRun measures one trace (building the tracer over every installed flow and group,
// then the walk) on a node of 2,000 Services with two endpoints each.
func BenchmarkRun(b *testing.B) {
	t := &testing.T{}
	n := st.NewNode(t, true)
	for i := range 2000 {
		name := fmt.Sprintf("svc-%d", i)
		n.Add(st.Service(name, fmt.Sprintf("10.96.%d.%d", i/250, i%250+1)), st.Slice(name, []string{st.Endpoint1IP}, st.RemoteEndpoint))
	}
	in := n.Inputs()
	req, err := apiv1.ParseTraceRequest("pod:ns/client", "10.96.3.1:80")
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%d flows, %d groups", len(in.Flows), len(in.Groups))
	b.ResetTimer()
	for range b.N {
		tr, err := Run(in, req)
		if err != nil || tr.Chosen == "" {
			b.Fatalf("%v %+v", err, tr)
		}
	}
}
