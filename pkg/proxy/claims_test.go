package proxy

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
)

var claimEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// parseClaim reads "C 10.96.0.1" (a ClusterIP), "E 192.0.2.1 TCP 80" (an ExternalIP or LB IP)
// or "N v6 UDP 30000" (a NodePort).
func parseClaim(t testing.TB, s string) claim {
	f := strings.Fields(s)
	switch {
	case f[0] == "C" && len(f) == 2:
		a := netip.MustParseAddr(f[1])
		return claim{key: tupleKey{v6: a.Is6(), addr: a}, kind: claimClusterIP}
	case f[0] == "E" && len(f) == 4:
		port, _ := strconv.Atoi(f[3])
		return claim{key: tupleOf(netip.MustParseAddr(f[1]), model.Protocol(f[2]), uint16(port)), kind: claimExternal}
	case f[0] == "N" && len(f) == 4:
		port, _ := strconv.Atoi(f[3])
		return claim{key: tupleKey{v6: f[1] == "v6", proto: model.Protocol(f[2]), port: uint16(port)}, kind: claimExternal}
	}
	t.Fatalf("bad claim %q", s)
	return claim{}
}

// claimSvc is one Service of a claims case: its name, its age in minutes after claimEpoch and
// its claims.
type claimSvc struct {
	name   string
	minute int
	claims []string
}

func (c claimSvc) nn() types.NamespacedName {
	ns, name, _ := strings.Cut(c.name, "/")
	return types.NamespacedName{Namespace: ns, Name: name}
}

// owners renders who owns each external tuple of idx's Services: "E 192.0.2.1 TCP 80=ns/a".
func owners(idx *claimIndex) map[string]string {
	out := map[string]string{}
	for k := range idx.external {
		c, _ := idx.owner(k)
		out[fmt.Sprintf("%v/%s/%s/%d", k.v6, k.addr, k.proto, k.port)] = c.svc.String()
	}
	return out
}

func TestClaimIndexOwners(t *testing.T) {
	for _, tc := range []struct {
		name string
		svcs []claimSvc
		// lost lists, per Service, the external tuples it loses with their owner.
		lost map[string][]string
	}{
		{name: "ClusterIP beats an older ExternalIP", svcs: []claimSvc{
			{"ns/victim", 5, []string{"C 10.96.0.30"}},
			{"ns/attacker", 0, []string{"C 10.96.0.31", "E 10.96.0.30 TCP 80"}},
		}, lost: map[string][]string{"ns/attacker": {"E 10.96.0.30 TCP 80=ns/victim"}}},
		{name: "a ClusterIP owns its address on every port", svcs: []claimSvc{
			{"ns/victim", 5, []string{"C 10.96.0.30"}},
			{"ns/attacker", 0, []string{"E 10.96.0.30 UDP 53", "E 10.96.0.30 TCP 443"}},
		}, lost: map[string][]string{"ns/attacker": {"E 10.96.0.30 TCP 443=ns/victim", "E 10.96.0.30 UDP 53=ns/victim"}}},
		{name: "its own ClusterIP as an ExternalIP", svcs: []claimSvc{
			{"ns/a", 0, []string{"C 10.96.0.30", "E 10.96.0.30 TCP 443"}},
		}},
		{name: "older external wins", svcs: []claimSvc{
			{"ns/new", 9, []string{"E 192.0.2.1 TCP 80"}},
			{"ns/old", 1, []string{"E 192.0.2.1 TCP 80"}},
		}, lost: map[string][]string{"ns/new": {"E 192.0.2.1 TCP 80=ns/old"}}},
		{name: "same age: by namespace/name", svcs: []claimSvc{
			{"ns/b", 1, []string{"E 192.0.2.1 TCP 80"}},
			{"ns/a", 1, []string{"E 192.0.2.1 TCP 80"}},
			{"a/z", 1, []string{"E 192.0.2.1 TCP 80"}},
		}, lost: map[string][]string{"ns/a": {"E 192.0.2.1 TCP 80=a/z"}, "ns/b": {"E 192.0.2.1 TCP 80=a/z"}}},
		{name: "other port, protocol or family is no conflict", svcs: []claimSvc{
			{"ns/a", 0, []string{"E 192.0.2.1 TCP 80", "E 2001:db8::1 TCP 80"}},
			{"ns/b", 1, []string{"E 192.0.2.1 TCP 81", "E 192.0.2.1 UDP 80", "E 2001:db8::2 TCP 80"}},
		}},
		{name: "NodePort per family", svcs: []claimSvc{
			{"ns/a", 0, []string{"N v4 TCP 30000"}},
			{"ns/b", 1, []string{"N v4 TCP 30000", "N v6 TCP 30000"}},
		}, lost: map[string][]string{"ns/b": {"N v4 TCP 30000=ns/a"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			idx := newClaimIndex(nameMap[svcClaims]{})
			for _, s := range tc.svcs {
				var cs []claim
				for _, c := range s.claims {
					cs = append(cs, parseClaim(t, c))
				}
				slices.SortFunc(cs, compareClaims)
				idx.set(s.nn(), claimEpoch.Add(time.Duration(s.minute)*time.Minute), cs)
			}
			for _, s := range tc.svcs {
				var got []string
				for _, c := range s.claims {
					cl := parseClaim(t, c)
					if cl.kind != claimExternal {
						continue
					}
					if w, lost := idx.lost(s.nn(), cl.key); lost {
						got = append(got, c+"="+w.svc.String())
					}
				}
				slices.Sort(got)
				if want := tc.lost[s.name]; !slices.Equal(got, want) {
					t.Errorf("%s loses %v, want %v", s.name, got, want)
				}
			}
		})
	}
}

// TestClaimIndexAffected: set returns every Service whose outcome changes, and only the
// claimants of tuples whose owner changed.
func TestClaimIndexAffected(t *testing.T) {
	idx := newClaimIndex(nameMap[svcClaims]{})
	ext := []claim{parseClaim(t, "E 10.96.0.30 TCP 80")}
	a, b, c := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}, types.NamespacedName{Namespace: "ns", Name: "c"}
	if got := idx.set(a, claimEpoch, ext); !slices.Equal(got, []types.NamespacedName{a}) {
		t.Fatalf("first claimant: affected %v", got)
	}
	if got := idx.set(b, claimEpoch.Add(time.Minute), ext); !slices.Equal(got, []types.NamespacedName{b}) {
		t.Fatalf("a newer claimer leaves the older owner alone: affected %v", got)
	}
	if got := idx.set(b, claimEpoch.Add(time.Minute), ext); got != nil {
		t.Fatalf("no change: affected %v", got)
	}
	cluster := []claim{parseClaim(t, "C 10.96.0.30")}
	if got := idx.set(c, claimEpoch.Add(time.Hour), cluster); !slices.Equal(got, []types.NamespacedName{a, b, c}) {
		t.Fatalf("a ClusterIP takes the tuple from a: affected %v", got)
	}
	if got := idx.set(c, time.Time{}, nil); !slices.Equal(got, []types.NamespacedName{a, b, c}) {
		t.Fatalf("the ClusterIP leaves: affected %v", got)
	}
	if got := idx.set(a, time.Time{}, nil); !slices.Equal(got, []types.NamespacedName{a, b}) {
		t.Fatalf("the owner leaves, b takes over: affected %v", got)
	}
	if len(idx.external) != 1 || len(idx.cluster) != 0 || len(idx.clusterMore) != 0 || len(idx.byAddr) != 1 ||
		len(idx.of.(nameMap[svcClaims])) != 1 {
		t.Fatalf("index not cleaned up: %+v", idx)
	}
}

