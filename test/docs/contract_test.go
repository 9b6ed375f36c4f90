package docs

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

// contractHeader starts the matrix of the doc's "Integration contract" section: one row per
// table, one column per cookie category, each cell the priorities that category's writer uses
// in that table ("–" for none).
const contractHeader = "| table | base | service | endpoint | pod | gateway | affinity |"

// cell is one (table, category) pair of the matrix.
type cell struct {
	table uint8
	cat   string
}

// readContract parses the doc's matrix into cell → sorted priorities.
func readContract(t *testing.T) map[cell][]uint16 {
	t.Helper()
	lines, _ := readDoc(t)
	start := slices.Index(lines, contractHeader)
	if start < 0 {
		t.Fatalf("%s: no line %q (the integration contract's matrix)", docPath, contractHeader)
	}
	cats := splitRow(contractHeader)[1:]
	got := map[cell][]uint16{}
	for i := start + 2; i < len(lines) && strings.HasPrefix(lines[i], "|"); i++ {
		cols := splitRow(lines[i])
		if len(cols) != len(cats)+1 {
			t.Fatalf("%s:%d: %d columns, want %d", docPath, i+1, len(cols), len(cats)+1)
		}
		num, _, _ := strings.Cut(cols[0], " ")
		table, err := strconv.ParseUint(num, 10, 8)
		if err != nil {
			t.Fatalf("%s:%d: table %q: %v", docPath, i+1, cols[0], err)
		}
		for j, c := range cols[1:] {
			if c == "–" {
				continue
			}
			for _, p := range strings.Split(c, ",") {
				prio, err := strconv.ParseUint(strings.TrimSpace(p), 10, 16)
				if err != nil {
					t.Fatalf("%s:%d: priority %q: %v", docPath, i+1, p, err)
				}
				k := cell{uint8(table), cats[j]}
				got[k] = append(got[k], uint16(prio))
			}
		}
	}
	return got
}

func splitRow(l string) []string {
	cols := strings.Split(strings.Trim(l, "|"), "|")
	for i := range cols {
		cols[i] = strings.TrimSpace(cols[i])
	}
	return cols
}

// contractNode is a dual-stack node with every input of the base flows set.
func contractNode() pipeline.NodeConfig {
	addrs := func(s ...string) []netip.Addr {
		var out []netip.Addr
		for _, a := range s {
			out = append(out, netip.MustParseAddr(a))
		}
		return out
	}
	return pipeline.NodeConfig{Round: 1, IPv4: true, IPv6: true, GatewayOFPort: 2,
		GatewayIPv4: netip.MustParseAddr("10.10.1.1"), GatewayIPv6: netip.MustParseAddr("fd00:10:10:1::1"),
		NodePortAddresses: addrs("192.168.77.11", "fd00:77::11"),
		NodeIPs:           addrs("192.168.77.11", "fd00:77::11"),
		PeerNodeIPs:       addrs("192.168.77.12", "fd00:77::12"),
		NodeName:          "node1", Zone: "zone-a",
		ServiceCIDRs:     []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16"), netip.MustParsePrefix("fd00:96::/112")},
		ExemptClusterIPs: addrs("10.96.0.9"),
	}
}

// writtenFlows returns every writer's flows: the proxier's base flows for contractNode, the
// goldens (base, service and endpoint flows of every Service shape), the gateway's and a pod's
// flows for a dual-stack node.
func writtenFlows(t *testing.T) []of.Flow {
	t.Helper()
	flows := pipeline.BaseFlows(contractNode())
	for _, l := range goldenLines(t) {
		if strings.HasPrefix(l, "group_id=") {
			continue
		}
		f, err := of.ParseFlowNamed(l, pipeline.Names())
		if err != nil {
			t.Fatal(err)
		}
		flows = append(flows, f)
	}
	gwMAC := mustMAC(t, "0e:00:00:00:00:01")
	flows = append(flows, pipeline.GatewayFlows(1, pipeline.Gateway{OFPort: 2, MAC: gwMAC, IPv4: true, IPv6: true,
		NodePortVirtualIPs: []netip.Addr{netip.MustParseAddr("169.254.0.252"), netip.MustParseAddr("fc01::aabb:ccdd:eefe")},
		PodCIDRs:           []netip.Prefix{netip.MustParsePrefix("10.10.1.0/24"), netip.MustParsePrefix("fd00:10:10:1::/64")}})...)
	return append(flows, pipeline.PodFlows(1, gwMAC, pipeline.Pod{ID: 5, OFPort: 5, MAC: mustMAC(t, "0a:58:0a:0a:01:05"),
		IPs: []netip.Addr{netip.MustParseAddr("10.10.1.5"), netip.MustParseAddr("fd00:10:10:1::5")}})...)
}

// TestIntegrationContract: the doc's matrix of tables × cookie categories lists exactly the
// priorities the writers use, the flows OVS learns (from the learn actions) included.
func TestIntegrationContract(t *testing.T) {
	want := readContract(t)
	got := map[cell][]uint16{}
	note := func(table uint8, prio uint16, cookie uint64) {
		k := cell{table, pipeline.CookieCategory(cookie).String()}
		if !slices.Contains(got[k], prio) {
			got[k] = append(got[k], prio)
		}
	}
	for _, f := range writtenFlows(t) {
		note(f.Table, f.Priority, f.Cookie)
		for _, a := range f.Actions {
			if l, ok := a.(of.Learn); ok {
				note(l.Table, l.Priority, l.Cookie)
			}
		}
	}
	for _, m := range []map[cell][]uint16{want, got} {
		for k := range m {
			slices.Sort(m[k])
		}
	}
	for k, ps := range got {
		if !slices.Equal(want[k], ps) {
			t.Errorf("table %d, category %s: the code writes priorities %v, the doc's contract lists %v",
				k.table, k.cat, ps, want[k])
		}
	}
	for k, ps := range want {
		if _, ok := got[k]; !ok {
			t.Errorf("table %d, category %s: the doc's contract lists priorities %v, the code writes none", k.table, k.cat, ps)
		}
	}
	if t.Failed() {
		t.Log(formatContract(got))
	}
}

// formatContract renders got as the doc's matrix rows, to paste when the pipeline changed.
func formatContract(got map[cell][]uint16) string {
	cats := splitRow(contractHeader)[1:]
	var b strings.Builder
	for _, table := range slices.Sorted(maps.Keys(pipeline.TableNames)) {
		fmt.Fprintf(&b, "\n| %d %s |", table, pipeline.TableNames[table])
		for _, c := range cats {
			ps := got[cell{table, c}]
			if len(ps) == 0 {
				b.WriteString(" – |")
				continue
			}
			s := make([]string, len(ps))
			for i, p := range ps {
				s[i] = strconv.Itoa(int(p))
			}
			fmt.Fprintf(&b, " %s |", strings.Join(s, ", "))
		}
	}
	return b.String()
}
