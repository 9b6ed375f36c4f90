package conntrack

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// ParseDump parses the output of `ovs-appctl dpctl/dump-conntrack`, one entry per line:
//
//	udp,orig=(src=10.10.0.10,dst=10.96.0.53,sport=5300,dport=53),reply=(src=10.10.0.11,dst=10.10.0.10,sport=5353,dport=5300),zone=65520
//
// Fields it does not use (mark, labels, protoinfo, timeout, id) are skipped. A line it cannot
// parse is counted in bad, never guessed at, so that a caller deleting entries acts only on
// entries it understood.
func ParseDump(out string) (entries []Entry, bad int) {
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		e, err := ParseEntry(line)
		if err != nil {
			bad++
			continue
		}
		entries = append(entries, e)
	}
	return entries, bad
}

// ParseEntry parses one line of dpctl/dump-conntrack.
func ParseEntry(line string) (Entry, error) {
	var e Entry
	proto, rest, ok := strings.Cut(line, ",")
	if !ok {
		return e, fmt.Errorf("conntrack entry %q: no fields", line)
	}
	p, known := protoNames[proto]
	if !known {
		n, err := strconv.ParseUint(proto, 10, 8)
		if err != nil {
			return e, fmt.Errorf("conntrack entry %q: protocol %q", line, proto)
		}
		p = uint8(n)
	}
	e.Proto = p
	var haveOrig, haveReply bool
	for rest != "" {
		key, val, next, err := nextField(rest)
		if err != nil {
			return e, fmt.Errorf("conntrack entry %q: %w", line, err)
		}
		rest = next
		switch key {
		case "orig":
			e.Orig, err = parseTuple(val)
			haveOrig = err == nil
		case "reply":
			e.Reply, err = parseTuple(val)
			haveReply = err == nil
		case "zone":
			var z uint64
			z, err = strconv.ParseUint(val, 10, 16)
			e.Zone = uint16(z)
		}
		if err != nil {
			return e, fmt.Errorf("conntrack entry %q: %s: %w", line, key, err)
		}
	}
	if !haveOrig || !haveReply {
		return e, fmt.Errorf("conntrack entry %q: want both orig and reply", line)
	}
	return e, nil
}

// nextField splits "key=value,rest" or "key=(a,b),rest".
func nextField(s string) (key, val, rest string, err error) {
	key, after, ok := strings.Cut(s, "=")
	if !ok {
		// A bare flag ("zone" without value never happens; skip words like "helper").
		_, rest, _ = strings.Cut(s, ",")
		return s, "", rest, nil
	}
	if strings.HasPrefix(after, "(") {
		end := strings.IndexByte(after, ')')
		if end < 0 {
			return "", "", "", fmt.Errorf("%s: unbalanced parenthesis", key)
		}
		val, rest = after[1:end], strings.TrimPrefix(after[end+1:], ",")
		return key, val, rest, nil
	}
	val, rest, _ = strings.Cut(after, ",")
	return key, val, rest, nil
}

// parseTuple parses "src=A,dst=B,sport=P,dport=Q" (ICMP tuples carry id/type/code instead of
// ports; those stay 0).
func parseTuple(s string) (Tuple, error) {
	var t Tuple
	for _, kv := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(kv, "=")
		var err error
		switch k {
		case "src":
			t.Src, err = netip.ParseAddr(v)
		case "dst":
			t.Dst, err = netip.ParseAddr(v)
		case "sport":
			t.SrcPort, err = parsePort(v)
		case "dport":
			t.DstPort, err = parsePort(v)
		}
		if err != nil {
			return t, fmt.Errorf("%s=%q: %w", k, v, err)
		}
	}
	if !t.Src.IsValid() || !t.Dst.IsValid() {
		return t, fmt.Errorf("tuple %q: want src and dst", s)
	}
	return t, nil
}

func parsePort(v string) (uint16, error) {
	n, err := strconv.ParseUint(v, 10, 16)
	return uint16(n), err
}
