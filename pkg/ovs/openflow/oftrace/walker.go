package oftrace

import (
	"errors"
	"fmt"
	"hash/fnv"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// walker carries one trace's state.
type walker struct {
	t      *Tracer
	ct     *Conntrack
	choose func(*of.Group, Packet) (int, error)
	trace  *Trace
	steps  int
	// Where the packet was last dropped (drop action, miss, skipped output) or last seen.
	dropTable  uint8
	dropReason string
	dropPacket Packet
}

// frame is where an action list runs.
type frame struct {
	table    uint8
	depth    int
	inBucket bool
}

func (w *walker) step(s Step) { w.trace.Steps = append(w.trace.Steps, s) }

func (w *walker) dropped(p *Packet, table uint8, reason string) {
	w.dropTable, w.dropReason, w.dropPacket = table, reason, p.clone()
}

func (w *walker) outcome(o Outcome) { w.trace.Outcomes = append(w.trace.Outcomes, o) }

func (w *walker) tick() error {
	w.steps++
	if w.steps > w.t.opts.MaxSteps {
		return fmt.Errorf("trace exceeds %d steps (a loop?)", w.t.opts.MaxSteps)
	}
	return nil
}

// table looks the packet up in table and runs the matched flow's actions.
func (w *walker) table(p *Packet, table uint8, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("table %d: nesting deeper than %d", table, maxDepth)
	}
	if err := w.tick(); err != nil {
		return err
	}
	f, err := w.t.lookup(table, p)
	if err != nil {
		return err
	}
	w.dropTable, w.dropReason, w.dropPacket = table, "", p.clone()
	if f == nil {
		w.step(Step{Kind: StepMiss, Depth: depth, Table: table})
		w.dropped(p, table, "table miss")
		return nil
	}
	w.step(Step{Kind: StepFlow, Depth: depth, Table: table, Flow: f})
	return w.actions(p, f.Actions, frame{table: table, depth: depth})
}

// actions runs an action list on the packet.
func (w *walker) actions(p *Packet, actions []of.Action, fr frame) error {
	if len(actions) == 0 {
		w.dropped(p, fr.table, "drop")
	}
	for i, a := range actions {
		if err := w.tick(); err != nil {
			return err
		}
		if err := w.action(p, a, i == len(actions)-1, fr); err != nil {
			return fmt.Errorf("table %d, action %s: %w", fr.table, of.FormatAction(a), err)
		}
	}
	return nil
}

func (w *walker) action(p *Packet, a of.Action, last bool, fr frame) error {
	switch a := a.(type) {
	case of.GotoTable:
		if fr.inBucket || !last || a.Table <= fr.table {
			return errors.New("goto_table must be the last action of a flow and go to a later table")
		}
		return w.table(p, a.Table, fr.depth)
	case of.Resubmit:
		return w.table(p, a.Table, fr.depth+1)
	case of.SetReg:
		if int(a.Reg) >= NumRegs {
			return fmt.Errorf("reg%d does not exist", a.Reg)
		}
		mask := a.Mask
		if mask == 0 {
			mask = ^uint32(0)
		}
		p.Regs[a.Reg] = p.Regs[a.Reg]&^mask | a.Value&mask
	case of.SetEthDst:
		p.EthDst = append([]byte(nil), a.MAC...)
	case of.SetEthSrc:
		p.EthSrc = append([]byte(nil), a.MAC...)
	case of.Move:
		return w.move(p, a)
	case of.CT:
		return w.conntrack(p, a, fr)
	case of.GroupAction:
		return w.group(p, a.ID, fr)
	case of.Learn:
		f, err := learnedFlow(a, p)
		if err != nil {
			return err
		}
		w.trace.Learned = append(w.trace.Learned, f)
		w.step(Step{Kind: StepLearn, Depth: fr.depth, Table: fr.table, Text: "learned " + of.FormatFlow(&f)})
		// A learn limit is not modelled: the learn always succeeds, so its result bit is 1.
		if a.ResultDst.Field != "" {
			dst, err := resolve(a.ResultDst)
			if err != nil {
				return err
			}
			return dst.write(p, u128{lo: 1})
		}
	case of.MeterAction:
		// Meters are not modelled: every packet conforms.
		w.step(Step{Kind: StepNote, Depth: fr.depth, Table: fr.table, Text: "meter:" + fmt.Sprint(a.ID) + " (not modelled: passes)"})
	case of.Output:
		return w.output(p, a.Port, fr)
	case of.OutputInPort:
		w.outcome(Outcome{Kind: Output, Port: p.InPort, Packet: p.clone(), Table: fr.table})
	case of.Normal:
		w.outcome(Outcome{Kind: Normal, Packet: p.clone(), Table: fr.table})
	case of.Drop:
		w.dropped(p, fr.table, "drop")
	case of.Controller:
		if a.Pause {
			return fmt.Errorf("controller(pause): %w", ErrUnsupported)
		}
		w.outcome(Outcome{Kind: Controller, Packet: p.clone(), Table: fr.table, Controller: a})
	case of.SetCtMark:
		return errors.New("set ct_mark outside a ct action's exec")
	default:
		return fmt.Errorf("action %T: %w", a, ErrUnsupported)
	}
	return nil
}