// outcomes returns, per Service of idx, the tuples it loses and to whom.
func outcomes(idx *claimIndex) map[types.NamespacedName]string {
	out := map[types.NamespacedName]string{}
	for nn, sc := range idx.of.(nameMap[svcClaims]) {
		var b strings.Builder
		for _, c := range sc.claims {
			if c.kind != claimExternal {
				continue
			}
			if w, lost := idx.lost(nn, c.key); lost {
				fmt.Fprintf(&b, "%v>%s;", c.key, w.svc)
			}
		}
		out[nn] = b.String()
	}
	return out
}

// FuzzClaimIndexOrder: any order of insertions, replacements and deletions leaves the same
// owners as inserting the final claims at once, in name order, and every set reports every
// Service whose outcome it changed (what makes the proxier's resolution incremental-safe).
func FuzzClaimIndexOrder(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add([]byte{7, 7, 7, 0x87, 3, 0x43, 2, 0xc2, 9, 9})
	addrs := []netip.Addr{netip.MustParseAddr("10.96.0.1"), netip.MustParseAddr("10.96.0.2"), netip.MustParseAddr("fd00::1")}
	f.Fuzz(func(t *testing.T, ops []byte) {
		idx := newClaimIndex(nameMap[svcClaims]{})
		final := map[types.NamespacedName][]claim{}
		created := map[types.NamespacedName]time.Time{}
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i], ops[i+1]
			nn := types.NamespacedName{Namespace: "ns", Name: string(rune('a' + op%6))}
			var cs []claim
			if op&0x80 == 0 { // else: delete
				for bit := range 8 {
					if arg&(1<<bit) == 0 {
						continue
					}
					a := addrs[bit%len(addrs)]
					if bit < 2 {
						cs = append(cs, claim{key: tupleKey{v6: a.Is6(), addr: a}, kind: claimClusterIP})
					} else {
						cs = append(cs, claim{key: tupleOf(a, model.TCP, uint16(80+bit%2)), kind: claimExternal})
					}
				}
				slices.SortFunc(cs, compareClaims)
				cs = slices.Compact(cs)
			}
			at := claimEpoch.Add(time.Duration(op%3) * time.Minute)
			before := outcomes(idx)
			affected := idx.set(nn, at, cs)
			after := outcomes(idx)
			for s := range maps.Keys(mergeKeys(before, after)) {
				if before[s] != after[s] && !slices.Contains(affected, s) {
					t.Fatalf("op %d: %s changed (%q -> %q) but is not reported (%v)", i, s, before[s], after[s], affected)
				}
			}
			if len(cs) == 0 {
				delete(final, nn)
			} else {
				final[nn], created[nn] = cs, at
			}
		}
		fresh := newClaimIndex(nameMap[svcClaims]{})
		names := slices.SortedFunc(maps.Keys(final), compareNames)
		for _, nn := range names {
			fresh.set(nn, created[nn], final[nn])
		}
		if got, want := owners(idx), owners(fresh); !maps.Equal(got, want) {
			t.Fatalf("owners depend on the order: %v, fresh %v", got, want)
		}
		if got, want := outcomes(idx), outcomes(fresh); !maps.Equal(got, want) {
			t.Fatalf("outcomes depend on the order: %v, fresh %v", got, want)
		}
	})
}

func mergeKeys(a, b map[types.NamespacedName]string) map[types.NamespacedName]string {
	out := maps.Clone(a)
	maps.Copy(out, b)
	return out
}
