package proxy

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/ofctl"
	"github.com/antrea-proxy/antrea-proxy/test/ovssandbox"
)

// recordingBridge is an ofctl bridge that keeps the ops of every bundle it applies.
type recordingBridge struct {
	*ofctl.Bridge
	bundles [][]of.Op
}

func (r *recordingBridge) Apply(ctx context.Context, ops []of.Op) error {
	r.bundles = append(r.bundles, ops)
	return r.Bridge.Apply(ctx, ops)
}

// feed10k hands the 10,000 ClusterIP Services × 10 endpoints of install10k to p's trackers
// without syncing.
func feed10k(p *Proxier) {
	tr := p.Tracker()
	for i := 0; i < 10000; i++ {
		tr.Services.OnServiceAdd(makeService("ns1", fmt.Sprintf("s%05d", i), fmt.Sprintf("10.97.%d.%d", i/256, i%256)))
		tr.Endpoints.OnEndpointSliceAdd(scaleSlice(i, true))
	}
}

// BenchmarkFullInstall10kOVS measures the first full sync of 10,000 ClusterIP Services × 10
// endpoints into a fresh real OVS bridge (the trackers are fed before the timer starts), and
// the floor of the same layout: the ops of that sync's bundles, without deletes, fed to one
// `ovs-ofctl bundle` into another fresh bridge. ns/op is the sync alone. Reported: the ops and
// groups/flows of the first bundle, the sync's CPU (this process, ovs-ofctl children,
// ovs-vswitchd) and the floor's wall time and ovs-vswitchd CPU.
func BenchmarkFullInstall10kOVS(b *testing.B) {
	o := ovssandbox.Start(b, ovssandbox.Options{})
	var syncCPU, floorCPU cpuUse
	var floorWall time.Duration
	var ops, groups, flows int
	b.ResetTimer()
	b.StopTimer()
	for i := 0; i < b.N; i++ {
		br := fmt.Sprintf("brfull%d", i)
		benchBridge(b, o, br)
		// A loaded machine may take longer than the default deadline for the old layout's
		// 130,000 ops.
		rb := &recordingBridge{Bridge: ofctl.New(o.MgmtSocket(br), ofctl.WithTimeouts(0, 10*time.Minute, 0))}
		p, err := New(testOptions(), rb)
		if err != nil {
			b.Fatal(err)
		}
		p.OnNodeUpdate(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode}, Status: v1.NodeStatus{
			Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.168.77.10"}}}})
		feed10k(p)
		pid := o.VSwitchdPID()
		vs, kids, self := processCPU(b, pid), rusageCPU(b, syscall.RUSAGE_CHILDREN), rusageCPU(b, syscall.RUSAGE_SELF)
		b.StartTimer()
		t0 := time.Now()
		if err := p.SyncNow(context.Background(), false); err != nil {
			b.Fatal(err)
		}
		took := time.Since(t0)
		b.StopTimer()
		c := cpuUse{processCPU(b, pid) - vs, rusageCPU(b, syscall.RUSAGE_CHILDREN) - kids, rusageCPU(b, syscall.RUSAGE_SELF) - self}
		syncCPU = syncCPU.add(c)

		var adds []of.Op
		for _, bundle := range rb.bundles {
			for _, op := range bundle {
				switch op.Kind {
				case of.AddFlow, of.AddGroup:
					adds = append(adds, op)
				}
			}
		}
		if len(rb.bundles) > 0 {
			ops = len(rb.bundles[0])
		}
		counts := opCounts(adds)
		groups, flows = counts[of.AddGroup], counts[of.AddFlow]
		floorBr := fmt.Sprintf("brfloor%d", i)
		fb := benchBridge(b, o, floorBr)
		run, _ := rawBundle(b, fb, adds, "floor.bundle")
		vs, kids = processCPU(b, pid), rusageCPU(b, syscall.RUSAGE_CHILDREN)
		fw := run()
		fc := cpuUse{vswitchd: processCPU(b, pid) - vs, ofctl: rusageCPU(b, syscall.RUSAGE_CHILDREN) - kids}
		floorWall, floorCPU = floorWall+fw, floorCPU.add(fc)
		b.Logf("iteration %d: full sync %v (CPU: this process %v, ovs-ofctl %v, ovs-vswitchd %v), first bundle %d ops (%d groups + %d flows added in all); floor %v (ovs-vswitchd %v, ovs-ofctl %v)",
			i, took, c.self, c.ofctl, c.vswitchd, len(rb.bundles[0]), counts[of.AddGroup], counts[of.AddFlow], fw, fc.vswitchd, fc.ofctl)
		requireFlows(b, fb, flows, "floor")
		for _, del := range []string{br, floorBr} {
			if _, err := o.Vsctl("del-br", del); err != nil {
				b.Fatal(err)
			}
		}
	}
	n := float64(b.N)
	ms := func(d time.Duration) float64 { return float64(d.Milliseconds()) / n }
	b.ReportMetric(float64(ops), "ops-first-bundle")
	b.ReportMetric(float64(groups), "groups")
	b.ReportMetric(float64(flows), "flows")
	b.ReportMetric(ms(syncCPU.self), "cpu-ms/op")
	b.ReportMetric(ms(syncCPU.ofctl), "ofctl-cpu-ms/op")
	b.ReportMetric(ms(syncCPU.vswitchd), "ovs-cpu-ms/op")
	b.ReportMetric(ms(floorWall), "floor-ms/op")
	b.ReportMetric(ms(floorCPU.vswitchd), "floor-ovs-cpu-ms/op")
	b.ReportMetric(ms(floorCPU.ofctl), "floor-ofctl-cpu-ms/op")
}
