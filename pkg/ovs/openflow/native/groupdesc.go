package native

import (
	"fmt"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// GroupDescHeaderLen is the fixed part of an OpenFlow 1.5 group description (OFPMP_GROUP_DESC
// reply entry) and MultipartReplyHeaderLen the header of the multipart reply that carries it.
const (
	GroupDescHeaderLen      = 16
	MultipartReplyHeaderLen = 16
)

// GroupDescLen returns the length of g's OpenFlow 1.5 group description as Open vSwitch encodes
// it in a group description reply (the same bucket and property encoding as a group mod), and
// the length of its longest bucket. Open vSwitch puts each group's description in one multipart
// reply of at most 65535 bytes.
func GroupDescLen(g *openflow.Group) (total, maxBucket int, err error) {
	typ, err := groupTypeCode(g.Type)
	if err != nil {
		return 0, 0, err
	}
	var w buf
	if typ == 1 {
		if err := appendSelectionMethod(&w, g); err != nil {
			return 0, 0, err
		}
	}
	for i := range g.Buckets {
		start := len(w.b)
		if err := appendBucket(&w, &g.Buckets[i], typ == 1); err != nil {
			return 0, 0, fmt.Errorf("group %d: %w", g.ID, err)
		}
		maxBucket = max(maxBucket, len(w.b)-start)
	}
	return GroupDescHeaderLen + len(w.b), maxBucket, nil
}
