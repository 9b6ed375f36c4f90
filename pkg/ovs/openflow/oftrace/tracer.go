// Package oftrace traces packets through a pipeline of typed OpenFlow flows and groups (as
// openflow.Bridge implementations such as openflowtest.FakeBridge hold them), in pure Go, the
// way `ovs-appctl ofproto/trace` does on a real switch: data-path behaviour can be tested
// without root or Open vSwitch.
//
// A trace starts at table 0 and, in each table, takes the highest-priority flow that matches
// (two matching flows of the same priority are an ErrAmbiguous error: OVS would pick either).
// Actions run in order with OVS semantics: resubmit runs a table and returns, goto_table
// continues in a later table, "drop" is an empty action list (a resubmit to a drop flow
// returns), a table miss does nothing, an output to the in_port is skipped, a select group runs
// one bucket (Options.SelectBucket, or every bucket with TraceAll) on a copy of the packet,
// ct(table=N) forks: the packet, as conntrack left it, continues in table N (see Conntrack for
// what ct does). The packet is dropped when nothing output it.
//
// Everything the typed model (pkg/ovs/openflow) can express is supported, except: ct(nat)
// without table= (OVS applies the NAT in the datapath without showing it to later actions), a
// controller action with pause, ct of ICMP errors, non-select groups, and move/learn on fields
// other than reg0-15, xxreg0-3, IPv4/IPv6 addresses, TCP/UDP/SCTP ports, Ethernet addresses,
// pkt_mark, metadata and (read-only) in_port, eth_type, ip_proto, ct_mark and ct_zone. Those
// return errors wrapping ErrUnsupported rather than guesses.
//
// It is not for tests only: the agent's `antctl trace` (pkg/agent/servicetrace) walks the
// flows and groups its writers installed with it, and the data-path tests (pkg/pipeline's,
// test/tracer) trace FakeBridge state with it.
package oftrace

