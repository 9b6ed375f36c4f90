package native

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"os/exec"
	"testing"
	"time"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// ofctlSent runs ovs-ofctl with args against a fake switch and returns the messages of type
// typ it sent.
func ofctlSent(t *testing.T, typ uint8, args ...string) [][]byte {
	t.Helper()
	s := startFakeSwitch(t)
	args = append([]string{"-O", "OpenFlow15", args[0], s.target()}, args[1:]...)
	out, err := exec.Command("ovs-ofctl", args...).CombinedOutput()
	if err != nil && typ != typeMultipartRequest { // the fake answers meter stats with an empty reply
		t.Fatalf("ovs-ofctl %v: %v: %s", args, err, out)
	}
	var msgs [][]byte
	for _, m := range s.messages() {
		if m[1] == typ {
			msgs = append(msgs, m)
		}
	}
	return msgs
}

// TestMeterModMatchesOvsOfctl: the meter mods SetMeter sends are byte-for-byte those of
// `ovs-ofctl add-meter` and `mod-meter` for FormatMeter's text, with and without a burst, and
// the meter stats request that of `ovs-ofctl meter-stats`.
func TestMeterModMatchesOvsOfctl(t *testing.T) {
	for _, m := range []openflow.Meter{{ID: 1, Rate: 100, Burst: 50}, {ID: 0xffff0000, Rate: 1, Burst: 0}} {
		for _, cmd := range []struct {
			name string
			code uint16
		}{{"add-meter", meterAdd}, {"mod-meter", meterModify}} {
			want := ofctlSent(t, typeMeterMod, cmd.name, openflow.FormatMeter(m))
			if len(want) != 1 {
				t.Fatalf("%s %s: ovs-ofctl sent %d meter mods", cmd.name, openflow.FormatMeter(m), len(want))
			}
			got := encodeMeterMod(binary.BigEndian.Uint32(want[0][4:]), cmd.code, m)
			if !bytes.Equal(got, want[0]) {
				t.Errorf("%s %s differs from ovs-ofctl\nwant:\n%sgot:\n%s", cmd.name, openflow.FormatMeter(m), hex.Dump(want[0]), hex.Dump(got))
			}
		}
	}
	want := ofctlSent(t, typeMultipartRequest, "meter-stats", "meter=7")
	if len(want) != 1 {
		t.Fatalf("ovs-ofctl meter-stats sent %d multipart requests", len(want))
	}
	if got := encodeMeterStatsRequest(binary.BigEndian.Uint32(want[0][4:]), 7); !bytes.Equal(got, want[0]) {
		t.Errorf("meter stats request differs from ovs-ofctl\nwant:\n%sgot:\n%s", hex.Dump(want[0]), hex.Dump(got))
	}
}

// TestDecodeMeterStatsReply reads the counters of the requested meter and sums its bands.
func TestDecodeMeterStatsReply(t *testing.T) {
	entry := func(id uint32, flows uint32, pkts, bytes uint64, bands ...uint64) []byte {
		var w buf
		w.u32(id)
		w.u16(uint16(meterStatsLen + meterBandStatsLen*len(bands)))
		w.zeros(6)
		w.u32(flows)
		w.u64(pkts)
		w.u64(bytes)
		w.u32(3)
		w.u32(0)
		for _, b := range bands {
			w.u64(b)
			w.u64(b * 60)
		}
		return w.b
	}
	var w buf
	start := w.header(typeMultipartReply, 9)
	w.u16(multipartMeterStats)
	w.u16(0)
	w.zeros(4)
	w.bytes(entry(3, 0, 1, 2, 1))
	w.bytes(entry(7, 2, 1000, 60000, 400, 5))
	w.setLen16(start, 2)
	got, found, more, err := decodeMeterStatsReply(w.b, 7)
	if err != nil || !found || more {
		t.Fatalf("found %v more %v err %v", found, more, err)
	}
	if want := (openflow.MeterStats{ID: 7, Flows: 2, Packets: 1000, Bytes: 60000, Dropped: 405}); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if _, found, _, err := decodeMeterStatsReply(w.b, 8); found || err != nil {
		t.Errorf("meter 8: found %v err %v", found, err)
	}
	if _, _, _, err := decodeMeterStatsReply(w.b[:len(w.b)-3], 7); err == nil {
		t.Error("a truncated entry decodes")
	}
}

// TestSetMeterModifiesAnExistingMeter: on OFPMMFC_METER_EXISTS SetMeter sends a modify.
func TestSetMeterModifiesAnExistingMeter(t *testing.T) {
	s := startFakeSwitch(t)
	s.setRejectDirect(func(msg []byte) *ofError {
		if msg[1] == typeMeterMod && binary.BigEndian.Uint16(msg[8:]) == meterAdd {
			return &ofError{typ: errTypeMeterModFailed, code: errCodeMeterExists}
		}
		return nil
	})
	b := New(s.target(), nil)
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m := openflow.Meter{ID: 4, Rate: 10, Burst: 5}
	if err := b.SetMeter(ctx, m); err != nil {
		t.Fatal(err)
	}
	var cmds []uint16
	for _, msg := range s.messages() {
		if msg[1] == typeMeterMod {
			cmds = append(cmds, binary.BigEndian.Uint16(msg[8:]))
		}
	}
	if len(cmds) != 2 || cmds[0] != meterAdd || cmds[1] != meterModify {
		t.Errorf("meter mod commands %v, want add then modify", cmds)
	}
	s.setRejectDirect(func(msg []byte) *ofError {
		if msg[1] == typeMeterMod {
			return &ofError{typ: errTypeMeterModFailed, code: 10}
		}
		return nil
	})
	if err := b.SetMeter(ctx, m); err == nil || !bytes.Contains([]byte(err.Error()), []byte("OFPMMFC_OUT_OF_METERS")) {
		t.Errorf("SetMeter on a refusing switch: %v", err)
	}
	if err := b.SetMeter(ctx, openflow.Meter{ID: 0, Rate: 1}); err == nil {
		t.Error("meter 0 accepted")
	}
}
