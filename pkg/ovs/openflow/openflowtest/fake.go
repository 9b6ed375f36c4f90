// Package openflowtest provides FakeBridge, an in-memory openflow.Bridge for unit tests.
//
// FakeBridge is a fake with real state, not a mock: it keeps the flows and groups that Apply
// installs, enforces the OpenFlow/OVS rules a real switch enforces (atomic batches, group
// existence, replace-on-add, no-op strict modify of a missing flow, ...), and renders its whole
// state canonically for golden tests. Faults can be injected with FailNextApply, SetApplyHook
// and RejectOps, the state losses of OVS reproduced with Wipe (vswitchd restart) and ClearFlows
// (del-flows), and every Apply call is recorded so tests can count what a sync sent.
//
// The package exists for tests only: test files, other packages for tests (servicetracetest)
// and test/... import it, never production code; test/arch checks that no binary links it.
package openflowtest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// flowKey identifies a flow the way OVS does for strict modify/delete: table, priority and
// match (as canonical text of the normalized match).
type flowKey struct {
	table    uint8
	priority uint16
	match    string
}

// state is the switch content. Stored flows and groups are never mutated in place, so a
// shallow copy of the maps is an independent snapshot.
type state struct {
	flows  map[flowKey]openflow.Flow
	groups map[uint32]openflow.Group
}

func (s *state) clone() *state {
	out := &state{
		flows:  make(map[flowKey]openflow.Flow, len(s.flows)),
		groups: make(map[uint32]openflow.Group, len(s.groups)),
	}
	for k, f := range s.flows {
		out.flows[k] = f
	}
	for id, g := range s.groups {
		out.groups[id] = g
	}
	return out
}

// FakeBridge is an in-memory openflow.Bridge. The zero value is not usable; call NewFakeBridge.
// It is safe for concurrent use.
type FakeBridge struct {
	mu       sync.Mutex
	st       *state
	calls    [][]openflow.Op
	failNext error
	hook     func(ops []openflow.Op) error
	reject   func(op openflow.Op) error
}

var (
	_ openflow.Bridge      = (*FakeBridge)(nil)
	_ openflow.FlowCounter = (*FakeBridge)(nil)
)

// NewFakeBridge returns an empty fake switch.
func NewFakeBridge() *FakeBridge {
	return &FakeBridge{st: &state{
		flows:  map[flowKey]openflow.Flow{},
		groups: map[uint32]openflow.Group{},
	}}
}

// FailNextApply makes the next Apply return err without changing anything (the call is still
// recorded; the apply hook is not called). A nil err disarms it.
func (b *FakeBridge) FailNextApply(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failNext = err
}

// SetApplyHook installs fn to be called with (a copy of) the ops before each Apply; a non-nil
// return fails that Apply with that error and changes nothing. fn runs without the fake's lock
// held, so it may read the fake (Dump, DumpFlows, ...). A nil fn removes the hook.
func (b *FakeBridge) SetApplyHook(fn func(ops []openflow.Op) error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hook = fn
}

// RejectOps makes every later Apply fail, changing nothing, when pred returns an error for one
// of its ops: the Apply returns an *OpError naming the index of the first such op (as OVS names
// the op it refused) and wrapping pred's error. Unlike FailNextApply it stays armed until
// RejectOps(nil). It runs after the apply hook and before the ops are validated.
func (b *FakeBridge) RejectOps(pred func(op openflow.Op) error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reject = pred
}

// Wipe removes every flow and group, as a restart of ovs-vswitchd without flow restore leaves
// the bridge. Recorded calls and fault injections stay.
func (b *FakeBridge) Wipe() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.st = &state{flows: map[flowKey]openflow.Flow{}, groups: map[uint32]openflow.Group{}}
}

// ClearFlows removes the flows filter selects (the zero filter: every flow) and keeps every
// group, as `ovs-ofctl del-flows` does.
func (b *FakeBridge) ClearFlows(filter openflow.FlowFilter) {
	b.mu.Lock()
	defer b.mu.Unlock()
	next := b.st.clone()
	sel := filterFunc(filter)
	for k, f := range next.flows {
		if sel(&f) {
			delete(next.flows, k)
		}
	}
	b.st = next
}

// CountFlows returns how many flows filter selects (see DumpFlows for the filter's meaning).
func (b *FakeBridge) CountFlows(ctx context.Context, filter openflow.FlowFilter) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	sel := filterFunc(filter)
	n := 0
	for _, f := range b.st.flows {
		if sel(&f) {
			n++
		}
	}
	return n, nil
}

// TableStats reports every table holding a flow with its flow count, as OVS's table statistics
// do (no packet counters: the fake forwards no packets).
func (b *FakeBridge) TableStats(ctx context.Context) ([]openflow.TableStats, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	per := map[uint8]uint64{}
	for _, f := range b.st.flows {
		per[f.Table]++
	}
	out := make([]openflow.TableStats, 0, len(per))
	for t, n := range per {
		out = append(out, openflow.TableStats{Table: t, Active: n})
	}
	slices.SortFunc(out, func(a, b openflow.TableStats) int { return int(a.Table) - int(b.Table) })
	return out, nil
}

