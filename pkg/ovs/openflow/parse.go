package openflow

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseError reports a dump line the parser could not turn into the model.
type ParseError struct {
	// LineNo is the 1-based line number within the dump, or 0 for ParseFlow/ParseGroup.
	LineNo int
	// Line is the offending line, without surrounding whitespace.
	Line string
	// Token is the token that failed, when one can be named.
	Token string
	// Reason says what was wrong.
	Reason string
}

func (e *ParseError) Error() string {
	var b strings.Builder
	b.WriteString("parsing OpenFlow dump")
	if e.LineNo > 0 {
		fmt.Fprintf(&b, " line %d", e.LineNo)
	}
	if e.Token != "" {
		fmt.Fprintf(&b, ": token %q", e.Token)
	}
	fmt.Fprintf(&b, ": %s (line %q)", e.Reason, e.Line)
	return b.String()
}

// tokenError is an error about one token; the line-level parsers wrap it into a ParseError.
type tokenError struct {
	token  string
	reason string
}

func (e *tokenError) Error() string { return fmt.Sprintf("token %q: %s", e.token, e.reason) }

func tokErr(token, format string, args ...any) error {
	return &tokenError{token: token, reason: fmt.Sprintf(format, args...)}
}

func lineError(line string, err error) *ParseError {
	pe := &ParseError{Line: line, Reason: err.Error()}
	if te, ok := err.(*tokenError); ok {
		pe.Token, pe.Reason = te.token, te.reason
	}
	return pe
}

// isHeaderLine reports whether a dump line is a reply header such as
// "OFPST_FLOW reply (OF1.5) (xid=0x2):" or "NXST_FLOW reply (xid=0x4):".
func isHeaderLine(s string) bool {
	return strings.HasPrefix(s, "OFPST_") || strings.HasPrefix(s, "NXST_") || strings.HasPrefix(s, "OFPT_")
}

