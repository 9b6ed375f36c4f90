package ofctl

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/test/ovssandbox"
)

// TestIntegrationVirtualIPThroughSelectGroup load-balances real TCP connections from a client
// namespace across two echo servers with one Apply: conntrack DNAT in the buckets of a select
// group, un-NAT of replies, and L2 forwarding by rewritten destination.
func TestIntegrationVirtualIPThroughSelectGroup(t *testing.T) {
	o, _ := startOVS(t)
	br, b := addBridge(t, o)
	const (
		zone = 65520
		vip  = "10.96.0.10"
	)
	gwMAC, _ := net.ParseMAC("02:00:00:00:00:01")
	client := ovssandbox.NewNetNS(t, "client")
	server1 := ovssandbox.NewNetNS(t, "server1")
	server2 := ovssandbox.NewNetNS(t, "server2")
	vc := ovssandbox.AttachVeth(t, o, br, client, ovssandbox.VethConfig{IfName: "eth0", Addr: "10.10.0.10/24"})
	v1 := ovssandbox.AttachVeth(t, o, br, server1, ovssandbox.VethConfig{IfName: "eth0", Addr: "10.10.0.11/24"})
	v2 := ovssandbox.AttachVeth(t, o, br, server2, ovssandbox.VethConfig{IfName: "eth0", Addr: "10.10.0.12/24"})
	// The client reaches the VIP through a gateway that exists only as a static neighbour entry.
	for _, cmd := range [][]string{
		{"ip", "neigh", "add", "10.10.0.1", "lladdr", gwMAC.String(), "dev", "eth0", "nud", "permanent"},
		{"ip", "route", "add", "10.96.0.0/16", "via", "10.10.0.1", "dev", "eth0"},
	} {
		out, err := client.Exec(cmd...)
		require.NoError(t, err, out)
	}
	echo := ovssandbox.BuildEcho(t)
	echo.Start(t, server1, "server1", 8080)
	echo.Start(t, server2, "server2", 8080)

	bucket := func(addr string) []openflow.Action {
		return []openflow.Action{openflow.CT{Commit: true, Table: 2, HasTable: true, Zone: zone,
			NAT:  &openflow.NAT{Kind: openflow.NATDst, Addr: netip.MustParseAddr(addr), Port: 8080},
			Exec: []openflow.Action{openflow.SetCtMark{Value: 1, Mask: 1}}}}
	}
	ip := openflow.EthTypeIP
	forward := func(addr string, v *ovssandbox.Veth) openflow.Op {
		return addFlow(openflow.Flow{Table: 2, Priority: 200,
			Match:   openflow.Match{EthType: ip, Dst: netip.MustParsePrefix(addr + "/32")},
			Actions: []openflow.Action{openflow.SetEthDst{MAC: v.MAC}, openflow.Output{Port: v.OFPort}}})
	}
	ops := []openflow.Op{
		addGroup(selectGroup(1, bucket("10.10.0.11"), bucket("10.10.0.12"))),
		addFlow(openflow.Flow{Priority: 200, Match: openflow.Match{EthType: openflow.EthTypeARP}, Actions: []openflow.Action{openflow.Normal{}}}),
		addFlow(openflow.Flow{Priority: 100, Match: openflow.Match{EthType: ip},
			Actions: []openflow.Action{openflow.CT{Table: 1, HasTable: true, Zone: zone, NAT: &openflow.NAT{Kind: openflow.NATReply}}}}),
		addFlow(openflow.Flow{Table: 1, Priority: 200, Match: openflow.Match{
			CtState: &openflow.CtState{Set: openflow.CtNew | openflow.CtTrk},
			EthType: ip, IPProto: openflow.ProtoTCP, Dst: netip.MustParsePrefix(vip + "/32"), TpDst: 80,
		}, Actions: []openflow.Action{openflow.GroupAction{ID: 1}}}),
		addFlow(openflow.Flow{Table: 1, Priority: 100, Match: openflow.Match{
			CtState: &openflow.CtState{Set: openflow.CtTrk}, EthType: ip,
		}, Actions: []openflow.Action{openflow.Resubmit{Table: 2}}}),
		forward("10.10.0.10", vc),
		forward("10.10.0.11", v1),
		forward("10.10.0.12", v2),
	}
	require.NoError(t, b.Apply(context.Background(), ops))

	seen := map[string]int{}
	const conns = 24
	for i := 0; i < conns; i++ {
		reply, err := echo.Dial(context.Background(), client, "tcp", vip+":80", 3*time.Second)
		if err != nil {
			trace, _ := o.Trace(br, fmt.Sprintf("in_port=%d,tcp,dl_src=%s,dl_dst=%s,nw_src=10.10.0.10,nw_dst=%s,tp_src=40000,tp_dst=80", vc.OFPort, vc.MAC, gwMAC, vip))
			t.Fatalf("connection %d to %s:80: %v\ntrace:\n%s", i, vip, err, trace)
		}
		server, from, err := ovssandbox.ParseEchoReply(reply)
		require.NoError(t, err)
		host, _, err := net.SplitHostPort(from)
		require.NoError(t, err)
		require.Equal(t, "10.10.0.10", host, "the server must see the client's own address (no SNAT)")
		seen[server]++
	}
	t.Logf("connections per server: %v", seen)
	require.Len(t, seen, 2, "both servers must answer: %v", seen)
	require.Equal(t, conns, seen["server1"]+seen["server2"], "unexpected responders: %v", seen)
}

