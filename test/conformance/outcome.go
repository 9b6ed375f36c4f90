package conformance

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"sort"
	"strings"
	"syscall"
)

// This file reduces what probes saw to outcome classes: which backend answered and the class of
// the source address it saw, or how the probe failed.

// Failure classes of a probe.
const (
	Refused     = "refused"     // a TCP reset or an ICMP port/admin unreachable: rejected
	Vetoed      = "vetoed"      // EPERM: the host's own packet dropped or rejected by its netfilter on the way out
	Dropped     = "dropped"     // no answer before the deadline
	Unreachable = "unreachable" // no route or ARP failed (ICMP host/net unreachable)
	Closed      = "closed"      // accepted, then closed or reset without an answer (a proxy whose upstream refused)
	Failed      = "error"       // anything else
)

// Source classes of the address a backend saw, relative to the backend's own node (so that the
// class does not say which node's backend answered) and to the client.
const (
	SrcClient    = "client"     // the client's own address: no SNAT
	SrcGWLocal   = "gw-local"   // the pod gateway address of the backend's node
	SrcGWOther   = "gw-other"   // the pod gateway address of the other node
	SrcNodeLocal = "node-local" // the underlay address of the backend's node
	SrcNodeOther = "node-other" // the underlay address of the other node
	SrcSVIP      = "svip"       // antrea-proxy's service virtual IP 169.254.0.253
	SrcLB        = "lb"         // the router, where the Proxy-mode load balancer runs
	SrcExternal  = "ext"        // the external client (when it is not the client)
	SrcPod       = "pod-other"  // a pod that is not the client
)

// ServiceVirtualIP is antrea-proxy's default nodeNetwork.serviceVirtualIP.
var ServiceVirtualIP = netip.MustParseAddr("169.254.0.253")

// Addresses are one sandbox's addresses the source classes are told apart by.
type Addresses struct {
	NodeIPs  []netip.Addr // by node index
	Gateways []netip.Addr // pod gateway address by node index
	Router   netip.Addr
	External netip.Addr
	Pods     []netip.Addr // the client pods
}

// SourceClass classifies src as seen by a backend on node backendNode, for a probe from client.
func (a Addresses) SourceClass(src, client netip.Addr, backendNode int) string {
	switch {
	case src == client:
		return SrcClient
	case src == ServiceVirtualIP:
		return SrcSVIP
	case src == a.Router:
		return SrcLB
	case src == a.External:
		return SrcExternal
	}
	for i, ip := range a.Gateways {
		if src == ip {
			return pick(i == backendNode, SrcGWLocal, SrcGWOther)
		}
	}
	for i, ip := range a.NodeIPs {
		if src == ip {
			return pick(i == backendNode, SrcNodeLocal, SrcNodeOther)
		}
	}
	for _, ip := range a.Pods {
		if src == ip {
			return SrcPod
		}
	}
	return "other:" + src.String()
}

func pick(c bool, a, b string) string {
	if c {
		return a
	}
	return b
}

// FailureClass classifies a probe's error.
func FailureClass(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return Refused
	case errors.Is(err, syscall.EPERM):
		return Vetoed
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return Unreachable
	case errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET):
		return Closed
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return Dropped
	}
	return Failed
}

// Outcome is the set of classes a row's probes saw, sorted: answers as "<backend><-<source
// class>", failures by their class.
type Outcome []string

// Answer is the token of an answer by backend that saw a source of class src.
func Answer(backend, src string) string { return backend + "<-" + src }

// splitAnswer returns the backend and source class of an answer token.
func splitAnswer(tok string) (backend, src string, ok bool) {
	return strings.Cut(tok, "<-")
}

// NewOutcome builds a sorted, de-duplicated outcome.
func NewOutcome(tokens ...string) Outcome {
	set := map[string]bool{}
	for _, t := range tokens {
		set[t] = true
	}
	out := make(Outcome, 0, len(set))
	for t := range set {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// Union is the outcome of both o's and p's probes.
func (o Outcome) Union(p Outcome) Outcome {
	return NewOutcome(append(append([]string(nil), o...), p...)...)
}

// Equal reports whether both saw the same classes.
func (o Outcome) Equal(p Outcome) bool { return o.String() == p.String() }

func (o Outcome) String() string {
	if len(o) == 0 {
		return "(nothing)"
	}
	return strings.Join(o, " ")
}

// Answered reports whether any probe was answered (also in a reduced, Sticky outcome).
func (o Outcome) Answered() bool {
	for _, t := range o {
		if _, _, ok := splitAnswer(t); ok || strings.HasPrefix(t, "sticky:") || t == "unsticky" {
			return true
		}
	}
	return false
}

// Sticky reduces the outcome of a ClientIP-affinity row, where which of the eligible backends
// is chosen is random but the choice is kept: the answers become "sticky:<state>" (one backend
// answered every probe) or "unsticky" (several did), the state being the answering endpoints'
// states; the failures stay.
func (o Outcome) Sticky(state func(backend string) string) Outcome {
	var out []string
	backends := map[string]bool{}
	for _, t := range o {
		b, _, ok := splitAnswer(t)
		if !ok {
			out = append(out, t)
			continue
		}
		backends[b] = true
	}
	if len(backends) == 1 {
		for b := range backends {
			out = append(out, "sticky:"+state(b))
		}
	} else if len(backends) > 1 {
		out = append(out, "unsticky")
	}
	return NewOutcome(out...)
}
