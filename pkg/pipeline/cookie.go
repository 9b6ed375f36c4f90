package pipeline

import "fmt"

// Cookie layout:
//
//	bits 48..63  round number: a restarted agent installs a new round, then deletes older ones
//	bits 40..47  category: which feature owns the flow
//	bits  0..39  object: the Service port's group ID, or 0 for node-level flows
const (
	roundShift    = 48
	categoryShift = 40

	// RoundMask selects a round.
	RoundMask uint64 = 0xffff << roundShift
	// CategoryMask selects a category.
	CategoryMask uint64 = 0xff << categoryShift
	// ObjectMask selects the object of a category.
	ObjectMask uint64 = 1<<categoryShift - 1
)

// Category says which feature owns a flow.
type Category uint8

const (
	// CategoryBase is node-level pipeline flows (table defaults, conntrack, NodePort addresses).
	CategoryBase Category = 1
	// CategoryService is the flows of one Service port (object = its group ID).
	CategoryService Category = 2
	// CategoryEndpoint is endpoint DNAT flows (session affinity), shared by every Service port
	// that selects them.
	CategoryEndpoint Category = 3
	// CategoryPod is the node data path's per-pod flows.
	CategoryPod Category = 4
	// CategoryAffinity is flows learned for session affinity (object = the Service port's group
	// ID). They expire on their own; an agent restart keeps them.
	CategoryAffinity Category = 6
)

func (c Category) String() string {
	switch c {
	case CategoryBase:
		return "base"
	case CategoryService:
		return "service"
	case CategoryEndpoint:
		return "endpoint"
	case CategoryPod:
		return "pod"
	case CategoryAffinity:
		return "affinity"
	case CategoryGateway:
		return "gateway"
	}
	return fmt.Sprintf("category-%d", uint8(c))
}

// Cookie builds a flow cookie.
func Cookie(round uint16, cat Category, object uint64) uint64 {
	return uint64(round)<<roundShift | uint64(cat)<<categoryShift | object&ObjectMask
}

// CookieRound returns the round of a cookie.
func CookieRound(c uint64) uint16 { return uint16(c >> roundShift) }

// CookieCategory returns the category of a cookie.
func CookieCategory(c uint64) Category { return Category(c >> categoryShift) }

// CookieObject returns the object of a cookie.
func CookieObject(c uint64) uint64 { return c & ObjectMask }

// ServiceCookieMask selects the flows of one Service port (any round).
const ServiceCookieMask = CategoryMask | ObjectMask
