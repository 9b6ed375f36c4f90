package native

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/ofctl"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

// goldenSet is the ops of one golden file.
type goldenSet struct {
	name string
	ops  []openflow.Op
}

// goldenSets returns an add op for every flow and group of each of the proxier's golden cases:
// the expected document (the last one, "expected: |", written with table and register names)
// of every testdata/golden data file.
func goldenSets(t testing.TB) []goldenSet {
	t.Helper()
	var files []string
	err := filepath.WalkDir("../../../proxy/testdata/golden", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".yaml") {
			files = append(files, path)
		}
		return err
	})
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden data files: %v", err)
	}
	names := pipeline.Names()
	var sets []goldenSet
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		docs := strings.Split(string(data), "\n---\n")
		var doc struct {
			Expected string `json:"expected"`
		}
		if err := yaml.UnmarshalStrict([]byte(docs[len(docs)-1]), &doc); err != nil || doc.Expected == "" {
			t.Fatalf("%s: no expected document: %v", file, err)
		}
		set := goldenSet{name: filepath.Base(file)}
		for _, line := range strings.Split(doc.Expected, "\n") {
			line = strings.TrimSpace(line)
			switch {
			case line == "" || strings.HasPrefix(line, "#"):
			case strings.HasPrefix(line, "group_id="):
				g, err := openflow.ParseGroupNamed(line, names)
				if err != nil {
					t.Fatalf("%s: %v", file, err)
				}
				set.ops = append(set.ops, openflow.Op{Kind: openflow.AddGroup, Group: &g})
			default:
				f, err := openflow.ParseFlowNamed(line, names)
				if err != nil {
					t.Fatalf("%s: %v", file, err)
				}
				set.ops = append(set.ops, openflow.Op{Kind: openflow.AddFlow, Flow: &f})
			}
		}
		sets = append(sets, set)
	}
	return sets
}

// goldenOps returns the ops of every golden file.
func goldenOps(t testing.TB) []openflow.Op {
	var ops []openflow.Op
	for _, s := range goldenSets(t) {
		ops = append(ops, s.ops...)
	}
	return ops
}

