package pipeline

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// TestNames: the pipeline's table and register names are valid Names (Names would panic), and
// the base flows of both families render with them and parse back to the same flows.
func TestNames(t *testing.T) {
	names := Names()
	flows := BaseFlows(NodeConfig{Round: 1, GatewayOFPort: 2, IPv4: true, IPv6: true, RejectMeters: 4, AffinityFlowsPerService: 10,
		GatewayIPv4: netip.MustParseAddr("10.0.0.1"), GatewayIPv6: netip.MustParseAddr("fd00:10::1")})
	if len(flows) == 0 {
		t.Fatal("no base flows")
	}
	for i := range flows {
		text := of.FormatFlowNamed(&flows[i], names)
		if strings.Contains(text, "table="+strconv.Itoa(int(flows[i].Table))+",") {
			t.Errorf("table %d shows by number: %s", flows[i].Table, text)
		}
		back, err := of.ParseFlowNamed(text, names)
		if err != nil {
			t.Fatal(err)
		}
		want, got := of.CanonicalFlow(flows[i]), of.CanonicalFlow(back)
		if a, b := of.FormatFlow(&want), of.FormatFlow(&got); a != b {
			t.Errorf("%s parses back to\n  %s, want\n  %s", text, b, a)
		}
	}
}
