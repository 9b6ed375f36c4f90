package native

import (
	"fmt"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// Action types: OpenFlow 1.5 standard ones and the Nicira extension subtypes.
const (
	actOutput    uint16 = 0
	actGroup     uint16 = 22
	actSetField  uint16 = 25
	actCopyField uint16 = 28
	actMeter     uint16 = 29
	actVendor    uint16 = 0xffff

	nxResubmitTable uint16 = 14
	nxLearn         uint16 = 16
	nxController    uint16 = 20
	nxCT            uint16 = 35
	nxNAT           uint16 = 36
	nxController2   uint16 = 37
	nxLearn2        uint16 = 45
)

// Instruction types.
const (
	instGotoTable    uint16 = 1
	instApplyActions uint16 = 4
)

// appendInstructions writes a flow's actions as Open vSwitch does for OpenFlow 1.5: every
// action but goto_table in one apply-actions instruction, then the goto-table instruction. A
// drop (or an empty list) has no instruction.
func appendInstructions(w *buf, actions []openflow.Action) error {
	var gotoTable *openflow.GotoTable
	n := 0
	for i, a := range actions {
		switch a := a.(type) {
		case openflow.GotoTable:
			if i != len(actions)-1 {
				return fmt.Errorf("goto_table must be the last action")
			}
			gotoTable = &a
		case openflow.Drop:
			if len(actions) != 1 {
				return fmt.Errorf("drop must be the only action")
			}
		case openflow.MeterAction:
			if i != 0 {
				return fmt.Errorf("meter must be the first action")
			}
			n++
		default:
			n++
		}
	}
	if n > 0 {
		start := len(w.b)
		w.u16(instApplyActions)
		w.u16(0)
		w.u32(0)
		for _, a := range actions {
			if _, skip := a.(openflow.GotoTable); skip {
				continue
			}
			if err := appendAction(w, a); err != nil {
				return err
			}
		}
		w.setLen16(start, 2)
	}
	if gotoTable != nil {
		w.u16(instGotoTable)
		w.u16(8)
		w.u8(gotoTable.Table)
		w.zeros(3)
	}
	return nil
}

// appendActions writes a plain action list (a bucket's), where goto_table cannot appear.
func appendActions(w *buf, actions []openflow.Action) error {
	for _, a := range actions {
		switch a.(type) {
		case openflow.GotoTable:
			return fmt.Errorf("goto_table is not an action of a group bucket")
		case openflow.Drop:
			if len(actions) != 1 {
				return fmt.Errorf("drop must be the only action")
			}
			continue
		}
		if err := appendAction(w, a); err != nil {
			return err
		}
	}
	return nil
}

// appendAction writes one action (not goto_table, not drop).
func appendAction(w *buf, a openflow.Action) error {
	switch a := a.(type) {
	case openflow.Output:
		putOutput(w, a.Port, 0)
	case openflow.OutputInPort:
		putOutput(w, portInPort, 0)
	case openflow.Normal:
		putOutput(w, portNormal, 0)
	case openflow.Controller:
		return putController(w, a)
	case openflow.GroupAction:
		w.u16(actGroup)
		w.u16(8)
		w.u32(a.ID)
	case openflow.Resubmit:
		start := vendorHeader(w, nxResubmitTable)
		w.u16(0xfff8) // OFPP_IN_PORT in 16 bits
		w.u8(a.Table)
		w.zeros(3)
		w.setLen16(start, 2)
	case openflow.SetReg:
		if a.Reg >= 16 {
			return fmt.Errorf("set_field: reg%d: no such register", a.Reg)
		}
		putSetField(w, nxmReg(int(a.Reg)), be32(a.Value), be32(exactMask32(a.Mask)))
	case openflow.SetCtMark:
		putSetField(w, nxmCtMark, be32(a.Value), be32(exactMask32(a.Mask)))
	case openflow.SetEthDst:
		return putSetMAC(w, oxmEthDst, a.MAC)
	case openflow.SetEthSrc:
		return putSetMAC(w, oxmEthSrc, a.MAC)
	case openflow.Move:
		return putCopyField(w, a)
	case openflow.CT:
		return putCT(w, a)
	case openflow.Learn:
		return putLearn(w, a)
	case openflow.MeterAction:
		w.u16(actMeter)
		w.u16(8)
		w.u32(a.ID)
	default:
		return fmt.Errorf("action %T cannot be encoded here", a)
	}
	return nil
}

func putOutput(w *buf, port uint32, maxLen uint16) {
	w.u16(actOutput)
	w.u16(16)
	w.u32(port)
	w.u16(maxLen)
	w.zeros(6)
}

// vendorHeader starts a Nicira extension action; finish it with setLen16(start, 2) after
// padding.
func vendorHeader(w *buf, subtype uint16) int {
	start := len(w.b)
	w.u16(actVendor)
	w.u16(0)
	w.u32(nxVendor)
	w.u16(subtype)
	return start
}

// putSetField writes a set-field action; an all-ones mask gives the unmasked form.
func putSetField(w *buf, h oxmHeader, value, mask []byte) {
	start := len(w.b)
	w.u16(actSetField)
	w.u16(0)
	full := true
	for _, b := range mask {
		full = full && b == 0xff
	}
	if full {
		w.u32(uint32(h))
		w.bytes(value)
	} else {
		w.u32(uint32(h.masked()))
		for i := range value {
			w.u8(value[i] & mask[i])
		}
		w.bytes(mask)
	}
	w.pad8(start)
	w.setLen16(start, 2)
}

func putSetMAC(w *buf, h oxmHeader, mac []byte) error {
	if len(mac) != 6 {
		return fmt.Errorf("set_field: %v is not a 48-bit MAC address", mac)
	}
	putSetField(w, h, mac, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	return nil
}

// putController writes the short output-to-controller form when only max_len is set (as Open
// vSwitch does), and NXAST_CONTROLLER2 with its properties otherwise.
func putController(w *buf, c openflow.Controller) error {
	maxLen := c.MaxLen
	if maxLen == 0 {
		maxLen = 0xffff
	}
	reason, err := controllerReason(c.Reason)
	if err != nil {
		return err
	}
	if len(c.UserData) == 0 && !c.Pause {
		if reason == 1 {
			putOutput(w, portController, maxLen)
			return nil
		}
		start := vendorHeader(w, nxController)
		w.u16(maxLen)
		w.u16(0) // controller id
		w.u8(reason)
		w.u8(0)
		w.setLen16(start, 2)
		return nil
	}
	start := vendorHeader(w, nxController2)
	w.zeros(6)
	if maxLen != 0xffff {
		putProp(w, 0, []byte{byte(maxLen >> 8), byte(maxLen), 0, 0}) // OVS counts the pad of a u16
	}
	if reason != 1 {
		putProp(w, 2, []byte{reason})
	}
	if len(c.UserData) > 0 {
		putProp(w, 3, c.UserData)
	}
	if c.Pause {
		putProp(w, 4, nil)
	}
	w.setLen16(start, 2)
	return nil
}

func controllerReason(r string) (uint8, error) {
	switch r {
	case "", "action":
		return 1, nil
	case "no_match":
		return 0, nil
	case "invalid_ttl":
		return 2, nil
	}
	return 0, fmt.Errorf("controller: unknown reason %q", r)
}

// putProp writes a type-length-value property padded to 8 bytes (the length excludes the pad).
func putProp(w *buf, typ uint16, data []byte) {
	start := len(w.b)
	w.u16(typ)
	w.u16(uint16(4 + len(data)))
	w.bytes(data)
	w.pad8(start)
}

// putCopyField writes a move as the OpenFlow 1.5 copy-field action.
func putCopyField(w *buf, m openflow.Move) error {
	src, srcOfs, n, err := subfield(m.Src)
	if err != nil {
		return fmt.Errorf("move: %w", err)
	}
	dst, dstOfs, dn, err := subfield(m.Dst)
	if err != nil {
		return fmt.Errorf("move: %w", err)
	}
	if n != dn {
		return fmt.Errorf("move: source has %d bits, destination %d", n, dn)
	}
	start := len(w.b)
	w.u16(actCopyField)
	w.u16(0)
	w.u16(uint16(n))
	w.u16(uint16(srcOfs))
	w.u16(uint16(dstOfs))
	w.u16(0)
	w.u32(uint32(src.oxm))
	w.u32(uint32(dst.oxm))
	w.pad8(start)
	w.setLen16(start, 2)
	return nil
}

// subfield resolves s to its field, first bit and width.
func subfield(s openflow.Subfield) (fieldDef, int, int, error) {
	f, err := fieldByName(s.Field)
	if err != nil {
		return fieldDef{}, 0, 0, err
	}
	if s.Whole {
		return f, 0, f.bits, nil
	}
	if s.End < s.Start || int(s.End) >= f.bits {
		return fieldDef{}, 0, 0, fmt.Errorf("%s[%d..%d]: outside the %d-bit field", s.Field, s.Start, s.End, f.bits)
	}
	return f, int(s.Start), int(s.End-s.Start) + 1, nil
}
