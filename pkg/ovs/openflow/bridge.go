package openflow

import (
	"context"
	"fmt"
)

// OpKind is what an Op does.
type OpKind uint8

const (
	// AddFlow adds a flow, replacing one with the same table, priority and match.
	AddFlow OpKind = iota + 1
	// ModifyFlowStrict replaces the actions (and cookie) of the flow with the same table,
	// priority and match.
	ModifyFlowStrict
	// DeleteFlowStrict deletes the flow with the same table, priority and match.
	DeleteFlowStrict
	// DeleteFlows deletes every flow matching Flow.Cookie/Flow.CookieMask (and Flow.Table when
	// TableSet); the flow's match and priority are ignored.
	DeleteFlows
	// AddGroup adds a group; adding an existing group ID is an error.
	AddGroup
	// ModifyGroup replaces a group's buckets.
	ModifyGroup
	// DeleteGroup deletes a group.
	DeleteGroup
)

func (k OpKind) String() string {
	switch k {
	case AddFlow:
		return "add-flow"
	case ModifyFlowStrict:
		return "modify-flow"
	case DeleteFlowStrict:
		return "delete-flow"
	case DeleteFlows:
		return "delete-flows"
	case AddGroup:
		return "add-group"
	case ModifyGroup:
		return "modify-group"
	case DeleteGroup:
		return "delete-group"
	}
	return "unknown-op"
}

// Op is one change in an Apply batch: a flow op uses Flow, a group op uses Group.
type Op struct {
	Kind  OpKind
	Flow  *Flow
	Group *Group
	// TableSet restricts a DeleteFlows op to Flow.Table.
	TableSet bool
}

// Check reports whether op carries what its kind needs (a flow op its Flow, a group op its
// Group); every backend checks a batch with it before sending anything.
func (op *Op) Check() error {
	switch op.Kind {
	case AddFlow, ModifyFlowStrict, DeleteFlowStrict, DeleteFlows:
		if op.Flow == nil {
			return fmt.Errorf("%s op has no Flow", op.Kind)
		}
	case AddGroup, ModifyGroup, DeleteGroup:
		if op.Group == nil {
			return fmt.Errorf("%s op has no Group", op.Kind)
		}
	default:
		return fmt.Errorf("unknown op kind %d", op.Kind)
	}
	return nil
}

// FlowFilter selects flows for DumpFlows. The zero filter selects every flow.
type FlowFilter struct {
	Table      uint8
	TableSet   bool
	Cookie     uint64
	CookieMask uint64
}

// Bridge is the narrow interface through which the agent programs an OpenFlow switch. It has
// no group dump on purpose: ovs-vswitchd 3.1 aborts when asked to dump a group whose
// description exceeds 64 KiB, so production code never dumps groups (implementations may offer
// one for tests).
type Bridge interface {
	// Apply executes ops in order as one atomic transaction: either all take effect or none.
	Apply(ctx context.Context, ops []Op) error
	// DumpFlows returns the flows selected by filter.
	DumpFlows(ctx context.Context, filter FlowFilter) ([]Flow, error)
}
