package pipeline

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/oftrace"
)

// TestRejectThroughTheClientsShard traces new connections to a Service port without endpoints,
// in both families, with RejectMeters: each reaches the controller from RejectMeter, through the
// meter RejectShard names for its client address (the low bits of the address), and without
// RejectMeters straight from ServiceLB.
func TestRejectThroughTheClientsShard(t *testing.T) {
	for _, meters := range []uint32{0, 1, 16} {
		n := NodeConfig{Round: 1, IPv4: true, IPv6: true, RejectMeters: meters}
		flows := BaseFlows(n)
		for i, vip := range []string{"10.96.0.99", "fd00:96::99"} {
			sp := model.ServicePort{ClusterIPs: []netip.Addr{netip.MustParseAddr(vip)}, Port: 80, Protocol: model.TCP}
			flows = append(flows, ServicePort(n, ServicePortInput{Port: sp, IPv6: i == 1, GroupID: uint32(i + 1)}).Flows...)
		}
		tr, err := oftrace.New(flows, nil, oftrace.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct{ src, dst string }{
			{"10.10.0.10", "10.96.0.99"}, {"10.10.0.21", "10.96.0.99"}, {"10.10.3.255", "10.96.0.99"},
			{"fd00:10::a", "fd00:96::99"}, {"fd00:10::1f", "fd00:96::99"},
		} {
			src := netip.MustParseAddr(c.src)
			et := of.EthTypeIP
			if src.Is6() {
				et = of.EthTypeIPv6
			}
			res, err := tr.Trace(oftrace.Packet{InPort: 5, EthType: et, Proto: of.ProtoTCP, Src: src, Dst: netip.MustParseAddr(c.dst),
				SrcPort: 40000, DstPort: 80, TCPFlags: of.TCPSyn}, oftrace.NewConntrack())
			if err != nil {
				t.Fatalf("%d meters, %s: %v", meters, c.src, err)
			}
			got, ok := res.Single()
			wantTable := TableServiceLB
			if meters > 0 {
				wantTable = TableRejectMeter
			}
			if !ok || got.Kind != oftrace.Controller || got.Table != wantTable || got.Controller.MaxLen != RejectMaxLen {
				t.Errorf("%d meters, %s: want the reject controller action in table %d, got:\n%s", meters, c.src, wantTable, res)
				continue
			}
			if meters == 0 {
				continue
			}
			want := fmt.Sprintf("meter:%d ", RejectShard(src, meters))
			if !traceHas(res, want) {
				t.Errorf("%d meters, %s: want %s (shard of the address), got:\n%s", meters, c.src, want, res)
			}
		}
	}
}

// traceHas reports whether a step of res mentions s.
func traceHas(res *oftrace.Trace, s string) bool {
	for _, st := range res.Steps {
		if strings.Contains(st.Text, s) {
			return true
		}
	}
	return false
}
