package proxy

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// bundleRecorder keeps every bundle applied, rendered, and accepts it.
type bundleRecorder struct{ bundles [][]string }

func (r *bundleRecorder) CountFlows(context.Context, of.FlowFilter) (int, error) {
	return 0, errNoCounts
}
func (r *bundleRecorder) TableStats(context.Context) ([]of.TableStats, error) {
	return nil, errNoCounts
}

func (r *bundleRecorder) Apply(_ context.Context, ops []of.Op) error {
	out := make([]string, len(ops))
	for i, op := range ops {
		switch {
		case op.Group != nil:
			out[i] = fmt.Sprintf("%v %s", op.Kind, of.FormatGroup(op.Group))
		case op.Flow != nil:
			out[i] = fmt.Sprintf("%v %s", op.Kind, of.FormatFlow(op.Flow))
		default:
			out[i] = fmt.Sprint(op.Kind)
		}
	}
	r.bundles = append(r.bundles, out)
	return nil
}

func (*bundleRecorder) DumpFlows(context.Context, of.FlowFilter) ([]of.Flow, error) { return nil, nil }

// mixedService returns Service i of a varied set: session affinity, Local traffic policies,
// UDP, two ports, NodePorts, endpoints on this node and endpoints shared between Services.
func mixedService(i int) (*v1.Service, []ep) {
	name := fmt.Sprintf("svc%04d", i)
	svc := makeService(fmt.Sprintf("ns%d", i%7), name, fmt.Sprintf("10.96.%d.%d", i/250, i%250+1))
	if i%3 == 0 {
		timeout := int32(60 + i%5)
		svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		svc.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: &timeout}}
	}
	if i%5 == 0 {
		local := v1.ServiceInternalTrafficPolicyLocal
		svc.Spec.InternalTrafficPolicy = &local
	}
	if i%4 == 0 {
		svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP, TargetPort: intstr.FromInt32(5353)})
	}
	if i%11 == 0 {
		svc.Spec.Type = v1.ServiceTypeNodePort
		svc.Spec.Ports[0].NodePort = int32(30000 + i)
	}
	var eps []ep
	for j := 0; j < 1+i%6; j++ {
		// Every tenth Service shares its endpoints with the one before it.
		k := i - i%10/9
		eps = append(eps, ep{ip: fmt.Sprintf("10.%d.%d.%d", 40+k/250, k%250, j+1),
			node: []string{testNode, "node-b"}[j%2], ready: (i+j)%7 != 0})
	}
	return svc, eps
}

// feedMixed hands Services from..to-1 of the mixed set to p's trackers, their endpoints
// readiness flipped when flip is set.
func feedMixed(p *Proxier, from, to int, flip bool) {
	for i := from; i < to; i++ {
		svc, eps := mixedService(i)
		if flip {
			for j := range eps {
				eps[j].ready = !eps[j].ready
			}
		}
		p.Tracker().Services.OnServiceAdd(svc)
		p.Tracker().Endpoints.OnEndpointSliceAdd(makeSlice(svc.Namespace, svc.Name, svc.Name+"-1", 8080, v1.ProtocolTCP, "http", eps...))
		if len(svc.Spec.Ports) > 1 {
			p.Tracker().Endpoints.OnEndpointSliceAdd(makeSlice(svc.Namespace, svc.Name, svc.Name+"-2", 5353, v1.ProtocolUDP, "dns", eps...))
		}
	}
}

// TestParallelComputeSameBundles checks that computing Services on several goroutines installs
// exactly what computing them on the sync goroutine does, bundle by bundle and op by op: a
// first full sync, a full resync that recomputes every Service after many changed, and a
// partial sync.
func TestParallelComputeSameBundles(t *testing.T) {
	const services, workers = 1200, 4
	if services/parallelMin < workers {
		t.Fatalf("%d Services do not spread over %d workers (parallelMin %d)", services, workers, parallelMin)
	}
	run := func(workers int) [][]string {
		rec := &bundleRecorder{}
		p, err := New(testOptions(), rec)
		if err != nil {
			t.Fatal(err)
		}
		p.computeWorkers = workers
		feedMixed(p, 0, services, false)
		ctx := context.Background()
		if err := p.SyncNow(ctx, false); err != nil {
			t.Fatal(err)
		}
		feedMixed(p, 0, services/2, true)
		p.recomputeAll = true
		if err := p.SyncNow(ctx, true); err != nil {
			t.Fatal(err)
		}
		feedMixed(p, 3, 9, false)
		if err := p.SyncNow(ctx, false); err != nil {
			t.Fatal(err)
		}
		return rec.bundles
	}
	serial, parallel := run(1), run(workers)
	if len(serial) != len(parallel) {
		t.Fatalf("serial: %d bundles, parallel: %d", len(serial), len(parallel))
	}
	for b := range serial {
		if len(serial[b]) == 0 {
			t.Fatalf("bundle %d is empty", b)
		}
		if len(serial[b]) != len(parallel[b]) {
			t.Fatalf("bundle %d: serial %d ops, parallel %d", b, len(serial[b]), len(parallel[b]))
		}
		for i := range serial[b] {
			if serial[b][i] != parallel[b][i] {
				t.Fatalf("bundle %d op %d:\nserial:   %s\nparallel: %s", b, i, serial[b][i], parallel[b][i])
			}
		}
	}
}