import (
	"errors"
	"fmt"
	"slices"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// ErrAmbiguous is returned when two flows of one table match a packet at the same priority.
var ErrAmbiguous = errors.New("ambiguous flows")

const (
	defaultMaxSteps = 1000
	maxDepth        = 64 // OVS's resubmit depth limit
)

// Options tune a Tracer.
type Options struct {
	// SelectBucket chooses the bucket of a select group that a packet takes (an index into
	// g.Buckets); nil means HashBucket. FixedBucket always takes the same one.
	SelectBucket func(g *of.Group, p Packet) (int, error)
	// InstallLearned makes Trace install the flows its learn actions built once the trace is
	// done, so that later traces see them, as they would on OVS.
	InstallLearned bool
	// MaxSteps bounds the number of actions and lookups of one trace (default 1000).
	MaxSteps int
}

// Tracer traces packets through one set of flows and groups. It is not safe for concurrent use.
type Tracer struct {
	opts   Options
	tables map[uint8][]of.Flow // by priority, highest first; equal priorities in input order
	groups map[uint32]*of.Group
}

// New returns a Tracer over flows and groups (e.g. from DumpFlows and DumpGroups).
func New(flows []of.Flow, groups []of.Group, opts Options) (*Tracer, error) {
	if opts.SelectBucket == nil {
		opts.SelectBucket = HashBucket
	}
	if opts.MaxSteps <= 0 {
		opts.MaxSteps = defaultMaxSteps
	}
	t := &Tracer{opts: opts, tables: map[uint8][]of.Flow{}, groups: map[uint32]*of.Group{}}
	for i := range groups {
		g := groups[i]
		if _, dup := t.groups[g.ID]; dup {
			return nil, fmt.Errorf("group %d is given twice", g.ID)
		}
		t.groups[g.ID] = &g
	}
	t.AddFlows(flows...)
	return t, nil
}

// AddFlows adds flows, replacing any flow with the same table, priority and match (as an OVS
// add-flow does), e.g. the Learned flows of a trace.
func (t *Tracer) AddFlows(flows ...of.Flow) {
	adds := map[uint8][]of.Flow{}
	for _, f := range flows {
		adds[f.Table] = append(adds[f.Table], f)
	}
	for tbl, add := range adds {
		// Each flow's key once (not once per added flow: a Service's thousands of learn flows).
		cur := t.tables[tbl]
		out := make([]of.Flow, 0, len(cur)+len(add))
		gone := make([]bool, 0, len(cur)+len(add))
		at := make(map[string]int, len(cur)+len(add))
		for _, f := range append(slices.Clip(cur), add...) {
			key := flowKey(&f)
			if i, ok := at[key]; ok {
				gone[i] = true
			}
			at[key] = len(out)
			out, gone = append(out, f), append(gone, false)
		}
		kept := out[:0]
		for i, f := range out {
			if !gone[i] {
				kept = append(kept, f)
			}
		}
		slices.SortStableFunc(kept, func(a, b of.Flow) int { return int(b.Priority) - int(a.Priority) })
		t.tables[tbl] = kept
	}
}

func flowKey(f *of.Flow) string {
	c := of.CanonicalFlow(*f)
	return of.FormatFlowKey(&c)
}

// lookup returns the flow of table that the packet matches, nil on a miss.
func (t *Tracer) lookup(table uint8, p *Packet) (*of.Flow, error) {
	flows := t.tables[table]
	var found *of.Flow
	for i := range flows {
		f := &flows[i]
		if found != nil && f.Priority < found.Priority {
			break
		}
		if !matches(&f.Match, p) {
			continue
		}
		if found != nil {
			return nil, fmt.Errorf("table %d, priority %d: %q and %q both match %v: %w", table, f.Priority,
				of.FormatFlowKey(found), of.FormatFlowKey(f), *p, ErrAmbiguous)
		}
		found = f
	}
	return found, nil
}

// Trace walks pkt through the pipeline against ct (nil: a fresh, empty Conntrack), which it
// updates. Groups take the bucket Options.SelectBucket chooses.
func (t *Tracer) Trace(pkt Packet, ct *Conntrack) (*Trace, error) {
	if ct == nil {
		ct = NewConntrack()
	}
	tr, err := t.run(pkt, ct, t.opts.SelectBucket)
	if err != nil {
		return tr, err
	}
	if t.opts.InstallLearned {
		t.AddFlows(tr.Learned...)
	}
	return tr, nil
}

// TraceAll walks pkt through every combination of select-group buckets (weight-0 buckets
// excepted), each against its own copy of ct, which is left unchanged: each Trace's Conntrack
// is the state after that path. Learned flows are recorded, never installed.
func (t *Tracer) TraceAll(pkt Packet, ct *Conntrack) ([]*Trace, error) {
	if ct == nil {
		ct = NewConntrack()
	}
	var out []*Trace
	var explore func(prefix []int) error
	explore = func(prefix []int) error {
		var counts []int // live buckets of every group met, in order
		choose := func(g *of.Group, _ Packet) (int, error) {
			live := liveBuckets(g)
			i := len(counts)
			counts = append(counts, len(live))
			if len(live) == 0 {
				return -1, nil
			}
			if i < len(prefix) {
				return live[prefix[i]], nil
			}
			return live[0], nil
		}
		tr, err := t.run(pkt, ct.Clone(), choose)
		if err != nil {
			return err
		}
		out = append(out, tr)
		choices := make([]int, len(counts))
		copy(choices, prefix)
		for j := len(prefix); j < len(counts); j++ {
			for b := 1; b < counts[j]; b++ {
				if err := explore(append(slices.Clone(choices[:j]), b)); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return out, explore(nil)
}

func liveBuckets(g *of.Group) []int {
	var live []int
	for i, b := range g.Buckets {
		if b.Weight > 0 {
			live = append(live, i)
		}
	}
	return live
}

// run is one trace with the given bucket chooser.
func (t *Tracer) run(pkt Packet, ct *Conntrack, choose func(*of.Group, Packet) (int, error)) (*Trace, error) {
	p := pkt.clone()
	p.CtState, p.CtMark, p.CtZone, p.conn, p.ctReply = 0, 0, 0, nil, false
	tr := &Trace{Packet: p.clone(), Conntrack: ct}
	if err := p.validate(); err != nil {
		return tr, err
	}
	w := &walker{t: t, ct: ct, choose: choose, trace: tr}
	if err := w.table(&p, 0, 0); err != nil {
		return tr, fmt.Errorf("%w\n%s", err, tr)
	}
	if len(tr.Outcomes) == 0 {
		reason := w.dropReason
		if reason == "" {
			reason = "no output action"
		}
		tr.Outcomes = []Outcome{{Kind: Dropped, Table: w.dropTable, Packet: w.dropPacket, Reason: reason}}
	}
	return tr, nil
}