// pipelineOps returns add ops for the pipeline's base, gateway and pod flows in both families.
func pipelineOps(t testing.TB) []openflow.Op {
	mac := func(s string) net.HardwareAddr {
		m, err := net.ParseMAC(s)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	n := pipeline.NodeConfig{Round: 3, IPv4: true, IPv6: true, GatewayOFPort: 2,
		GatewayIPv4: netip.MustParseAddr("10.10.0.1"), GatewayIPv6: netip.MustParseAddr("fd00:10:10::1"),
		NodePortAddresses: []netip.Addr{netip.MustParseAddr("192.168.77.10"), netip.MustParseAddr("fd00:77::10")},
		PeerNodeIPs:       []netip.Addr{netip.MustParseAddr("192.168.77.11"), netip.MustParseAddr("fd00:77::11")}}
	flows := pipeline.BaseFlows(n)
	flows = append(flows, pipeline.GatewayFlows(3, pipeline.Gateway{OFPort: 2, MAC: mac("0e:00:00:00:00:01"), IPv4: true, IPv6: true,
		NodePortVirtualIPs: []netip.Addr{netip.MustParseAddr("169.254.0.252"), netip.MustParseAddr("fc01::aabb:ccdd:eefe")}})...)
	flows = append(flows, pipeline.PodFlows(3, mac("0a:58:0a:0a:00:01"), pipeline.Pod{ID: 7, OFPort: 7, MAC: mac("0a:58:0a:0a:00:05"),
		IPs: []netip.Addr{netip.MustParseAddr("10.10.0.5"), netip.MustParseAddr("fd00:10:10::5")}})...)
	ops := make([]openflow.Op, len(flows))
	for i := range flows {
		ops[i] = openflow.Op{Kind: openflow.AddFlow, Flow: &flows[i]}
	}
	return ops
}

// ofctlMessages streams ops through `ovs-ofctl -O OpenFlow15 bundle` (the ofctl backend's exact
// bundle text) into a fake switch and returns the bundle-add messages it sent, in order.
func ofctlMessages(t testing.TB, ops []openflow.Op) [][]byte {
	t.Helper()
	if _, err := exec.LookPath("ovs-ofctl"); err != nil {
		t.Fatalf("ovs-ofctl is required: %v", err)
	}
	s := startFakeSwitch(t)
	file := filepath.Join(t.TempDir(), "bundle.txt")
	var text bytes.Buffer
	if err := ofctl.New(s.target()).WriteBundle(&text, ops); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, text.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("ovs-ofctl", "-O", "OpenFlow15", "bundle", s.target(), file).CombinedOutput()
	if err != nil {
		lines := strings.Split(text.String(), "\n")
		t.Fatalf("ovs-ofctl bundle: %v: %s\n%s", err, out, strings.Join(lines[max(0, len(lines)-40):], "\n"))
	}
	var adds [][]byte
	for _, m := range s.messages() {
		if m[1] == typeBundleAdd {
			adds = append(adds, m)
		}
	}
	return adds
}

// normalize clears the xids (outer and inner) and the bundle id of a bundle-add message.
func normalize(m []byte) []byte {
	m = append([]byte(nil), m...)
	copy(m[4:8], []byte{0, 0, 0, 0})
	copy(m[8:12], []byte{0, 0, 0, 0})
	if len(m) >= 24 {
		copy(m[20:24], []byte{0, 0, 0, 0})
	}
	return m
}

// TestEncodingMatchesOvsOfctl encodes every flow and group of the golden files, of the
// pipeline's base, gateway and pod flows, and a set covering every model field, action and op
// kind, and requires each message to be byte-for-byte what ovs-ofctl sends for the same op.
func TestEncodingMatchesOvsOfctl(t *testing.T) {
	ops := append(goldenOps(t), pipelineOps(t)...)
	ops = append(ops, coverageOps()...)
	want := ofctlMessages(t, ops)
	if len(want) != len(ops) {
		t.Fatalf("ovs-ofctl sent %d bundle messages for %d ops", len(want), len(ops))
	}
	for i := range ops {
		op := &ops[i]
		e := newBundleEncoder(0, bundleAtomic|bundleOrdered, 1)
		if err := e.op(i, op); err != nil {
			t.Errorf("op %d (%s): encoding: %v", i, describe(op), err)
			continue
		}
		got := normalize(e.w.b)
		exp := normalize(want[i])
		if len(e.refs) != 1 || !bytes.Equal(got, exp) {
			t.Errorf("op %d (%s): encoding differs from ovs-ofctl\nwant:\n%sgot:\n%s", i, describe(op), hex.Dump(exp), hex.Dump(got))
		}
	}
	t.Logf("%d ops compared", len(ops))
}

func describe(op *openflow.Op) string {
	if op.Flow != nil {
		return op.Kind.String() + " " + openflow.FormatFlow(op.Flow)
	}
	return op.Kind.String() + " " + openflow.FormatGroup(op.Group)
}

// bucketCount is the number of buckets in a group-mod inside a bundle-add message.
func bucketCount(t *testing.T, m []byte) int {
	t.Helper()
	inner := m[bundleAddHeaderLen:]
	n := int(binary.BigEndian.Uint16(inner[16:]))
	b := inner[groupModFixedLen : groupModFixedLen+n]
	count := 0
	for len(b) > 0 {
		l := int(binary.BigEndian.Uint16(b))
		b = b[l:]
		count++
	}
	return count
}

// TestSplitGroupMatchesOvsOfctl splits a group of 3,000 buckets over several messages and
// requires each to be what ovs-ofctl sends for the equivalent lines: the group add with the
// first buckets, then "group insert_bucket ...,command_bucket_id=last" lines.
func TestSplitGroupMatchesOvsOfctl(t *testing.T) {
	g := testGroup(5, 3000)
	e := newBundleEncoder(0, bundleAtomic|bundleOrdered, 1)
	op := openflow.Op{Kind: openflow.AddGroup, Group: g}
	if err := e.op(0, &op); err != nil {
		t.Fatal(err)
	}
	var msgs [][]byte
	for b := e.w.b; len(b) > 0; {
		n := int(binary.BigEndian.Uint16(b[2:]))
		msgs = append(msgs, b[:n])
		b = b[n:]
	}
	if len(msgs) < 3 || len(msgs) != len(e.refs) {
		t.Fatalf("%d messages (%d refs), want at least 3", len(msgs), len(e.refs))
	}
	var text strings.Builder
	next := 0
	for i, m := range msgs {
		n := bucketCount(t, m)
		if i == 0 {
			text.WriteString("group add " + openflow.FormatGroupHeader(g))
		} else {
			text.WriteString("group insert_bucket group_id=5,command_bucket_id=last")
		}
		for _, b := range g.Buckets[next : next+n] {
			text.WriteString("," + openflow.FormatBucket(&b))
		}
		text.WriteString("\n")
		next += n
	}
	want := ofctlText(t, text.String())
	if len(want) != len(msgs) {
		t.Fatalf("ovs-ofctl sent %d messages, the encoder %d", len(want), len(msgs))
	}
	for i := range msgs {
		if !bytes.Equal(normalize(msgs[i]), normalize(want[i])) {
			t.Errorf("message %d differs from ovs-ofctl", i)
		}
	}
}

// ofctlText runs `ovs-ofctl bundle` on text against a fake switch and returns its bundle adds.
func ofctlText(t testing.TB, text string) [][]byte {
	t.Helper()
	s := startFakeSwitch(t)
	file := filepath.Join(t.TempDir(), "bundle.txt")
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ovs-ofctl", "-O", "OpenFlow15", "bundle", s.target(), file).CombinedOutput(); err != nil {
		t.Fatalf("ovs-ofctl bundle: %v: %s", err, out)
	}
	var adds [][]byte
	for _, m := range s.messages() {
		if m[1] == typeBundleAdd {
			adds = append(adds, m)
		}
	}
	return adds
}
