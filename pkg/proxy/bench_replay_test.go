package proxy

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/ofctl"
	"github.com/antrea-proxy/antrea-proxy/pkg/reconciler"
	"github.com/antrea-proxy/antrea-proxy/test/ovssandbox"
)

// benchBridge creates a netdev bridge in o and returns its OpenFlow client.
func benchBridge(tb testing.TB, o *ovssandbox.Instance, br string) *ofctl.Bridge {
	tb.Helper()
	if _, err := o.Vsctl("add-br", br, "--", "set", "bridge", br, "datapath_type=netdev",
		"protocols=OpenFlow10,OpenFlow13,OpenFlow15", "fail_mode=secure"); err != nil {
		tb.Fatal(err)
	}
	if err := o.WaitForBridge(br); err != nil {
		tb.Fatal(err)
	}
	return ofctl.New(o.MgmtSocket(br))
}

// benchRestart kills and restarts ovs-vswitchd and polls until br answers OpenFlow again.
func benchRestart(tb testing.TB, o *ovssandbox.Instance, br string, b of.Bridge) {
	tb.Helper()
	if err := o.RestartVSwitchd(false); err != nil {
		tb.Fatal(err)
	}
	if err := o.WaitForBridge(br); err != nil {
		tb.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := b.DumpFlows(context.Background(), of.FlowFilter{Table: 0, TableSet: true})
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("bridge %s does not answer after the restart: %v", br, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// install10k installs 10,000 ClusterIP Services of 10 endpoints each through p.
func install10k(tb testing.TB, p *Proxier) {
	tb.Helper()
	tr := p.Tracker()
	for i := 0; i < 10000; i++ {
		name := fmt.Sprintf("s%05d", i)
		tr.Services.OnServiceAdd(makeService("ns1", name, fmt.Sprintf("10.97.%d.%d", i/256, i%256)))
		var eps []ep
		for j := 0; j < 10; j++ {
			k := i*10 + j
			eps = append(eps, ep{ip: fmt.Sprintf("10.%d.%d.%d", 30+k/65536, k/256%256, k%256), node: "node-b", ready: true})
		}
		tr.Endpoints.OnEndpointSliceAdd(makeSlice("ns1", name, name+"-1", 8080, v1.ProtocolTCP, "http", eps...))
	}
	if err := p.SyncNow(context.Background(), false); err != nil {
		tb.Fatal(err)
	}
}

// opCounts counts ops by kind.
func opCounts(ops []of.Op) map[of.OpKind]int {
	out := map[of.OpKind]int{}
	for _, op := range ops {
		out[op.Kind]++
	}
	return out
}

// duplicates counts the ops that repeat an earlier op's target (the same group ID for the same
// kind, the same flow key for the same kind): work a bundle could leave out.
func duplicates(ops []of.Op) int {
	seen := map[string]bool{}
	n := 0
	for _, op := range ops {
		var key string
		switch {
		case op.Group != nil:
			key = fmt.Sprintf("%v group %d", op.Kind, op.Group.ID)
		case op.Flow != nil:
			key = fmt.Sprintf("%v flow %s cookie %#x/%#x", op.Kind, of.FormatFlowKey(op.Flow), op.Flow.Cookie, op.Flow.CookieMask)
		}
		if seen[key] {
			n++
		}
		seen[key] = true
	}
	return n
}

// withoutKinds returns ops without those of the given kinds.
func withoutKinds(ops []of.Op, kinds ...of.OpKind) []of.Op {
	drop := map[of.OpKind]bool{}
	for _, k := range kinds {
		drop[k] = true
	}
	var out []of.Op
	for _, op := range ops {
		if !drop[op.Kind] {
			out = append(out, op)
		}
	}
	return out
}

// rawBundle writes ops as the bundle text Apply streams, into a file, and returns a function
// that feeds it to ovs-ofctl directly (no Go-side work) and returns how long that took.
func rawBundle(tb testing.TB, real *ofctl.Bridge, ops []of.Op, name string) (run func() time.Duration, size int64) {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), name)
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	if err := real.WriteBundle(f, ops); err != nil {
		tb.Fatal(err)
	}
	st, _ := f.Stat()
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
	return func() time.Duration {
		start := time.Now()
		out, err := exec.Command("ovs-ofctl", "-O", "OpenFlow15", "bundle", real.Target(), path).CombinedOutput()
		d := time.Since(start)
		if err != nil {
			tb.Fatalf("ovs-ofctl bundle %s: %v: %s", name, err, out)
		}
		return d
	}, st.Size()
}

// processCPU returns the CPU time (user + system, all threads) process pid has used so far,
// from /proc/<pid>/stat (clock ticks of 10 ms): OVS's own work, whatever the machine's load.
func processCPU(tb testing.TB, pid int) time.Duration {
	tb.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	// After the command name: state is field 3 of stat(5), utime 14 and stime 15.
	utime, err1 := strconv.ParseInt(fields[14-3], 10, 64)
	stime, err2 := strconv.ParseInt(fields[15-3], 10, 64)
	if err1 != nil || err2 != nil {
		tb.Fatalf("parsing /proc/%d/stat: %v %v", pid, err1, err2)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// rusageCPU returns the CPU time (user + system) of this process (self) or of its reaped
// children (the ovs-ofctl runs).
func rusageCPU(tb testing.TB, who int) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuUse is the CPU time spent during one measurement, by process.
type cpuUse struct{ vswitchd, ofctl, self time.Duration }

func (c cpuUse) add(d cpuUse) cpuUse {
	return cpuUse{c.vswitchd + d.vswitchd, c.ofctl + d.ofctl, c.self + d.self}
}

// requireFlows fails unless the bridge holds want flows.
func requireFlows(tb testing.TB, real *ofctl.Bridge, want int, what string) {
	tb.Helper()
	n, err := real.CountFlows(context.Background(), of.FlowFilter{})
	if err != nil || n != want {
		tb.Fatalf("%s: bridge holds %d flows (%v), want %d", what, n, err, want)
	}
}

// BenchmarkReplay10k measures the proxier's Replay after an ovs-vswitchd restart with 10,000
// ClusterIP Services x 10 endpoints installed, side by side with the floor: the same bundle text
// (ofctl.Bridge.WriteBundle) fed to `ovs-ofctl -O OpenFlow15 bundle` directly, and the same
// without the group deletes (nothing exists after a restart). Each iteration restarts
// vswitchd before each of the three measurements; only Replay runs with the timer on, so ns/op
// is the Replay too.
func BenchmarkReplay10k(b *testing.B) {
	o := ovssandbox.Start(b, ovssandbox.Options{})
	real := benchBridge(b, o, "brbench")
	p, err := New(testOptions(), real)
	if err != nil {
		b.Fatal(err)
	}
	p.OnNodeUpdate(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode}, Status: v1.NodeStatus{
		Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.168.77.10"}}}})
	start := time.Now()
	install10k(b, p)
	b.Logf("installed 10,000 Services x 10 endpoints in %v", time.Since(start))

	goStart := time.Now()
	var ops []of.Op
	var flows int
	p.bridgeState.Read(func(st *reconciler.State) {
		ops, flows = st.ReplayOps(p.round, ourCategories, isProxierOwner), st.Len()
	})
	planned := time.Since(goStart)
	if err := real.WriteBundle(io.Discard, ops); err != nil {
		b.Fatal(err)
	}
	goSide := fmt.Sprintf("replayOps %v, WriteBundle to io.Discard %v", planned, time.Since(goStart)-planned)
	full, fullSize := rawBundle(b, real, ops, "replay.bundle")
	trimmedOps := withoutKinds(ops, of.DeleteGroup)
	trimmed, trimmedSize := rawBundle(b, real, trimmedOps, "replay-nodelete.bundle")
	b.Logf("replay bundle: %d ops %v (%d duplicated), %d bytes; without group deletes: %d ops, %d bytes; Go side: %s",
		len(ops), opCounts(ops), duplicates(ops), fullSize, len(trimmedOps), trimmedSize, goSide)

	// measure restarts vswitchd, then times fn and the CPU vswitchd spent meanwhile.
	measure := func(what string, fn func() time.Duration) (time.Duration, cpuUse) {
		benchRestart(b, o, "brbench", real)
		pid := o.VSwitchdPID()
		vs, kids, self := processCPU(b, pid), rusageCPU(b, syscall.RUSAGE_CHILDREN), rusageCPU(b, syscall.RUSAGE_SELF)
		wall := fn()
		cpu := cpuUse{processCPU(b, pid) - vs, rusageCPU(b, syscall.RUSAGE_CHILDREN) - kids, rusageCPU(b, syscall.RUSAGE_SELF) - self}
		requireFlows(b, real, flows, what)
		b.Logf("%s: %v; CPU: ovs-vswitchd %v, ovs-ofctl %v, this process %v", what, wall, cpu.vswitchd, cpu.ofctl, cpu.self)
		return wall, cpu
	}
	var replay, floor, floorTrimmed time.Duration
	var replayCPU, floorCPU, trimmedCPU cpuUse
	b.ResetTimer()
	b.StopTimer()
	for i := 0; i < b.N; i++ {
		// The raw runs go first on odd iterations, so that an order effect shows.
		steps := []func(){
			func() {
				w, c := measure("Replay", func() time.Duration {
					b.StartTimer()
					defer b.StopTimer()
					t0 := time.Now()
					if err := p.Reconciler().Replay(context.Background()); err != nil {
						b.Fatal(err)
					}
					return time.Since(t0)
				})
				replay, replayCPU = replay+w, replayCPU.add(c)
			},
			func() {
				w, c := measure("raw bundle", full)
				floor, floorCPU = floor+w, floorCPU.add(c)
			},
			func() {
				w, c := measure("raw bundle without group deletes", trimmed)
				floorTrimmed, trimmedCPU = floorTrimmed+w, trimmedCPU.add(c)
			},
		}
		if i%2 == 1 {
			steps[0], steps[2] = steps[2], steps[0]
		}
		for _, s := range steps {
			s()
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(len(ops)), "ops/replay")
	b.ReportMetric(replay.Seconds()/n, "s/replay")
	b.ReportMetric(floor.Seconds()/n, "floor-s/replay")
	b.ReportMetric(floorTrimmed.Seconds()/n, "nodelete-floor-s/replay")
	b.ReportMetric(replay.Seconds()/floor.Seconds(), "replay/floor")
	for _, m := range []struct {
		prefix string
		c      cpuUse
	}{{"", replayCPU}, {"floor-", floorCPU}, {"nodelete-", trimmedCPU}} {
		b.ReportMetric(m.c.vswitchd.Seconds()/n, m.prefix+"vswitchd-cpu-s/replay")
		b.ReportMetric(m.c.ofctl.Seconds()/n, m.prefix+"ofctl-cpu-s/replay")
		b.ReportMetric(m.c.self.Seconds()/n, m.prefix+"go-cpu-s/replay")
	}
}
