package pipeline

import (
	"testing"

	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

func TestReplaceCategory(t *testing.T) {
	a := []of.Flow{{Table: 0, Priority: 1, Cookie: Cookie(3, CategoryPod, 7)}}
	b := []of.Flow{{Table: 20, Priority: 2, Cookie: Cookie(3, CategoryPod, 8)}, {Table: 20, Priority: 3, Cookie: Cookie(3, CategoryPod, 8)}}
	ops := ReplaceCategory(CategoryPod, a, nil, b)
	if len(ops) != 4 {
		t.Fatalf("got %d ops, want 1 delete and 3 adds", len(ops))
	}
	d := ops[0]
	if d.Kind != of.DeleteFlows || d.Flow.CookieMask != CategoryMask || CookieCategory(d.Flow.Cookie) != CategoryPod || d.TableSet {
		t.Fatalf("first op %+v: want a delete of the whole pod category, any round", d)
	}
	for i, want := range []*of.Flow{&a[0], &b[0], &b[1]} {
		if op := ops[i+1]; op.Kind != of.AddFlow || op.Flow != want {
			t.Errorf("op %d: %+v, want an add of %+v", i+1, op, want)
		}
	}
}
