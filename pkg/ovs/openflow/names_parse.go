package openflow

import (
	"strings"
)

// ParseFlowNamed parses a flow that FormatFlowNamed rendered with n (or plain ovs-ofctl text):
// table and field names are turned back into numbers and registers, then the line is parsed
// like ParseFlow. A name n does not know is an error. A nil n parses like ParseFlow.
func ParseFlowNamed(line string, n *Names) (Flow, error) {
	if n == nil {
		return ParseFlow(line)
	}
	s := strings.TrimSpace(line)
	raw, err := n.rawFlow(s)
	if err != nil {
		return Flow{}, lineError(s, err)
	}
	return ParseFlow(raw)
}

// ParseGroupNamed parses a group that FormatGroupNamed rendered with n, like ParseGroup.
func ParseGroupNamed(line string, n *Names) (Group, error) {
	if n == nil {
		return ParseGroup(line)
	}
	s := strings.TrimSpace(line)
	toks := splitTopLevel(s)
	for i, tok := range toks {
		acts, isActions := strings.CutPrefix(tok, "actions=")
		if !isActions {
			acts = tok
		}
		raw, err := n.rawAction(acts)
		if err != nil {
			return Group{}, lineError(s, err)
		}
		if isActions {
			raw = "actions=" + raw
		}
		toks[i] = raw
	}
	return ParseGroup(strings.Join(toks, ","))
}

func (n *Names) rawFlow(s string) (string, error) {
	var head, acts string
	if a, ok := strings.CutPrefix(s, "actions="); ok {
		acts = a
	} else if i := strings.Index(s, " actions="); i >= 0 {
		head, acts = s[:i], s[i+len(" actions="):]
	} else {
		return s, nil // ParseFlow reports it
	}
	var out []string
	for _, tok := range splitTopLevel(head) {
		key, val, hasVal := strings.Cut(tok, "=")
		switch {
		case !hasVal:
		case key == "table":
			t, err := n.rawTable(val)
			if err != nil {
				return "", tokErr(tok, "%v", err)
			}
			tok = "table=" + t
		default:
			operand, reg, isField, err := n.rawField(key, val)
			if err != nil {
				return "", tokErr(tok, "%v", err)
			}
			if isField {
				tok = reg + "=" + operand
			}
		}
		out = append(out, tok)
	}
	rawActs, err := n.rawActions(acts)
	if err != nil {
		return "", err
	}
	if len(out) == 0 {
		return "actions=" + rawActs, nil
	}
	return strings.Join(out, ",") + " actions=" + rawActs, nil
}

func (n *Names) rawActions(s string) (string, error) {
	toks := splitTopLevel(s)
	for i, tok := range toks {
		raw, err := n.rawAction(tok)
		if err != nil {
			return "", err
		}
		toks[i] = raw
	}
	return strings.Join(toks, ","), nil
}

// rawAction turns the names in one action back into numbers and registers; other actions are
// returned as they are.
func (n *Names) rawAction(tok string) (string, error) {
	if t, ok := strings.CutPrefix(tok, "goto_table:"); ok {
		raw, err := n.rawTable(t)
		if err != nil {
			return "", tokErr(tok, "%v", err)
		}
		return "goto_table:" + raw, nil
	}
	if body, ok := inner(tok, "resubmit"); ok {
		port, t, hasTable := strings.Cut(body, ",")
		if !hasTable {
			return tok, nil
		}
		raw, err := n.rawTable(t)
		if err != nil {
			return "", tokErr(tok, "%v", err)
		}
		return "resubmit(" + port + "," + raw + ")", nil
	}
	if arg, ok := strings.CutPrefix(tok, "set_field:"); ok {
		val, field, _ := strings.Cut(arg, "->")
		operand, reg, isField, err := n.rawField(field, val)
		if err != nil {
			return "", tokErr(tok, "%v", err)
		}
		if isField {
			return "set_field:" + operand + "->" + reg, nil
		}
		return tok, nil
	}
	for _, name := range []string{"ct", "learn"} {
		if body, ok := inner(tok, name); ok {
			raw, err := n.rawNested(body)
			if err != nil {
				return "", tokErr(tok, "%v", err)
			}
			return name + "(" + raw + ")", nil
		}
	}
	return tok, nil
}

// rawNested turns the table= argument and the exec(...) actions inside ct(...) or learn(...)
// back into numbers.
func (n *Names) rawNested(body string) (string, error) {
	toks := splitTopLevel(body)
	for i, t := range toks {
		if v, ok := strings.CutPrefix(t, "table="); ok {
			raw, err := n.rawTable(v)
			if err != nil {
				return "", err
			}
			toks[i] = "table=" + raw
			continue
		}
		if acts, ok := inner(t, "exec"); ok {
			raw, err := n.rawActions(acts)
			if err != nil {
				return "", err
			}
			toks[i] = "exec(" + raw + ")"
		}
	}
	return strings.Join(toks, ","), nil
}
