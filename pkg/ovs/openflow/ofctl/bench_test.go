package ofctl

import (
	"context"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// serviceOps returns n select groups of two conntrack-DNAT buckets and n flows, each sending one
// virtual IP to its group: the shape of a proxy's initial sync.
func serviceOps(n int) []openflow.Op {
	ops := make([]openflow.Op, 0, 2*n)
	for i := 0; i < n; i++ {
		g := &openflow.Group{ID: uint32(i + 1), Type: openflow.GroupTypeSelect, HashFields: []string{"ip_src", "ip_dst", "tcp_src", "tcp_dst"}}
		for j := 0; j < 2; j++ {
			g.Buckets = append(g.Buckets, openflow.Bucket{ID: uint32(j), Weight: 100, Actions: []openflow.Action{
				openflow.CT{Commit: true, Table: 2, HasTable: true, Zone: 65520,
					NAT:  &openflow.NAT{Kind: openflow.NATDst, Addr: netip.AddrFrom4([4]byte{10, byte(20 + j), byte(i >> 8), byte(i)}), Port: 8080},
					Exec: []openflow.Action{openflow.SetCtMark{Value: 1, Mask: 1}}},
			}})
		}
		ops = append(ops, openflow.Op{Kind: openflow.AddGroup, Group: g})
	}
	for i := 0; i < n; i++ {
		ops = append(ops, openflow.Op{Kind: openflow.AddFlow, Flow: &openflow.Flow{
			Table: 1, Priority: 200, Cookie: 0x1000,
			Match: openflow.Match{
				CtState: &openflow.CtState{Set: openflow.CtNew | openflow.CtTrk},
				EthType: openflow.EthTypeIP, IPProto: openflow.ProtoTCP,
				Dst:   netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}), 32),
				TpDst: 80,
			},
			Actions: []openflow.Action{openflow.GroupAction{ID: uint32(i + 1)}},
		}})
	}
	return ops
}

// settle waits until ovs-vswitchd answers on every target and has finished setting up new
// bridges, so that neither measurement pays for bridge creation.
func settle(b *testing.B, targets ...string) {
	b.Helper()
	time.Sleep(200 * time.Millisecond)
	for _, t := range targets {
		if out, err := exec.Command("ovs-ofctl", "-O", "OpenFlow15", "dump-flows", t).CombinedOutput(); err != nil {
			b.Fatalf("%s: %v: %s", t, err, out)
		}
	}
}

// BenchmarkApply10kGroups10kFlows applies 10,000 groups and 10,000 flows in one Apply on a fresh
// bridge, and in the same run times plain `ovs-ofctl bundle <target> <file>` on the identical
// pre-rendered bundle on another fresh bridge. Metrics: ns/op (one Apply of 20,000 ops), ops/s
// (ours), raw-ops/s and ratio (our time / raw time; 1.0 means no overhead).
func BenchmarkApply10kGroups10kFlows(b *testing.B) {
	o, _ := startOVS(b)
	ops := serviceOps(10000)
	file := filepath.Join(b.TempDir(), "bundle.txt")
	f, err := os.Create(file)
	if err != nil {
		b.Fatal(err)
	}
	if err := New("unused").WriteBundle(f, ops); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var ours, raw time.Duration
	fresh := func() string {
		br, _ := addBridge(b, o)
		return br
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		brOurs, brRaw := fresh(), fresh()
		settle(b, o.MgmtSocket(brOurs), o.MgmtSocket(brRaw))
		runOurs := func() {
			b.StartTimer()
			start := time.Now()
			if err := New(o.MgmtSocket(brOurs)).Apply(ctx, ops); err != nil {
				b.Fatal(err)
			}
			ours += time.Since(start)
			b.StopTimer()
		}
		runRaw := func() {
			start := time.Now()
			if out, err := exec.Command("ovs-ofctl", "-O", "OpenFlow15", "bundle", o.MgmtSocket(brRaw), file).CombinedOutput(); err != nil {
				b.Fatalf("raw ovs-ofctl bundle: %v: %.500s", err, out)
			}
			raw += time.Since(start)
		}
		// Alternate the order so neither side always runs on a warmer switch.
		if i%2 == 0 {
			runOurs()
			runRaw()
		} else {
			runRaw()
			runOurs()
		}
		for _, br := range []string{brOurs, brRaw} {
			if _, err := o.Vsctl("del-br", br); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	n := float64(len(ops) * b.N)
	b.ReportMetric(n/ours.Seconds(), "ops/s")
	b.ReportMetric(n/raw.Seconds(), "raw-ops/s")
	b.ReportMetric(ours.Seconds()/raw.Seconds(), "ratio")
}

// BenchmarkWriteBundle20kOps measures rendering alone (no OVS): the Go side of Apply.
func BenchmarkWriteBundle20kOps(b *testing.B) {
	ops := serviceOps(10000)
	br := New("unused")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := br.WriteBundle(io.Discard, ops); err != nil {
			b.Fatal(err)
		}
	}
}
