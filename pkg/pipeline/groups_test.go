package pipeline

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/native"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/oftrace"
)

// manyEndpoints returns n ready endpoints of one family, none on the node.
func manyEndpoints(n int, ipv6 bool) []model.Endpoint {
	out := make([]model.Endpoint, n)
	for i := range out {
		ip := netip.AddrFrom4([4]byte{10, 64, byte((i + 1) >> 8), byte(i + 1)})
		if ipv6 {
			ip = netip.MustParseAddr(fmt.Sprintf("fd00:10:64::%x:%x", (i+1)>>16, (i+1)&0xffff))
		}
		out[i] = model.Endpoint{IP: ip, Port: 65535, NodeName: "n2", Ready: true, Serving: true}
	}
	return out
}

func manyNode() NodeConfig {
	return NodeConfig{Round: 1, IPv4: true, IPv6: true, GatewayOFPort: 2, NodeName: "n1",
		GatewayIPv4: netip.MustParseAddr("10.10.1.1"), GatewayIPv6: netip.MustParseAddr("fd00:10:1::1")}
}

func manyPort(affinity bool, proto model.Protocol) model.ServicePort {
	p := model.ServicePort{Protocol: proto, Port: 80,
		ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("fd00:96::10")}}
	if affinity {
		p.StickyMaxAgeSeconds = 10800
	}
	return p
}

// subIDs returns k sub-group IDs from 100 up.
func subIDs(k int) []uint32 {
	out := make([]uint32, k)
	for i := range out {
		out[i] = uint32(100 + i)
	}
	return out
}

// TestMaxGroupBucketsFitsOneReply renders, for every bucket kind (both families, with and
// without session affinity, every protocol), a group of MaxGroupBuckets endpoints and a split
// set of 20,000 endpoints, and requires each group's description, as the native encoder writes
// it, to fit with its multipart reply header in 65535 bytes.
func TestMaxGroupBucketsFitsOneReply(t *testing.T) {
	const limit = 65535
	largest, headers := 0, 0
	for _, ipv6 := range []bool{false, true} {
		for _, affinity := range []bool{false, true} {
			for _, proto := range []model.Protocol{model.TCP, model.UDP, model.SCTP} {
				name := fmt.Sprintf("ipv6=%v/affinity=%v/%s", ipv6, affinity, proto)
				for _, n := range []int{MaxGroupBuckets, 20000} {
					out := ServicePort(manyNode(), ServicePortInput{Port: manyPort(affinity, proto), IPv6: ipv6,
						Endpoints: manyEndpoints(n, ipv6), GroupID: 1, SubGroupIDs: subIDs(SubGroups(n))})
					require.Len(t, out.Groups, max(1, SubGroups(n)+1), name)
					for _, g := range out.Groups {
						total, bucket, err := native.GroupDescLen(g)
						require.NoError(t, err, name)
						require.LessOrEqual(t, native.MultipartReplyHeaderLen+total, limit,
							"%s: group %d of %d buckets (%d bytes each) does not fit one multipart reply", name, g.ID, len(g.Buckets), bucket)
						if n == MaxGroupBuckets {
							if bucket > largest {
								largest, headers = bucket, native.MultipartReplyHeaderLen+total-len(g.Buckets)*bucket
							}
							t.Logf("%s: %d buckets of %d bytes: %d bytes with the reply header", name, len(g.Buckets), bucket, native.MultipartReplyHeaderLen+total)
						}
					}
				}
			}
		}
	}
	t.Logf("largest bucket %d bytes, %d bytes of headers and properties: %d buckets would fit", largest, headers, (limit-headers)/largest)
}

// TestSplitGroups pins the split: up to MaxGroupBuckets endpoints one group exactly as before;
// above, sub-groups of sizes differing by at most one that hold every endpoint once, hashed
// with their own basis, and a first-level group weighted by their sizes; session affinity still
// keys on the first-level group's ID; without enough sub-group IDs, one group.
func TestSplitGroups(t *testing.T) {
	in := ServicePortInput{Port: manyPort(true, model.TCP), GroupID: 7, Endpoints: manyEndpoints(MaxGroupBuckets, false),
		SubGroupIDs: subIDs(3)}
	out := ServicePort(manyNode(), in)
	require.Len(t, out.Groups, 1)
	require.Equal(t, uint32(7), out.Groups[0].ID)
	require.Zero(t, out.Groups[0].SelectionParam)
	require.Len(t, out.Groups[0].Buckets, MaxGroupBuckets)

	n := 2*MaxGroupBuckets + 1
	in.Endpoints = manyEndpoints(n, false)
	out = ServicePort(manyNode(), in)
	require.Len(t, out.Groups, 4)
	top := out.Groups[3]
	require.Equal(t, uint32(7), top.ID)
	seen := map[string]int{}
	for j, sub := range out.Groups[:3] {
		require.Equal(t, uint32(100+j), sub.ID)
		require.Equal(t, uint64(SubGroupSelectionParam), sub.SelectionParam)
		require.Equal(t, top.HashFields, sub.HashFields)
		require.Equal(t, of.Bucket{ID: uint32(j), Weight: uint16(len(sub.Buckets)), Actions: []of.Action{of.GroupAction{ID: sub.ID}}}, top.Buckets[j])
		require.InDelta(t, n/3, len(sub.Buckets), 1)
		for _, b := range sub.Buckets {
			require.Equal(t, uint16(100), b.Weight)
			seen[of.FormatActions(b.Actions)]++
		}
	}
	require.Len(t, seen, n, "every endpoint in exactly one sub-group")
	learned := 0
	for _, f := range out.Flows {
		if f.Table == TableSessionAffinityLearn {
			learned++
			require.Contains(t, f.Match.Regs, of.RegMatch{Reg: RegServiceGroup, Value: 7})
		}
	}
	require.Equal(t, n, learned)
	for _, f := range out.Flows {
		for _, a := range f.Actions {
			if g, ok := a.(of.GroupAction); ok {
				require.Equal(t, uint32(7), g.ID, "flows go to the first-level group only")
			}
		}
	}

	in.SubGroupIDs = subIDs(2)
	out = ServicePort(manyNode(), in)
	require.Len(t, out.Groups, 1, "too few sub-group IDs: one group")
}