// ParseFlowDump parses the output of `ovs-ofctl -O OpenFlow15 dump-flows` (with or without
// --no-stats, with or without the reply header line) into flows, in dump order. Statistics
// (duration, n_packets, n_bytes, idle_age, hard_age) and flow flags such as reset_counts are
// ignored; cookie, table, priority, idle_timeout and hard_timeout are kept. An absent table is
// 0 and an absent priority is 32768, as OVS omits those defaults. Any token the model cannot
// represent is an error (a *ParseError) naming the token and the line.
func ParseFlowDump(out string) ([]Flow, error) {
	var flows []Flow
	err := eachDumpLine(out, func(lineNo int, s string) error {
		f, err := ParseFlow(s)
		if err != nil {
			if pe, ok := err.(*ParseError); ok {
				pe.LineNo = lineNo
			}
			return err
		}
		flows = append(flows, f)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return flows, nil
}

// eachDumpLine calls fn with the number and trimmed text of every flow line of a dump (blank and
// reply header lines are left out), stopping at fn's first error.
func eachDumpLine(out string, fn func(lineNo int, line string) error) error {
	for i, line := range strings.Split(out, "\n") {
		s := strings.TrimSpace(line)
		if s == "" || isHeaderLine(s) {
			continue
		}
		if err := fn(i+1, s); err != nil {
			return err
		}
	}
	return nil
}

// MaxSkippedErrors is how many parse errors ParseFlowDumpLenient keeps (it counts them all).
const MaxSkippedErrors = 10

// Skipped says which dump lines a lenient parse left out.
type Skipped struct {
	// Count is the number of lines that could not be parsed.
	Count int
	// Errors are the first MaxSkippedErrors of them, each naming its line (LineNo and Line).
	Errors []*ParseError
}

// ParseFlowDumpLenient parses a dump like ParseFlowDump, but skips the lines it cannot parse
// (flows written by others with actions or matches the model does not represent, such as
// dec_ttl, note or meter) instead of failing: the flows of every other line are returned, in
// dump order, and the skipped lines are counted. It never fails.
func ParseFlowDumpLenient(out string) ([]Flow, Skipped) {
	var flows []Flow
	var sk Skipped
	_ = eachDumpLine(out, func(lineNo int, s string) error {
		f, err := ParseFlow(s)
		if err == nil {
			flows = append(flows, f)
			return nil
		}
		sk.Count++
		if len(sk.Errors) < MaxSkippedErrors {
			pe, ok := err.(*ParseError)
			if !ok {
				pe = &ParseError{Line: s, Reason: err.Error()}
			}
			pe.LineNo = lineNo
			pe.Line = truncateText(pe.Line, 512)
			sk.Errors = append(sk.Errors, pe)
		}
		return nil
	})
	return flows, sk
}

// ParseFlow parses one flow as printed by dump-flows, or as rendered by FormatFlow. Parsing
// the output of FormatFlow gives back the flow up to CanonicalFlow.
func ParseFlow(line string) (Flow, error) {
	s := strings.TrimSpace(line)
	f, err := parseFlow(s)
	if err != nil {
		return Flow{}, lineError(s, err)
	}
	return f, nil
}

func parseFlow(s string) (Flow, error) {
	var head, acts string
	switch {
	case strings.HasPrefix(s, "actions="):
		acts = s[len("actions="):]
	default:
		i := strings.Index(s, " actions=")
		if i < 0 {
			return Flow{}, fmt.Errorf("no actions")
		}
		head, acts = s[:i], s[i+len(" actions="):]
	}
	f := Flow{Priority: defaultPriority}
	for _, tok := range splitTopLevel(head) {
		if err := parseFlowToken(&f, tok); err != nil {
			return Flow{}, err
		}
	}
	if x := f.Match.Extra; x != nil && x.IsZero() {
		f.Match.Extra = nil // e.g. arp_op=0: as a Match that never set it
	}
	actions, err := parseActions(strings.TrimSpace(acts))
	if err != nil {
		return Flow{}, err
	}
	f.Actions = actions
	return f, nil
}

// parseFlowToken handles the flow-level tokens of a dump line and hands the rest to the match
// parser.
func parseFlowToken(f *Flow, tok string) error {
	key, val, hasVal := strings.Cut(tok, "=")
	var err error
	switch key {
	case "duration", "n_packets", "n_bytes", "idle_age", "hard_age":
		// statistics
	case "reset_counts", "send_flow_rem", "check_overlap", "no_packet_counts", "no_byte_counts":
		// flow flags that do not change what the flow does
	case "cookie":
		f.Cookie, err = parseUint(val, 64)
	case "table":
		f.Table, err = parseUint8(val)
	case "priority":
		f.Priority, err = parseUint16(val)
	case "idle_timeout":
		f.IdleTimeout, err = parseUint16(val)
	case "hard_timeout":
		f.HardTimeout, err = parseUint16(val)
	default:
		return parseMatchToken(&f.Match, key, val, hasVal, tok)
	}
	if err != nil {
		return tokErr(tok, "%v", err)
	}
	return nil
}

// splitTopLevel splits s at commas that are not inside parentheses or brackets, trimming
// whitespace and dropping empty pieces (dump-flows separates its first fields with ", ").
func splitTopLevel(s string) []string {
	var out []string
	depth, start := 0, 0
	emit := func(end int) {
		if t := strings.TrimSpace(s[start:end]); t != "" {
			out = append(out, t)
		}
	}
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(', '[':
			depth++
		case ')', ']':
			depth--
		case ',':
			if depth == 0 {
				emit(i)
				start = i + 1
			}
		}
	}
	emit(len(s))
	return out
}

// parseUint parses a decimal or 0x-prefixed hex number of at most bits bits.
func parseUint(s string, bits int) (uint64, error) {
	v, err := strconv.ParseUint(s, 0, bits)
	if err != nil {
		return 0, fmt.Errorf("invalid %d-bit number %q", bits, s)
	}
	return v, nil
}

func parseUint8(s string) (uint8, error) {
	v, err := parseUint(s, 8)
	return uint8(v), err
}

func parseUint16(s string) (uint16, error) {
	v, err := parseUint(s, 16)
	return uint16(v), err
}

func parseUint32(s string) (uint32, error) {
	v, err := parseUint(s, 32)
	return uint32(v), err
}

// ParseGroupDump parses the output of `ovs-ofctl -O OpenFlow15 dump-groups` (header line
// optional) into groups, in dump order. Errors are *ParseError values naming the line.
func ParseGroupDump(out string) ([]Group, error) {
	var groups []Group
	for i, line := range strings.Split(out, "\n") {
		s := strings.TrimSpace(line)
		if s == "" || isHeaderLine(s) {
			continue
		}
		g, err := ParseGroup(s)
		if err != nil {
			if pe, ok := err.(*ParseError); ok {
				pe.LineNo = i + 1
			}
			return nil, err
		}
		groups = append(groups, g)
	}
	return groups, nil
}

// ParseGroup parses one group as printed by dump-groups or rendered by FormatGroup. A bucket
// without a weight gets OVS's default (1 in a select group); a select group printed without a
// selection_method gets SelectionMethod "default", and "hash" is returned as "".
func ParseGroup(line string) (Group, error) {
	s := strings.TrimSpace(line)
	g, err := parseGroup(s)
	if err != nil {
		return Group{}, lineError(s, err)
	}
	return g, nil
}

func parseGroup(s string) (Group, error) {
	var g Group
	var method string
	var hasID bool
	toks := splitTopLevel(s)
	i := 0
	for ; i < len(toks) && !strings.HasPrefix(toks[i], "bucket="); i++ {
		tok := toks[i]
		key, val, _ := strings.Cut(tok, "=")
		var err error
		switch {
		case key == "group_id":
			g.ID, err = parseUint32(val)
			hasID = true
		case key == "type":
			g.Type = GroupType(val)
		case key == "selection_method":
			method = val
		case key == "selection_method_param":
			g.SelectionParam, err = parseUint(val, 64)
		case key == "fields":
			g.HashFields = []string{val}
		case strings.HasPrefix(tok, "fields(") && strings.HasSuffix(tok, ")"):
			g.HashFields = splitTopLevel(tok[len("fields(") : len(tok)-1])
		default:
			return Group{}, tokErr(tok, "unknown group field")
		}
		if err != nil {
			return Group{}, tokErr(tok, "%v", err)
		}
	}
	if !hasID {
		return Group{}, fmt.Errorf("no group_id")
	}
	if g.Type == "" {
		return Group{}, fmt.Errorf("no group type")
	}
	if g.Type == GroupTypeSelect {
		switch method {
		case "":
			g.SelectionMethod = "default"
		case "hash":
		default:
			g.SelectionMethod = method
		}
	} else if method != "" {
		return Group{}, tokErr("selection_method="+method, "selection method on a %s group", g.Type)
	}
	for i < len(toks) {
		b, next, err := parseBucket(toks, i, g.Type)
		if err != nil {
			return Group{}, err
		}
		g.Buckets = append(g.Buckets, b)
		i = next
	}
	return g, nil
}

// parseBucket parses the bucket starting at toks[i] ("bucket=...") up to the next bucket and
// returns the index after it.
func parseBucket(toks []string, i int, typ GroupType) (Bucket, int, error) {
	b := Bucket{Weight: defaultBucketWeight(typ)}
	tok := strings.TrimPrefix(toks[i], "bucket=")
	var actionToks []string
	for {
		if strings.HasPrefix(tok, "actions=") {
			actionToks = append(actionToks, strings.TrimPrefix(tok, "actions="))
			for i++; i < len(toks) && !strings.HasPrefix(toks[i], "bucket="); i++ {
				actionToks = append(actionToks, toks[i])
			}
			break
		}
		key, val, _ := strings.Cut(tok, ":")
		var err error
		switch key {
		case "bucket_id":
			b.ID, err = parseUint32(val)
		case "weight":
			b.Weight, err = parseUint16(val)
		default:
			return Bucket{}, 0, tokErr(tok, "unknown bucket field")
		}
		if err != nil {
			return Bucket{}, 0, tokErr(tok, "%v", err)
		}
		i++
		if i >= len(toks) || strings.HasPrefix(toks[i], "bucket=") {
			break
		}
		tok = toks[i]
	}
	if len(actionToks) == 0 {
		return b, i, nil
	}
	actions, err := parseActionList(actionToks)
	if err != nil {
		return Bucket{}, 0, err
	}
	b.Actions = actions
	return b, i, nil
}
