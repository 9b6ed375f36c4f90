package openflow

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Names are the display names of a pipeline's tables and register fields. FormatFlowNamed and
// FormatGroupNamed render a flow with them ("table=ServiceLB", "goto_table:ConntrackCommit",
// "PacketSource=Gateway", "set_field:1->FromHost"); ParseFlowNamed and ParseGroupNamed read
// that text back into the same flow. Only the display uses names: what is installed, and the
// canonical keys FormatFlow and FormatFlowKey give, stay numeric. Subfields of move and learn
// actions keep their NXM names, and a register bit without a field keeps its raw form
// ("reg0=0x100/0x100").
//
// A nil *Names renders and parses the plain numeric syntax.
type Names struct {
	tables  map[uint8]string
	tableNo map[string]uint8
	fields  []RegField // sorted by register, then first bit
	byName  map[string]RegField
}

// RegField is a named range of bits of one 32-bit register.
type RegField struct {
	// Name is what the display shows instead of the register: an upper-case letter followed
	// by letters and digits, so that it never reads as an OVS field or keyword.
	Name string
	// Reg is the register (regN); Start and End are the first and last bit of the field.
	Reg        uint8
	Start, End uint8
	// IPv4 shows the value as an IPv4 address (a whole register only).
	IPv4 bool
	// Values names some values of the field ("Gateway" for 1); others show as numbers.
	Values map[uint32]string
}

// mask is the register mask of the field's bits.
func (f RegField) mask() uint32 {
	width := uint(f.End-f.Start) + 1
	if width == 32 {
		return ^uint32(0)
	}
	return (uint32(1)<<width - 1) << f.Start
}

// NewNames checks tables and fields and returns their Names. Every table name and field name
// must be unique, start with an upper-case letter and hold only letters and digits; fields must
// lie inside their register and not overlap.
func NewNames(tables map[uint8]string, fields []RegField) (*Names, error) {
	n := &Names{tables: map[uint8]string{}, tableNo: map[string]uint8{}, byName: map[string]RegField{}}
	var errs []string
	for _, t := range slices.Sorted(maps.Keys(tables)) { // in table order: the errors are stable
		name := tables[t]
		if err := checkDisplayName(name); err != nil {
			errs = append(errs, fmt.Sprintf("table %d: %v", t, err))
		}
		if other, dup := n.tableNo[name]; dup {
			errs = append(errs, fmt.Sprintf("tables %d and %d are both named %q", other, t, name))
		}
		n.tables[t], n.tableNo[name] = name, t
	}
	for _, f := range fields {
		errs = append(errs, n.addField(f)...)
	}
	slices.SortFunc(n.fields, func(a, b RegField) int {
		if a.Reg != b.Reg {
			return int(a.Reg) - int(b.Reg)
		}
		return int(a.Start) - int(b.Start)
	})
	if len(errs) > 0 {
		slices.Sort(errs)
		return nil, fmt.Errorf("openflow names: %s", strings.Join(errs, "; "))
	}
	return n, nil
}

func (n *Names) addField(f RegField) []string {
	var errs []string
	if err := checkDisplayName(f.Name); err != nil {
		errs = append(errs, fmt.Sprintf("field %q: %v", f.Name, err))
	}
	if _, isTable := n.tableNo[f.Name]; isTable {
		errs = append(errs, fmt.Sprintf("field %q has a table's name", f.Name))
	}
	if f.Reg > 15 || f.Start > f.End || f.End > 31 {
		errs = append(errs, fmt.Sprintf("field %q: bits %d..%d of reg%d are not in a register", f.Name, f.Start, f.End, f.Reg))
		return errs
	}
	if f.IPv4 && f.mask() != ^uint32(0) {
		errs = append(errs, fmt.Sprintf("field %q: an IPv4 field must be a whole register", f.Name))
	}
	for value, name := range f.Values {
		if err := checkDisplayName(name); err != nil {
			errs = append(errs, fmt.Sprintf("field %q value %d: %v", f.Name, value, err))
		}
	}
	if _, dup := n.byName[f.Name]; dup {
		errs = append(errs, fmt.Sprintf("two fields are named %q", f.Name))
	}
	for _, o := range n.fields {
		if o.Reg == f.Reg && o.mask()&f.mask() != 0 {
			errs = append(errs, fmt.Sprintf("fields %q and %q overlap in reg%d", o.Name, f.Name, f.Reg))
		}
	}
	n.fields = append(n.fields, f)
	n.byName[f.Name] = f
	return errs
}

func checkDisplayName(s string) error {
	if s == "" || s[0] < 'A' || s[0] > 'Z' {
		return fmt.Errorf("name %q must start with an upper-case letter", s)
	}
	for _, c := range s {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return fmt.Errorf("name %q may hold only letters and digits", s)
		}
	}
	return nil
}

