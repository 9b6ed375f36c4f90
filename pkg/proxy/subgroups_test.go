package proxy

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/conntrack"
	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/openflowtest"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
	"github.com/antrea-proxy/antrea-proxy/pkg/reconciler"
)

// subIDsHeld returns the second-level group IDs o holds, in order.
func subIDsHeld(p *Proxier, o owner) []uint32 {
	var out []uint32
	for i := 0; ; i++ {
		id, ok := p.groups.lookup(subOwner(o, i))
		if !ok {
			return out
		}
		out = append(out, id)
	}
}

// TestSubGroupIDsLifecycle pins the second-level groups' IDs: allocated when a Service has more
// endpoints than one group holds, released once a committed bundle deleted their groups
// (shrinking, going back to one group, deleting the Service) and reused afterwards; the first
// bundle of a restarted proxier deletes them before adding anything, like every group ID.
func TestSubGroupIDsLifecycle(t *testing.T) {
	b := openflowtest.NewFakeBridge()
	h := newHarnessOn(t, testOptions(), b)
	svc := makeService("default", "big", "10.96.0.50")
	h.addService(svc)
	o := ownerOf(model.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "default", Name: "big"}, Port: "http", Protocol: model.TCP}, false)
	n := 2*pipeline.MaxGroupBuckets + 200
	cur := setLargeEndpoints(h, "default", "big", nil, n)
	h.sync()
	subs := subIDsHeld(h.p, o)
	require.Len(t, subs, pipeline.SubGroups(n))
	require.Equal(t, len(subs)+1, b.GroupCount(), "the sub-groups and the first-level group")
	st := h.p.Services()
	require.Len(t, st, 1)
	require.Equal(t, n, st[0].Ports[0].Buckets, "status counts the endpoints, not the first level's buckets")
	require.Zero(t, st[0].Ports[0].LocalGroupID)

	cur = setLargeEndpoints(h, "default", "big", cur, pipeline.MaxGroupBuckets+1)
	h.sync()
	require.Equal(t, subs[:2], subIDsHeld(h.p, o), "the third sub-group's ID is released")
	require.Equal(t, 3, b.GroupCount())

	cur = setLargeEndpoints(h, "default", "big", cur, pipeline.MaxGroupBuckets)
	h.sync()
	require.Empty(t, subIDsHeld(h.p, o))
	require.Equal(t, 1, b.GroupCount(), "one group of MaxGroupBuckets buckets")

	cur = setLargeEndpoints(h, "default", "big", cur, n)
	h.sync()
	again := subIDsHeld(h.p, o)
	require.ElementsMatch(t, subs, again, "released IDs are reused")

	// A restarted proxier (round 2) on the same bridge: its first bundle deletes every group ID
	// it adds before adding them.
	opts := testOptions()
	opts.Round = 2
	h2 := newHarnessOn(t, opts, b)
	h2.addService(svc)
	for _, s := range cur {
		h2.addSlice(s)
	}
	h2.sync()
	calls := b.ApplyCalls()
	first := calls[len(calls)-1]
	deleted := map[uint32]bool{}
	for _, op := range first {
		if op.Kind == of.DeleteGroup {
			deleted[op.Group.ID] = true
		}
		if op.Kind == of.AddGroup {
			require.True(t, deleted[op.Group.ID], "group %d added before it was deleted", op.Group.ID)
		}
	}
	for _, id := range subIDsHeld(h2.p, o) {
		require.True(t, deleted[id], "first bundle deletes sub-group %d", id)
	}
	require.Equal(t, len(again)+1, b.GroupCount())

	h2.deleteService(svc)
	h2.sync()
	require.Empty(t, subIDsHeld(h2.p, o))
	_, held := h2.p.ownerMeta[o]
	require.False(t, held)
	require.Zero(t, b.GroupCount())
}

// TestSplitGroupsUDPFlushes pins the UDP conntrack bookkeeping of a split set: every endpoint
// of the second-level groups counts as selected, and only the entry of one that leaves is
// stale.
func TestSplitGroupsUDPFlushes(t *testing.T) {
	n := pipeline.MaxGroupBuckets + 10
	eps := make([]model.Endpoint, n)
	for i := range eps {
		eps[i] = model.Endpoint{IP: netip.AddrFrom4([4]byte{10, 64, byte((i + 1) >> 8), byte(i + 1)}), Port: 53, Ready: true, Serving: true}
	}
	port := model.ServicePort{Protocol: model.UDP, Port: 53, ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.53")}}
	node := pipeline.NodeConfig{Round: 1, IPv4: true, GatewayOFPort: 2, GatewayIPv4: netip.MustParseAddr("10.0.0.1")}
	build := func(eps []model.Endpoint) desired {
		d := desired{port: port, subGIDs: []uint32{2, 3}}
		d.flows = pipeline.ServicePort(node, pipeline.ServicePortInput{Port: port, Endpoints: eps, GroupID: 1, SubGroupIDs: d.subGIDs})
		return d
	}
	before := build(eps)
	require.Len(t, before.flows.Groups, 3)
	sel := selectedOf(before)
	require.Len(t, sel.endpoints, n)
	after := build(append(append([]model.Endpoint(nil), eps[:5]...), eps[6:]...))
	require.True(t, udpChanged(sel, true, after, nil))
	p := &Proxier{ownerEndpoints: map[owner]selected{{Kind: reconciler.KindServicePort, Key: "o"}: selectedOf(after)}}
	client := netip.MustParseAddr("10.10.0.10")
	var entries []conntrack.Entry
	for _, ep := range eps[4:7] {
		entries = append(entries, conntrack.Entry{Zone: pipeline.ZoneServiceV4, Proto: conntrack.ProtoUDP,
			Orig:  conntrack.Tuple{Src: client, Dst: port.ClusterIPs[0], SrcPort: 4000, DstPort: 53},
			Reply: conntrack.Tuple{Src: ep.IP, Dst: client, SrcPort: 53, DstPort: 4000}})
	}
	stale := staleUDP(entries, p.udpServing())
	require.Len(t, stale, 1)
	require.Equal(t, eps[5].IP, stale[0].entry.Reply.Src)
	require.Equal(t, StaleEndpointGone, stale[0].reason)
}