var (
	usingBucketRE = regexp.MustCompile(`-> using bucket (\d+)`)
	scoreRE       = regexp.MustCompile(`-> bucket (\d+): score`)
	setRegRE      = regexp.MustCompile(`set_field:(0x[0-9a-f]+|0)->reg3`)
)

// TestIntegrationLargeGroup installs a select group with 5,000 buckets (far beyond one 64 KiB
// message) in one Apply and checks by ofproto/trace, since ovs-ofctl 3.1 cannot decode such a
// group in dump-groups, that every bucket is present and that many of them are selected.
func TestIntegrationLargeGroup(t *testing.T) {
	o, _ := startOVS(t)
	br, b := addBridge(t, o)
	const n = 5000
	g := &openflow.Group{ID: 7, Type: openflow.GroupTypeSelect, HashFields: []string{"ip_src", "ip_dst", "tcp_src", "tcp_dst"}}
	for i := 0; i < n; i++ {
		g.Buckets = append(g.Buckets, openflow.Bucket{ID: uint32(i), Weight: 100, Actions: []openflow.Action{
			openflow.SetReg{Reg: 3, Value: uint32(0x10000 + i)},
			openflow.CT{Commit: true, Table: 5, HasTable: true, Zone: 65520,
				NAT: &openflow.NAT{Kind: openflow.NATDst, Addr: netip.AddrFrom4([4]byte{10, 20, byte(i >> 8), byte(i)}), Port: 8080}},
		}})
	}
	start := time.Now()
	require.NoError(t, b.Apply(context.Background(), []openflow.Op{
		addGroup(g),
		addFlow(openflow.Flow{Priority: 100, Match: openflow.Match{EthType: openflow.EthTypeIP, IPProto: openflow.ProtoTCP,
			Dst: netip.MustParsePrefix("10.96.0.10/32"), TpDst: 80}, Actions: []openflow.Action{openflow.GroupAction{ID: 7}}}),
	}))
	t.Logf("installed a %d-bucket group in %v", n, time.Since(start))

	start = time.Now()
	const traces, parallel = 300, 3
	chosen := make([]int, traces)
	errs := make([]error, traces)
	var wg sync.WaitGroup
	sem := make(chan struct{}, parallel)
	for i := 0; i < traces; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			out, err := o.Trace(br, fmt.Sprintf("in_port=LOCAL,tcp,nw_src=10.10.0.10,nw_dst=10.96.0.10,tp_src=%d,tp_dst=80", 20000+i))
			if err != nil {
				errs[i] = err
				return
			}
			m := usingBucketRE.FindStringSubmatch(out)
			if m == nil {
				errs[i] = fmt.Errorf("trace %d selected no bucket:\n%.2000s", i, out)
				return
			}
			id, _ := strconv.Atoi(m[1])
			// The bucket's own action must run: its set_field value identifies it.
			r := setRegRE.FindStringSubmatch(out)
			if r == nil || r[1] != fmt.Sprintf("%#x", 0x10000+id) {
				errs[i] = fmt.Errorf("trace %d: bucket %d ran %v", i, id, r)
				return
			}
			if i == 0 { // the first trace scores every bucket: all 5,000 are installed
				ids := map[string]bool{}
				for _, s := range scoreRE.FindAllStringSubmatch(out, -1) {
					ids[s[1]] = true
				}
				if len(ids) != n {
					errs[i] = fmt.Errorf("group has %d buckets, want %d", len(ids), n)
					return
				}
			}
			chosen[i] = id
		}(i)
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	distinct := map[int]bool{}
	for _, id := range chosen {
		distinct[id] = true
	}
	t.Logf("%d traces (parallelism %d) took %v and selected %d distinct buckets", traces, parallel, time.Since(start), len(distinct))
	require.GreaterOrEqual(t, len(distinct), 150)
}
