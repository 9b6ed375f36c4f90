package reconciler

import (
	"cmp"
	"strconv"
)

// Kind is the kind of a writer's owner of flows and groups.
type Kind uint8

// The kinds of owners. A lower kind wins a flow key contested with a higher one (the default
// rank), as the node-level flows win over a Service's.
const (
	// KindNode owns the proxier's node-level flows (one owner, key "").
	KindNode Kind = iota + 1
	// KindServicePort owns one Service port in one family: its cluster group, its local group
	// and its flows (key "ns/name:port/TCP/v4").
	KindServicePort
	// KindGateway owns the gateway's flows (one owner, key "").
	KindGateway
	// KindPod owns one pod's flows (key: the pod's OpenFlow port).
	KindPod
)

func (k Kind) String() string {
	switch k {
	case KindNode:
		return "node"
	case KindServicePort:
		return "service-port"
	case KindGateway:
		return "gateway"
	case KindPod:
		return "pod"
	}
	return "kind-" + strconv.Itoa(int(k))
}

// Owner owns a set of flows and groups in the installed state.
type Owner struct {
	Kind Kind
	Key  string
}

func (o Owner) String() string {
	if o.Key == "" {
		return o.Kind.String()
	}
	return o.Kind.String() + "/" + o.Key
}

// Compare orders owners by kind, then key.
func Compare(a, b Owner) int {
	if c := cmp.Compare(a.Kind, b.Kind); c != 0 {
		return c
	}
	return cmp.Compare(a.Key, b.Key)
}

// RankFunc orders owners for a contested flow key: negative when a wins over b.
type RankFunc func(a, b Owner) int