// Apply executes ops in order as one transaction, validating each op against the state left by
// the ops before it. On any error nothing changes; a validation error is an *OpError naming the
// op. Calls with a cancelled ctx are rejected with ctx.Err() and not recorded; every other call
// is recorded, whether it succeeds or not.
func (b *FakeBridge) Apply(ctx context.Context, ops []openflow.Op) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	b.calls = append(b.calls, cloneOps(ops))
	hook := b.hook
	if err := b.failNext; err != nil {
		b.failNext = nil
		b.mu.Unlock()
		return err
	}
	b.mu.Unlock()

	if hook != nil {
		if err := hook(cloneOps(ops)); err != nil {
			return err
		}
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	if b.reject != nil {
		for i, op := range ops {
			if err := b.reject(op); err != nil {
				return &OpError{Index: i, Kind: op.Kind, Object: opObject(op), Err: err}
			}
		}
	}
	next := b.st.clone()
	for i, op := range ops {
		if err := next.apply(op); err != nil {
			return &OpError{Index: i, Kind: op.Kind, Object: opObject(op), Err: err}
		}
	}
	b.st = next
	return nil
}

// apply validates one op and applies it to s. On error s may be partly changed; Apply discards it.
func (s *state) apply(op openflow.Op) error {
	if err := validateOp(op); err != nil {
		return err
	}
	switch op.Kind {
	case openflow.AddFlow, openflow.ModifyFlowStrict:
		if err := s.checkGroupRefs(op.Flow.Actions); err != nil {
			return err
		}
		key, f := storedFlow(op.Flow)
		if op.Kind == openflow.ModifyFlowStrict {
			old, ok := s.flows[key]
			if !ok {
				return nil // OVS: a strict modify of a missing flow does nothing.
			}
			// OVS keeps the old timeouts on modify, and the old cookie unless the modify names
			// one (FormatFlow omits a zero cookie).
			f.IdleTimeout, f.HardTimeout = old.IdleTimeout, old.HardTimeout
			if f.Cookie == 0 {
				f.Cookie = old.Cookie
			}
		}
		s.flows[key] = f
	case openflow.DeleteFlowStrict:
		key, _ := storedFlow(op.Flow)
		delete(s.flows, key)
	case openflow.DeleteFlows:
		for k, f := range s.flows {
			if op.TableSet && f.Table != op.Flow.Table {
				continue
			}
			if cookieMatches(f.Cookie, op.Flow.Cookie, op.Flow.CookieMask) {
				delete(s.flows, k)
			}
		}
	case openflow.AddGroup, openflow.ModifyGroup:
		g := op.Group
		_, exists := s.groups[g.ID]
		if op.Kind == openflow.AddGroup && exists {
			return fmt.Errorf("group %d already exists (%w)", g.ID, ErrGroupExists)
		}
		if op.Kind == openflow.ModifyGroup && !exists {
			return fmt.Errorf("group %d does not exist (%w)", g.ID, ErrUnknownGroup)
		}
		for _, bk := range g.Buckets {
			if err := s.checkGroupRefs(bk.Actions); err != nil {
				return fmt.Errorf("bucket_id %d: %w", bk.ID, err)
			}
		}
		s.groups[g.ID] = cloneGroup(g)
	case openflow.DeleteGroup:
		id := op.Group.ID
		if _, ok := s.groups[id]; !ok {
			return nil // deleting a missing group is a no-op
		}
		delete(s.groups, id)
		// OpenFlow: deleting a group removes the flows that send to it. Buckets of other
		// groups that chain to it are left dangling, as in OVS.
		for k, f := range s.flows {
			if slices.Contains(groupRefs(f.Actions), id) {
				delete(s.flows, k)
			}
		}
	}
	return nil
}

func (s *state) checkGroupRefs(actions []openflow.Action) error {
	for _, id := range groupRefs(actions) {
		if _, ok := s.groups[id]; !ok {
			return fmt.Errorf("action group:%d refers to group %d, which does not exist (%w)", id, id, ErrBadOutGroup)
		}
	}
	return nil
}

// storedFlow returns the key and the copy of f that the switch stores: match normalized,
// CookieMask cleared (it belongs to the request, not the flow).
func storedFlow(f *openflow.Flow) (flowKey, openflow.Flow) {
	c := cloneFlow(f)
	c.CookieMask = 0
	normalizeMatch(&c.Match)
	return flowKey{table: c.Table, priority: c.Priority, match: openflow.FormatMatch(&c.Match)}, c
}

// cookieMatches reports whether cookie is selected by want/mask; a zero mask means exact.
func cookieMatches(cookie, want, mask uint64) bool {
	if mask == 0 {
		mask = ^uint64(0)
	}
	return cookie&mask == want&mask
}

