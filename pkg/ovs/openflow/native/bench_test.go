package native

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/ofctl"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
	"github.com/antrea-proxy/antrea-proxy/test/ovssandbox"
)

var benchNode = pipeline.NodeConfig{Round: 1, IPv4: true, GatewayOFPort: 2, GatewayIPv4: netip.MustParseAddr("10.10.0.1")}

// benchService computes the pipeline's groups and flows of ClusterIP Service i with eps
// endpoints (each Service has its own endpoint addresses).
func benchService(i, eps int) pipeline.ServicePortFlows {
	port := model.ServicePort{Name: model.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "bench", Name: fmt.Sprintf("svc%d", i)}, Port: "http", Protocol: model.TCP},
		ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)})}, Port: 80, Protocol: model.TCP}
	var endpoints []model.Endpoint
	for j := 0; j < eps; j++ {
		endpoints = append(endpoints, model.Endpoint{IP: netip.AddrFrom4([4]byte{10, byte(100 + j), byte(i >> 8), byte(i)}),
			Port: 8080, NodeName: "other", Ready: true, Serving: true})
	}
	return pipeline.ServicePort(benchNode, pipeline.ServicePortInput{Port: port, Endpoints: endpoints, GroupID: uint32(i + 1)})
}

// serviceOps is the full install of n Services × eps endpoints: the base flows, then each
// Service's groups and flows.
func serviceOps(n, eps int) []openflow.Op {
	var ops []openflow.Op
	for _, f := range pipeline.BaseFlows(benchNode) {
		ops = append(ops, openflow.Op{Kind: openflow.AddFlow, Flow: &f})
	}
	for i := 0; i < n; i++ {
		sp := benchService(i, eps)
		for _, g := range sp.Groups {
			ops = append(ops, openflow.Op{Kind: openflow.AddGroup, Group: g})
		}
		for _, fs := range [][]openflow.Flow{sp.EndpointFlows, sp.Flows} {
			for j := range fs {
				ops = append(ops, openflow.Op{Kind: openflow.AddFlow, Flow: &fs[j]})
			}
		}
	}
	return ops
}

// endpointChange returns the ops that add an 11th endpoint to Service i (a group modify; the
// pipeline's buckets DNAT themselves, so there is no endpoint flow unless a port has session
// affinity) and the ops that take it away again.
func endpointChange(i, eps int) (add, remove []openflow.Op) {
	before, after := benchService(i, eps), benchService(i, eps+1)
	had := map[string]bool{}
	for _, f := range before.EndpointFlows {
		had[openflow.FormatFlow(&f)] = true
	}
	for _, g := range after.Groups {
		add = append(add, openflow.Op{Kind: openflow.ModifyGroup, Group: g})
	}
	for _, g := range before.Groups {
		remove = append(remove, openflow.Op{Kind: openflow.ModifyGroup, Group: g})
	}
	for j := range after.EndpointFlows {
		f := &after.EndpointFlows[j]
		if !had[openflow.FormatFlow(f)] {
			add = append(add, openflow.Op{Kind: openflow.AddFlow, Flow: f})
			remove = append(remove, openflow.Op{Kind: openflow.DeleteFlowStrict, Flow: f})
		}
	}
	return add, remove
}

// benchPair is one OVS with two bridges: one programmed natively, one through ovs-ofctl.
type benchPair struct {
	o        *ovssandbox.Instance
	nat      *Bridge
	ofc      *ofctl.Bridge
	nbr, obr string
}

func newBenchPair(b *testing.B, o *ovssandbox.Instance) *benchPair {
	p := &benchPair{o: o, nbr: addBridge(b, o), obr: addBridge(b, o)}
	p.nat = New(o.MgmtSocket(p.nbr), nil)
	p.ofc = ofctl.New(o.MgmtSocket(p.obr))
	b.Cleanup(p.nat.Close)
	// Both bridges answer before anything is timed.
	for _, br := range []string{p.nbr, p.obr} {
		if _, err := o.Ofctl("dump-flows", br); err != nil {
			b.Fatal(err)
		}
	}
	return p
}

func (p *benchPair) delete(b *testing.B) {
	p.nat.Close()
	for _, br := range []string{p.nbr, p.obr} {
		if out, err := p.o.Vsctl("del-br", br); err != nil {
			b.Fatalf("del-br %s: %v: %s", br, err, out)
		}
	}
}

