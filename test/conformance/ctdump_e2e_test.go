//go:build e2e

package conformance

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// ctTuple splits a line of `ovs-appctl dpctl/dump-conntrack` into its protocol, original and
// reply tuples and its zone.
var ctTuple = regexp.MustCompile(`^(\w+),orig=\(([^)]*)\),reply=\(([^)]*)\),zone=(\d+)`)

// replyTupleClashes returns, for each antrea-proxy node of w, the groups of conntrack entries
// of one protocol and zone that share a reply tuple: the signature of the reply-tuple clash of the
// antrea-lossy rule of docs/conformance.md (two connections whose replies one tuple claims).
// It is a diagnostic for CONFORMANCE_REPORT, taken right after the first probe pass, while
// the closed connections of that pass are still tracked.
func replyTupleClashes(w *world) string {
	var b strings.Builder
	for _, n := range w.sb.Nodes {
		if n.OVS == nil {
			continue
		}
		out, err := n.OVS.Appctl("dpctl/dump-conntrack")
		if err != nil {
			fmt.Fprintf(&b, "conntrack %s: %v\n", n.Name, err)
			continue
		}
		groups := map[string][]string{}
		for _, line := range strings.Split(out, "\n") {
			m := ctTuple.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			k := m[1] + " " + m[4] + " " + m[3]
			groups[k] = append(groups[k], line)
		}
		keys := make([]string, 0, len(groups))
		for k, g := range groups {
			if len(g) > 1 {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		fmt.Fprintf(&b, "conntrack %s: %d entries, %d reply tuples held by more than one\n", n.Name, strings.Count(out, "\n"), len(keys))
		for _, k := range keys {
			fmt.Fprintf(&b, "clash %s %s\n", n.Name, strings.Join(groups[k], " | "))
		}
	}
	return b.String()
}
