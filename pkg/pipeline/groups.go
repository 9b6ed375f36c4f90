package pipeline

import (
	"github.com/antrea-proxy/antrea-proxy/pkg/model"
	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// MaxGroupBuckets is the most endpoints one select group holds. Open vSwitch answers a group
// description request with one OpenFlow multipart reply per group, whose length is 16 bits: a
// group whose description is longer cannot be dumped (ovs-ofctl reports OFPGMFC_BAD_BUCKET and
// ovs-vswitchd 3.1 may abort on "assertion start_ofs <= UINT16_MAX"). As the native encoder
// writes them, the largest bucket is an IPv6 session-affinity bucket of 112 bytes (IPv6 without
// affinity 96, IPv4 80 without and 64 with affinity), and the selection-method property with
// four IPv6 hash fields is 96 bytes, so
//
//	65535 − 16 (multipart reply header) − 16 (group description header) − 96 = 65407 bytes
//	65407 / 112 = 583 buckets;
//
// 512 leaves 12 % of margin for actions that grow (512 × 112 + 128 = 57472 bytes).
// TestMaxGroupBucketsFitsOneReply measures every bucket kind.
const MaxGroupBuckets = 512

// SubGroups returns how many second-level groups n endpoints are split over: 0 when one group
// holds them (n ≤ MaxGroupBuckets), else ⌈n / MaxGroupBuckets⌉. A caller that gives a port
// fewer sub-group IDs than this for a set of n endpoints gets one group of n buckets.
func SubGroups(n int) int {
	if n <= MaxGroupBuckets {
		return 0
	}
	return (n + MaxGroupBuckets - 1) / MaxGroupBuckets
}

// SubGroupSelectionParam is the hash basis (selection_method_param) of second-level groups. The
// first level hashes the same fields with basis 0: with the same basis both levels would rank
// their buckets from the same hash value, and a connection that picked sub-group j would be
// more likely to pick bucket j in it too. A different basis makes the two choices independent.
const SubGroupSelectionParam = 1

// appendGroups appends to out the select groups of one endpoint set: one group of eps (group),
// or, when eps needs sub-groups (SubGroups) and subs has enough IDs, second-level groups of at
// most MaxGroupBuckets endpoints and a first-level group id whose buckets go to them. The
// first level's bucket weights are the sub-groups' sizes, which differ by at most one, so each
// endpoint is chosen with the same probability. Sub-groups come first: a bundle adds them
// before the group that refers to them.
func (s *servicePort) appendGroups(out []*of.Group, id uint32, subs []uint32, eps []model.Endpoint) []*of.Group {
	k := SubGroups(len(eps))
	if k == 0 || len(subs) < k {
		return append(out, s.group(id, eps))
	}
	top := &of.Group{ID: id, Type: of.GroupTypeSelect, HashFields: hashFields(s.fam, s.proto),
		Buckets: make([]of.Bucket, k)}
	base, extra := len(eps)/k, len(eps)%k
	from := 0
	for j := range k {
		n := base
		if j < extra {
			n++
		}
		sub := s.group(subs[j], eps[from:from+n])
		sub.SelectionParam = SubGroupSelectionParam
		out = append(out, sub)
		top.Buckets[j] = of.Bucket{ID: uint32(j), Weight: uint16(n), Actions: []of.Action{of.GroupAction{ID: subs[j]}}}
		from += n
	}
	return append(out, top)
}