// BenchmarkIncrementalEndpointChange measures one endpoint added to (or removed from) a
// Service on bridges holding 1,000 Services × 10 endpoints: one group modify and the endpoint's
// flow mods, applied natively and through ovs-ofctl on identical bridges in the same
// iteration. Metrics: native-ns/change, ofctl-ns/change and speedup (ofctl / native); ns/op
// covers both.
func BenchmarkIncrementalEndpointChange(b *testing.B) {
	o := startOVS(b)
	p := newBenchPair(b, o)
	ctx := context.Background()
	install := serviceOps(1000, 10)
	if err := p.nat.Apply(ctx, install); err != nil {
		b.Fatal(err)
	}
	if err := p.ofc.Apply(ctx, install); err != nil {
		b.Fatal(err)
	}
	add, remove := endpointChange(500, 10)
	var tn, to time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ops := add
		if i%2 == 1 {
			ops = remove
		}
		start := time.Now()
		if err := p.nat.Apply(ctx, ops); err != nil {
			b.Fatal(err)
		}
		mid := time.Now()
		if err := p.ofc.Apply(ctx, ops); err != nil {
			b.Fatal(err)
		}
		tn, to = tn+mid.Sub(start), to+time.Since(mid)
	}
	b.ReportMetric(float64(len(add)), "ops/change")
	b.ReportMetric(float64(tn.Nanoseconds())/float64(b.N), "native-ns/change")
	b.ReportMetric(float64(to.Nanoseconds())/float64(b.N), "ofctl-ns/change")
	b.ReportMetric(float64(to)/float64(tn), "speedup")
}

// BenchmarkFullInstall10kServices installs 10,000 Services × 10 endpoints (the pipeline's
// groups and flows, one Apply) on a fresh bridge natively and on another through ovs-ofctl, in
// the same iteration. Metrics: native-s, ofctl-s, speedup (ofctl / native) and ops.
func BenchmarkFullInstall10kServices(b *testing.B) {
	o := startOVS(b)
	ops := serviceOps(10000, 10)
	ctx := context.Background()
	var tn, to time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		p := newBenchPair(b, o)
		b.StartTimer()
		start := time.Now()
		if err := p.nat.Apply(ctx, ops); err != nil {
			b.Fatal(err)
		}
		mid := time.Now()
		if err := p.ofc.Apply(ctx, ops); err != nil {
			b.Fatal(err)
		}
		tn, to = tn+mid.Sub(start), to+time.Since(mid)
		b.StopTimer()
		p.delete(b)
		b.StartTimer()
	}
	b.ReportMetric(float64(len(ops)), "ops")
	b.ReportMetric(tn.Seconds()/float64(b.N), "native-s")
	b.ReportMetric(to.Seconds()/float64(b.N), "ofctl-s")
	b.ReportMetric(float64(to)/float64(tn), "speedup")
}

// BenchmarkEncode10kServices encodes the full install of 10,000 Services × 10 endpoints into
// bundle messages (no switch): the client-side cost of a native Apply.
func BenchmarkEncode10kServices(b *testing.B) {
	ops := serviceOps(10000, 10)
	b.ReportAllocs()
	b.ResetTimer()
	bytes := 0
	for i := 0; i < b.N; i++ {
		e := newBundleEncoder(1, bundleAtomic|bundleOrdered, 1)
		bytes = 0
		for j := range ops {
			if err := e.op(j, &ops[j]); err != nil {
				b.Fatal(err)
			}
			if len(e.w.b) >= flushBytes {
				bytes += len(e.w.b)
				e.w.b = e.w.b[:0]
			}
		}
		bytes += len(e.w.b)
	}
	b.ReportMetric(float64(bytes), "bytes")
}

// BenchmarkFullInstallWatched10kServices installs 10,000 Services × 10 endpoints natively on
// two fresh bridges in the same iteration, one of them under a FlowWatch (the flow monitor the
// agent keeps on its connection), alternating which goes first. Metrics: watched-s,
// unwatched-s and their ratio: what the monitor costs the first full sync.
func BenchmarkFullInstallWatched10kServices(b *testing.B) {
	o := startOVS(b)
	ops := serviceOps(10000, 10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var tw, tu time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		watched, unwatched := addBridge(b, o), addBridge(b, o)
		bw, bu := New(o.MgmtSocket(watched), nil), New(o.MgmtSocket(unwatched), nil)
		w := bw.NewFlowWatch()
		wctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { w.Run(wctx); close(done) }()
		for !w.Watching() {
			<-w.Changes()
		}
		b.StartTimer()
		for j := 0; j < 2; j++ {
			br, d := bu, &tu
			if (i+j)%2 == 0 {
				br, d = bw, &tw
			}
			start := time.Now()
			if err := br.Apply(ctx, ops); err != nil {
				b.Fatal(err)
			}
			*d += time.Since(start)
		}
		b.StopTimer()
		if st := w.Stats(); st.Foreign != 0 {
			b.Fatalf("the watched bridge's own install was reported: %+v", st)
		}
		stop()
		<-done
		bw.Close()
		bu.Close()
		for _, br := range []string{watched, unwatched} {
			if out, err := o.Vsctl("del-br", br); err != nil {
				b.Fatalf("del-br %s: %v: %s", br, err, out)
			}
		}
		b.StartTimer()
	}
	b.ReportMetric(tw.Seconds()/float64(b.N), "watched-s")
	b.ReportMetric(tu.Seconds()/float64(b.N), "unwatched-s")
	b.ReportMetric(float64(tw)/float64(tu), "ratio")
}
