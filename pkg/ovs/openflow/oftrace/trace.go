package oftrace

import (
	"fmt"
	"strings"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// StepKind says what a Step records.
type StepKind uint8

const (
	// StepFlow is a table lookup that matched a flow.
	StepFlow StepKind = iota + 1
	// StepMiss is a table lookup that matched no flow (OpenFlow 1.3+ table miss: no actions).
	StepMiss
	// StepGroup is the bucket a select group chose.
	StepGroup
	// StepCT is a ct action and what conntrack made of the packet.
	StepCT
	// StepLearn is a learn action (the flow it builds is in Trace.Learned).
	StepLearn
	// StepNote is anything else worth showing (e.g. an output to the in_port, skipped).
	StepNote
)

// Step is one thing that happened to the packet.
type Step struct {
	Kind StepKind
	// Depth is the nesting: resubmits, group buckets and ct recirculations add one.
	Depth int
	// Table is the table of the lookup, or the table whose flow ran the action.
	Table uint8
	// Flow is the matched flow (StepFlow).
	Flow *of.Flow
	// Group and Bucket are the group and the index of its chosen bucket (StepGroup).
	Group  uint32
	Bucket int
	// Text describes the step.
	Text string
}

// OutcomeKind is what finally happened to (a copy of) the packet.
type OutcomeKind uint8

const (
	// Output: the packet left through Outcome.Port.
	Output OutcomeKind = iota + 1
	// Normal: the packet was handed to the NORMAL (L2 switching) pipeline, which is not traced.
	Normal
	// Controller: the packet was sent to the OpenFlow controller (Outcome.Controller).
	Controller
	// Dropped: the pipeline ended without sending the packet anywhere.
	Dropped
)

func (k OutcomeKind) String() string {
	switch k {
	case Output:
		return "output"
	case Normal:
		return "normal"
	case Controller:
		return "controller"
	case Dropped:
		return "dropped"
	}
	return fmt.Sprintf("outcome-%d", uint8(k))
}

// Outcome is one place the packet went (a trace may output copies of a packet several times),
// or the single Dropped outcome of a trace that sent it nowhere.
type Outcome struct {
	Kind OutcomeKind
	// Port is the output port; an IN_PORT output reports the in_port.
	Port uint32
	// Packet is the packet as it left (Dropped: as it was when the pipeline ended).
	Packet Packet
	// Table is the table of the flow that output, or (Dropped) where the packet was dropped:
	// the last drop action, table miss or skipped output, else the last table it went through.
	Table uint8
	// Controller is the controller action (Controller).
	Controller of.Controller
	// Reason says why the packet was dropped (Dropped).
	Reason string
}

// String renders the outcome on one line.
func (o Outcome) String() string {
	switch o.Kind {
	case Output:
		return fmt.Sprintf("output:%d (table %d) %v", o.Port, o.Table, o.Packet)
	case Controller:
		return fmt.Sprintf("controller max_len=%d (table %d) %v", o.Controller.MaxLen, o.Table, o.Packet)
	case Dropped:
		return fmt.Sprintf("dropped in table %d (%s) %v", o.Table, o.Reason, o.Packet)
	}
	return fmt.Sprintf("%s (table %d) %v", o.Kind, o.Table, o.Packet)
}

// Trace is the walk of one packet through the pipeline.
type Trace struct {
	// Packet is the packet as it entered.
	Packet Packet
	Steps  []Step
	// Outcomes lists, in order, every output, NORMAL and controller action the packet reached;
	// when there is none, it holds one Dropped outcome.
	Outcomes []Outcome
	// Buckets are the bucket indexes chosen, one per select group the packet went through.
	Buckets []int
	// Learned are the flows the learn actions built (installed only with
	// Options.InstallLearned, or by the caller through Tracer.AddFlows).
	Learned []of.Flow
	// Conntrack is the connection tracker the trace ran against: the caller's for Trace, a
	// copy per trace for TraceAll.
	Conntrack *Conntrack
}

// Single returns the trace's only outcome; ok is false when there are several.
func (t *Trace) Single() (o Outcome, ok bool) {
	if len(t.Outcomes) != 1 {
		return Outcome{}, false
	}
	return t.Outcomes[0], true
}

// Outputs returns the Output outcomes.
func (t *Trace) Outputs() []Outcome {
	var out []Outcome
	for _, o := range t.Outcomes {
		if o.Kind == Output {
			out = append(out, o)
		}
	}
	return out
}

// String renders the trace like `ovs-appctl ofproto/trace`: one line per step, indented by
// depth, then the outcomes.
func (t *Trace) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "packet: %v\n", t.Packet)
	for _, s := range t.Steps {
		b.WriteString(strings.Repeat("    ", s.Depth))
		switch s.Kind {
		case StepFlow:
			fmt.Fprintf(&b, "%d. %s\n", s.Table, of.FormatFlow(s.Flow))
		case StepMiss:
			fmt.Fprintf(&b, "%d. no match (table miss)\n", s.Table)
		default:
			fmt.Fprintf(&b, "   %s\n", s.Text)
		}
	}
	for _, o := range t.Outcomes {
		fmt.Fprintf(&b, "=> %v\n", o)
	}
	return b.String()
}