// sortedFlowKeys returns the keys of the flows sel accepts in canonical order: table ascending,
// priority descending, then match text.
func (s *state) sortedFlowKeys(sel func(*openflow.Flow) bool) []flowKey {
	keys := make([]flowKey, 0, len(s.flows))
	for k, f := range s.flows {
		if sel(&f) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b flowKey) int {
		if c := cmp.Compare(a.table, b.table); c != 0 {
			return c
		}
		if c := cmp.Compare(b.priority, a.priority); c != 0 {
			return c
		}
		return strings.Compare(a.match, b.match)
	})
	return keys
}

func (s *state) sortedGroupIDs() []uint32 {
	ids := make([]uint32, 0, len(s.groups))
	for id := range s.groups {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func filterFunc(filter openflow.FlowFilter) func(*openflow.Flow) bool {
	return func(f *openflow.Flow) bool {
		if filter.TableSet && f.Table != filter.Table {
			return false
		}
		if filter.Cookie == 0 && filter.CookieMask == 0 {
			return true // the zero filter selects every flow
		}
		return cookieMatches(f.Cookie, filter.Cookie, filter.CookieMask)
	}
}

// DumpFlows returns deep copies of the flows selected by filter, in canonical order. A filter
// with a zero Cookie and CookieMask does not filter by cookie; otherwise a zero CookieMask
// means an exact cookie.
func (b *FakeBridge) DumpFlows(ctx context.Context, filter openflow.FlowFilter) ([]openflow.Flow, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	keys := b.st.sortedFlowKeys(filterFunc(filter))
	out := make([]openflow.Flow, 0, len(keys))
	for _, k := range keys {
		f := b.st.flows[k]
		out = append(out, cloneFlow(&f))
	}
	return out, nil
}

// DumpGroups returns deep copies of every group, by ID.
func (b *FakeBridge) DumpGroups(ctx context.Context) ([]openflow.Group, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	ids := b.st.sortedGroupIDs()
	out := make([]openflow.Group, 0, len(ids))
	for _, id := range ids {
		g := b.st.groups[id]
		out = append(out, cloneGroup(&g))
	}
	return out, nil
}

// Dump renders the whole state for golden tests: groups by ID (openflow.FormatGroup), then
// flows in canonical order (openflow.FormatFlow), one per line, each line ending in "\n".
func (b *FakeBridge) Dump() string { return b.DumpNamed(nil) }

// DumpNamed renders the whole state like Dump, with n's table and register names
// (openflow.FormatGroupNamed, openflow.FormatFlowNamed); a nil n gives Dump's text.
func (b *FakeBridge) DumpNamed(n *openflow.Names) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var sb strings.Builder
	for _, id := range b.st.sortedGroupIDs() {
		g := b.st.groups[id]
		sb.WriteString(openflow.FormatGroupNamed(&g, n))
		sb.WriteByte('\n')
	}
	b.writeFlows(&sb, n, func(*openflow.Flow) bool { return true })
	return sb.String()
}

// DumpCookie renders, like Dump, only the flows whose cookie matches cookie under mask (a zero
// mask means an exact cookie). Groups are not included.
func (b *FakeBridge) DumpCookie(cookie, mask uint64) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var sb strings.Builder
	b.writeFlows(&sb, nil, func(f *openflow.Flow) bool { return cookieMatches(f.Cookie, cookie, mask) })
	return sb.String()
}

func (b *FakeBridge) writeFlows(sb *strings.Builder, n *openflow.Names, sel func(*openflow.Flow) bool) {
	for _, k := range b.st.sortedFlowKeys(sel) {
		f := b.st.flows[k]
		sb.WriteString(openflow.FormatFlowNamed(&f, n))
		sb.WriteByte('\n')
	}
}

// FlowCount returns the number of installed flows.
func (b *FakeBridge) FlowCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.st.flows)
}

// GroupCount returns the number of installed groups.
func (b *FakeBridge) GroupCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.st.groups)
}

// ApplyCalls returns deep copies of the ops of every recorded Apply call since the last Reset,
// oldest first.
func (b *FakeBridge) ApplyCalls() [][]openflow.Op {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([][]openflow.Op, len(b.calls))
	for i, ops := range b.calls {
		out[i] = cloneOps(ops)
	}
	return out
}

// ApplyCount returns the number of recorded Apply calls since the last Reset.
func (b *FakeBridge) ApplyCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.calls)
}

// LastOps returns a copy of the ops of the latest recorded Apply call, or nil if none.
func (b *FakeBridge) LastOps() []openflow.Op {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.calls) == 0 {
		return nil
	}
	return cloneOps(b.calls[len(b.calls)-1])
}

// OpsTotal returns the number of ops over all recorded Apply calls since the last Reset.
func (b *FakeBridge) OpsTotal() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, ops := range b.calls {
		n += len(ops)
	}
	return n
}

// Reset forgets the recorded Apply calls. The switch state, FailNextApply and the hook stay.
func (b *FakeBridge) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = nil
}
