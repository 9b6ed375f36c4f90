package nodenet

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkReconcilerFullSync measures the node network's periodic full sync (what Run does
// every ResyncPeriod with nothing changed: it lists the agent's routes and compares them) at
// 30,000 and 100,000 ClusterIPs, with a host route per ClusterIP (host-routes: no ServiceCIDR
// known) and with the one route of their ServiceCIDR (servicecidr, a /12 holding them all).
// routes is what the table holds and each full sync lists; cpu-ms/op is this process's user +
// system CPU per full sync, the kernel's netlink work included; B/op what one full sync
// allocates.
func BenchmarkReconcilerFullSync(b *testing.B) {
	for _, n := range []int{30000, 100000} {
		for _, bc := range []struct {
			name  string
			cidrs []netip.Prefix
		}{{"host-routes", nil}, {"servicecidr", []netip.Prefix{p("10.96.0.0/12")}}} {
			b.Run(fmt.Sprintf("%d/%s", n, bc.name), func(b *testing.B) {
				r, e := scaleReconciler(b, n)
				e.ServiceCIDRs = bc.cidrs
				r.SetExposure(e)
				if err := r.Sync(b.Context()); err != nil {
					b.Fatal(err)
				}
				have, err := r.cfg.Host.routeKeys()
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				cpu0 := processCPU(b)
				for b.Loop() {
					if err := r.fullSync(b.Context()); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(have)), "routes")
				b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
			})
		}
	}
}

// processCPU is this process's user + system CPU time so far.
func processCPU(tb testing.TB) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