// TestSplitGroupsTrace sends new connections from a pod to a split Service through the packet
// tracer (base flows, the Service's flows and both levels of groups), with and without session
// affinity: each is DNATed to one of the Service's endpoints, every sub-group serves some, and
// with affinity the learned flow carries the first-level group's cookie.
func TestSplitGroupsTrace(t *testing.T) {
	n := manyNode()
	const count = 3*MaxGroupBuckets - 7
	eps := manyEndpoints(count, false)
	isEndpoint := map[netip.Addr]bool{}
	for _, e := range eps {
		isEndpoint[e.IP] = true
	}
	for _, affinity := range []bool{false, true} {
		out := ServicePort(n, ServicePortInput{Port: manyPort(affinity, model.TCP), GroupID: 1, Endpoints: eps,
			SubGroupIDs: subIDs(SubGroups(count))})
		require.Len(t, out.Groups, 4)
		var groups []of.Group
		for _, g := range out.Groups {
			groups = append(groups, *g)
		}
		tr, err := oftrace.New(append(append(BaseFlows(n), out.Flows...), out.EndpointFlows...), groups, oftrace.Options{})
		require.NoError(t, err)
		sub := map[netip.Addr]int{}
		for j := range 3 {
			for _, b := range groups[j].Buckets {
				switch a := b.Actions[0].(type) {
				case of.CT:
					sub[a.NAT.Addr] = j
				case of.SetReg:
					sub[netip.AddrFrom4([4]byte(be32bytes(a.Value)))] = j
				}
			}
		}
		perSub := make([]int, 3)
		start := time.Now()
		for sp := range uint16(300) {
			p := oftrace.Packet{InPort: 5, EthType: of.EthTypeIP, Proto: of.ProtoTCP, Src: netip.MustParseAddr("10.10.1.5"),
				Dst: netip.MustParseAddr("10.96.0.10"), SrcPort: 20000 + sp, DstPort: 80, TCPFlags: of.TCPSyn}
			res, err := tr.Trace(p, oftrace.NewConntrack())
			require.NoError(t, err)
			got, ok := res.Single()
			require.True(t, ok, "affinity=%v: %s", affinity, res)
			require.True(t, isEndpoint[got.Packet.Dst], "affinity=%v: DNATed to %s", affinity, got.Packet.Dst)
			perSub[sub[got.Packet.Dst]]++
			if affinity {
				require.Len(t, res.Learned, 1)
				require.Equal(t, uint64(1), CookieObject(res.Learned[0].Cookie), "affinity=%v", affinity)
			}
		}
		t.Logf("affinity=%v: 300 traces in %v, per sub-group %v", affinity, time.Since(start), perSub)
		for j, c := range perSub {
			require.Greater(t, c, 50, "affinity=%v: sub-group %d chosen %d times of 300", affinity, j, c)
		}
	}
}

func be32bytes(v uint32) []byte { return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }

// TestSplitLocalGroup pins a split local group (externalTrafficPolicy=Local with more local
// endpoints than one group holds): it uses LocalSubGroupIDs, the cluster group its own, and the
// NodePort flow without the internal bit goes to the first-level local group.
func TestSplitLocalGroup(t *testing.T) {
	eps := manyEndpoints(MaxGroupBuckets+1, false)
	for i := range eps {
		eps[i].Local = true
	}
	port := manyPort(false, model.TCP)
	port.NodePort, port.ExternalPolicyLocal = 30080, true
	out := ServicePort(manyNode(), ServicePortInput{Port: port, Endpoints: eps, GroupID: 1, LocalGroupID: 2,
		SubGroupIDs: []uint32{10, 11}, LocalSubGroupIDs: []uint32{20, 21}})
	var ids []uint32
	for _, g := range out.Groups {
		ids = append(ids, g.ID)
	}
	require.Equal(t, []uint32{10, 11, 1, 20, 21, 2}, ids)
	toLocal := false
	for _, f := range out.Flows {
		for _, a := range f.Actions {
			if g, ok := a.(of.GroupAction); ok {
				require.Contains(t, []uint32{1, 2}, g.ID, "flows go to first-level groups only")
				toLocal = toLocal || g.ID == 2
			}
		}
	}
	require.True(t, toLocal, "some flow uses the local group")
}