func (w *walker) output(p *Packet, port uint32, fr frame) error {
	switch port {
	case of.PortInPort:
		return w.action(p, of.OutputInPort{}, false, fr)
	case of.PortNormal:
		return w.action(p, of.Normal{}, false, fr)
	case p.InPort:
		w.step(Step{Kind: StepNote, Depth: fr.depth, Table: fr.table, Text: fmt.Sprintf("skipping output to input port %d", port)})
		w.dropped(p, fr.table, "output to the in_port skipped")
		return nil
	}
	w.outcome(Outcome{Kind: Output, Port: port, Packet: p.clone(), Table: fr.table})
	return nil
}

func (w *walker) move(p *Packet, a of.Move) error {
	src, err := resolve(a.Src)
	if err != nil {
		return err
	}
	dst, err := resolve(a.Dst)
	if err != nil {
		return err
	}
	if src.n != dst.n {
		return fmt.Errorf("move %s to %s: widths differ", src, dst)
	}
	v, err := src.read(p)
	if err != nil {
		return err
	}
	return dst.write(p, v)
}

// conntrack runs a ct action. With table=N the packet as conntrack left it continues in table
// N and the caller's packet carries on unchanged, as OVS's recirculation does.
func (w *walker) conntrack(p *Packet, a of.CT, fr frame) error {
	if !a.HasTable && a.NAT != nil {
		return fmt.Errorf("ct(nat) without table=: %w", ErrUnsupported)
	}
	q := p.clone()
	text, err := w.ct.execute(a, &q)
	if err != nil {
		return err
	}
	w.step(Step{Kind: StepCT, Depth: fr.depth, Table: fr.table, Text: "ct " + text})
	if !a.HasTable {
		return nil
	}
	return w.table(&q, a.Table, fr.depth+1)
}

// group runs the chosen bucket of a select group on a copy of the packet.
func (w *walker) group(p *Packet, id uint32, fr frame) error {
	g := w.t.groups[id]
	if g == nil {
		return fmt.Errorf("group %d does not exist", id)
	}
	if g.Type != "" && g.Type != of.GroupTypeSelect {
		return fmt.Errorf("group type %q: %w", g.Type, ErrUnsupported)
	}
	i, err := w.choose(g, *p)
	if err != nil {
		return err
	}
	if i < 0 {
		w.step(Step{Kind: StepGroup, Depth: fr.depth, Table: fr.table, Group: id, Bucket: -1, Text: fmt.Sprintf("group %d: no live bucket", id)})
		w.dropped(p, fr.table, fmt.Sprintf("group %d has no live bucket", id))
		return nil
	}
	if i >= len(g.Buckets) {
		return fmt.Errorf("group %d: bucket index %d out of %d", id, i, len(g.Buckets))
	}
	b := &g.Buckets[i]
	w.trace.Buckets = append(w.trace.Buckets, i)
	w.step(Step{Kind: StepGroup, Depth: fr.depth, Table: fr.table, Group: id, Bucket: i,
		Text: fmt.Sprintf("group %d bucket %d: %s", id, i, of.FormatBucket(b))})
	q := p.clone()
	return w.actions(&q, b.Actions, frame{table: fr.table, depth: fr.depth + 1, inBucket: true})
}

// HashBucket picks a live (non-zero weight) bucket from the group's hash fields of the packet,
// in proportion to the weights, deterministically: the same packet always takes the same
// bucket. The hash is a stand-in (FNV-1a), not Open vSwitch's, so which endpoint a given
// 5-tuple gets differs from a real switch; like Open vSwitch's, it starts from the group's
// selection_method_param, so groups with different params choose independently (a second-level
// group of a split endpoint set). It returns -1 when no bucket is live.
func HashBucket(g *of.Group, p Packet) (int, error) {
	names := g.HashFields
	if len(names) == 0 {
		names = []string{"ip_src", "ip_dst", "tcp_src", "tcp_dst"}
	}
	h := fnv.New64a()
	if g.SelectionParam != 0 {
		var b [8]byte
		for i := range b {
			b[i] = byte(g.SelectionParam >> (8 * i))
		}
		h.Write(b[:])
	}
	for _, n := range names {
		f, err := fieldNamed(n)
		if err != nil {
			return 0, fmt.Errorf("group %d hash field: %w", g.ID, err)
		}
		var v u128
		if f.ok(&p) {
			v = f.get(&p)
		}
		var b [16]byte
		for i := 0; i < 8; i++ {
			b[i], b[8+i] = byte(v.hi>>(8*i)), byte(v.lo>>(8*i))
		}
		h.Write(b[:])
	}
	var total uint64
	for _, b := range g.Buckets {
		total += uint64(b.Weight)
	}
	if total == 0 {
		return -1, nil
	}
	x := h.Sum64() % total
	for i, b := range g.Buckets {
		if x < uint64(b.Weight) {
			return i, nil
		}
		x -= uint64(b.Weight)
	}
	return -1, nil
}

// FixedBucket returns a SelectBucket that always takes bucket i (an error for a group with
// fewer buckets).
func FixedBucket(i int) func(*of.Group, Packet) (int, error) {
	return func(g *of.Group, _ Packet) (int, error) {
		if i < 0 || i >= len(g.Buckets) {
			return 0, fmt.Errorf("group %d has %d buckets, bucket %d asked for", g.ID, len(g.Buckets), i)
		}
		return i, nil
	}
}
