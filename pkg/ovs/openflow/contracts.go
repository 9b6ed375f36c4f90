package openflow

import (
	"context"
	"errors"
)

// FlowCounter counts the flows a filter selects without dumping them (ovs-ofctl dump-aggregate):
// one small reply whatever the bridge holds, so it is safe to call often and on bridges whose
// group dumps Open vSwitch cannot serve. A zero filter counts every flow.
type FlowCounter interface {
	CountFlows(ctx context.Context, filter FlowFilter) (int, error)
}

// OpIndexer is implemented by the errors of a rejected Apply that know which op of the batch
// the switch refused (its index in the ops given to Apply).
type OpIndexer interface {
	OpIndex() int
}

// RejectedOpIndex returns the index of the op a failed Apply names, if its error says which.
func RejectedOpIndex(err error) (int, bool) {
	var ix OpIndexer
	if errors.As(err, &ix) {
		return ix.OpIndex(), true
	}
	return 0, false
}