// table renders a table number, by name when it has one.
func (n *Names) table(t uint8) string {
	if n != nil {
		if name, ok := n.tables[t]; ok {
			return name
		}
	}
	return strconv.Itoa(int(t))
}

// regMatch renders one register match: the named fields it matches, each as "Name=V" when it
// matches the whole field and as "Name=V/M" (in the field's bits) when only some of them, then
// the bits of no field as "regN=V/M".
func (n *Names) regMatch(r RegMatch) []string {
	raw := "reg" + strconv.Itoa(int(r.Reg)) + "="
	if n == nil {
		return []string{raw + formatMasked32(Masked32{r.Value, r.Mask})}
	}
	left := r.Mask
	if left == 0 {
		left = ^uint32(0)
	}
	var out []string
	for _, f := range n.fields {
		if f.Reg != r.Reg || left&f.mask() == 0 {
			continue
		}
		if m := left & f.mask(); m != f.mask() {
			out = append(out, f.Name+"="+cHex(uint64((r.Value&m)>>f.Start))+"/"+cHex(uint64(m>>f.Start)))
		} else {
			out = append(out, f.Name+"="+f.formatValue(r.Value))
		}
		left &^= f.mask()
	}
	if left != 0 {
		out = append(out, raw+formatMasked32(Masked32{r.Value, left}))
	}
	return out
}

// setReg renders the destination and value of a set_field to a register: by field name when
// the action sets exactly one field.
func (n *Names) setReg(a SetReg) string {
	mask := a.Mask
	if mask == 0 {
		mask = ^uint32(0)
	}
	if n != nil {
		for _, f := range n.fields {
			if f.Reg == a.Reg && f.mask() == mask {
				return "set_field:" + f.formatValue(a.Value) + "->" + f.Name
			}
		}
	}
	return "set_field:" + formatMasked32(Masked32{a.Value, a.Mask}) + "->reg" + strconv.Itoa(int(a.Reg))
}

// formatValue renders the field's bits of a whole register value.
func (f RegField) formatValue(reg uint32) string {
	v := (reg & f.mask()) >> f.Start
	if name, ok := f.Values[v]; ok {
		return name
	}
	if f.IPv4 {
		return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}).String()
	}
	return strconv.FormatUint(uint64(v), 10)
}

// parseValue reads a value formatValue rendered (or any number) into the field's bits of a
// register value.
func (f RegField) parseValue(s string) (uint32, error) {
	for v, name := range f.Values {
		if name == s {
			return v << f.Start, nil
		}
	}
	if f.IPv4 {
		if a, err := netip.ParseAddr(s); err == nil && a.Is4() {
			b := a.As4()
			return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]), nil
		}
	}
	return f.parseNumber(s)
}

// parseNumber reads a number of the field's bits (decimal or 0x hex) into its place in the
// register.
func (f RegField) parseNumber(s string) (uint32, error) {
	v, err := strconv.ParseUint(s, 0, 32)
	if err != nil {
		return 0, fmt.Errorf("field %s: %q is no value of it", f.Name, s)
	}
	if uint32(v)<<f.Start>>f.Start != uint32(v) || (uint32(v)<<f.Start)&^f.mask() != 0 {
		return 0, fmt.Errorf("field %s: %s does not fit bits %d..%d", f.Name, s, f.Start, f.End)
	}
	return uint32(v) << f.Start, nil
}

// rawField renders a named field's value ("V", or "V/M" in the field's bits) back as a
// register match or set_field operand ("0x1/0xf", "reg0"), or reports that name is no field.
func (n *Names) rawField(name, value string) (operand, reg string, ok bool, err error) {
	f, ok := n.byName[name]
	if !ok {
		return "", "", false, nil
	}
	mask := f.mask()
	if val, m, masked := strings.Cut(value, "/"); masked {
		if mask, err = f.parseNumber(m); err != nil {
			return "", "", true, err
		}
		value = val
	}
	v, err := f.parseValue(value)
	if err != nil {
		return "", "", true, err
	}
	return formatMasked32(Masked32{v & mask, mask}), "reg" + strconv.Itoa(int(f.Reg)), true, nil
}

// rawTable turns a table name (or number) back into its number.
func (n *Names) rawTable(s string) (string, error) {
	if t, ok := n.tableNo[s]; ok {
		return strconv.Itoa(int(t)), nil
	}
	if _, err := strconv.ParseUint(s, 10, 8); err == nil {
		return s, nil
	}
	return "", fmt.Errorf("unknown table %q", s)
}
