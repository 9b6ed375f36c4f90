package proxy

import (
	"sort"
	"strings"
	"testing"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

// Group IDs depend on the allocation history (IDs of deleted owners are reused), so a proxier
// that went through a churn and a fresh one given only the final Services hold the same flows
// and groups under different IDs. groupIndependentDump renders a bridge in a form that does not
// depend on that numbering: every group ID is renumbered by the content that uses it.
//
// A group ID shows up in a group's own ID, in group:N actions, in the cookie object of the
// Service port's flows (pipeline.CategoryService, and the learn action's CategoryAffinity
// cookie), and in RegServiceGroup (set_field before the group, matched by the learn flows).
// Each ID gets a signature: the canonical text of its group and of every flow that mentions it,
// with all IDs zeroed, sorted. IDs are then renumbered 1..n in signature order. Two IDs with the
// same signature are interchangeable (nothing tells them apart but the number), so the tie
// order does not change the result. Leaked or missing groups and flows still show: they change
// the set of signatures.

// groupIndependentDump dumps b's flows and groups canonically with group IDs renumbered.
func groupIndependentDump(t *testing.T, b groupDumper) string {
	t.Helper()
	flows, groups := canonicalState(t, b)
	ids := renumbering(flows, groups)
	remap := func(id uint32) uint32 {
		if n, ok := ids[id]; ok {
			return n
		}
		return id
	}
	var lines []string
	for _, f := range flows {
		g := mapGroupIDs(f, remap)
		lines = append(lines, of.FormatFlow(&g))
	}
	for _, g := range groups {
		g = mapBucketGroupIDs(g, remap)
		g.ID = remap(g.ID)
		lines = append(lines, of.FormatGroup(&g))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// renumbering maps every group ID mentioned in the dump to its new number.
func renumbering(flows []of.Flow, groups []of.Group) map[uint32]uint32 {
	sigs := map[uint32][]string{}
	zero := func(uint32) uint32 { return 0 }
	for _, g := range groups {
		z := mapBucketGroupIDs(g, zero)
		z.ID = 0
		sigs[g.ID] = append(sigs[g.ID], of.FormatGroup(&z))
	}
	for _, f := range flows {
		mentioned := map[uint32]bool{}
		mapGroupIDs(f, func(id uint32) uint32 { mentioned[id] = true; return id })
		z := mapGroupIDs(f, zero)
		text := of.FormatFlow(&z)
		for id := range mentioned {
			sigs[id] = append(sigs[id], text)
		}
	}
	type entry struct {
		id  uint32
		sig string
	}
	entries := make([]entry, 0, len(sigs))
	for id, s := range sigs {
		sort.Strings(s)
		entries = append(entries, entry{id, strings.Join(s, "\n")})
	}
	sort.Slice(entries, func(i, j int) bool {
		if entries[i].sig != entries[j].sig {
			return entries[i].sig < entries[j].sig
		}
		return entries[i].id < entries[j].id
	})
	out := make(map[uint32]uint32, len(entries))
	for i, e := range entries {
		out[e.id] = uint32(i + 1)
	}
	return out
}

// mapGroupIDs returns f with every group ID it mentions replaced through fn (f is not changed).
func mapGroupIDs(f of.Flow, fn func(uint32) uint32) of.Flow {
	f.Cookie = mapCookie(f.Cookie, fn)
	if len(f.Match.Regs) > 0 {
		regs := make([]of.RegMatch, len(f.Match.Regs))
		for i, r := range f.Match.Regs {
			if r.Reg == pipeline.RegServiceGroup && r.Value != 0 {
				r.Value = fn(r.Value)
			}
			regs[i] = r
		}
		f.Match.Regs = regs
	}
	f.Actions = mapActionGroupIDs(f.Actions, fn)
	return f
}

func mapBucketGroupIDs(g of.Group, fn func(uint32) uint32) of.Group {
	if len(g.Buckets) == 0 {
		return g
	}
	buckets := make([]of.Bucket, len(g.Buckets))
	for i, b := range g.Buckets {
		b.Actions = mapActionGroupIDs(b.Actions, fn)
		buckets[i] = b
	}
	g.Buckets = buckets
	return g
}

// mapCookie maps the object of Service and affinity cookies (their object is the group ID).
func mapCookie(c uint64, fn func(uint32) uint32) uint64 {
	cat := pipeline.CookieCategory(c)
	if cat != pipeline.CategoryService && cat != pipeline.CategoryAffinity {
		return c
	}
	obj := pipeline.CookieObject(c)
	if obj == 0 {
		return c
	}
	return pipeline.Cookie(pipeline.CookieRound(c), cat, uint64(fn(uint32(obj))))
}

func mapActionGroupIDs(actions []of.Action, fn func(uint32) uint32) []of.Action {
	if len(actions) == 0 {
		return actions
	}
	out := make([]of.Action, len(actions))
	for i, a := range actions {
		switch a := a.(type) {
		case of.GroupAction:
			out[i] = of.GroupAction{ID: fn(a.ID)}
		case of.SetReg:
			if a.Reg == pipeline.RegServiceGroup && a.Value != 0 {
				a.Value = fn(a.Value)
			}
			out[i] = a
		case of.Learn:
			a.Cookie = mapCookie(a.Cookie, fn)
			out[i] = a
		case of.CT:
			a.Exec = mapActionGroupIDs(a.Exec, fn)
			out[i] = a
		default:
			out[i] = a
		}
	}
	return out
}
