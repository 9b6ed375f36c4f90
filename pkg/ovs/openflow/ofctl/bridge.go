// Package ofctl implements openflow.Bridge by running ovs-ofctl: every Apply batch becomes one
// atomic OpenFlow 1.5 bundle streamed to a single `ovs-ofctl bundle <target> -` process (like
// iptables-restore), dumps are parsed from `ovs-ofctl dump-flows` / `dump-groups`, and flows are
// counted with `ovs-ofctl dump-aggregate`. Every run has a deadline (see WithTimeouts).
//
// Groups whose buckets do not fit in one 64 KiB OpenFlow message are split into a group add (or
// modify) carrying the first buckets, followed in the same bundle by insert_bucket messages.
// When OVS rejects the bundle, nothing changes and Apply's error names the rejected op.
package ofctl

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// Bridge programs one OpenFlow switch through ovs-ofctl.
type Bridge struct {
	target   string
	binary   string
	runner   Runner
	maxBytes int
	timeouts timeouts
}

var (
	_ openflow.Bridge       = (*Bridge)(nil)
	_ openflow.FlowCounter  = (*Bridge)(nil)
	_ openflow.TableCounter = (*Bridge)(nil)
)

// Option tunes New.
type Option func(*Bridge)

// WithBinary sets the ovs-ofctl executable (default "ovs-ofctl", looked up in PATH).
func WithBinary(path string) Option { return func(b *Bridge) { b.binary = path } }

// WithRunner replaces the process runner (default ExecRunner).
func WithRunner(r Runner) Option { return func(b *Bridge) { b.runner = r } }

// WithMaxMessageBytes sets the size above which a group's buckets are split across several
// OpenFlow messages (default DefaultMaxMessageBytes).
func WithMaxMessageBytes(n int) Option { return func(b *Bridge) { b.maxBytes = n } }

// New returns a Bridge for target, the OpenFlow endpoint ovs-ofctl connects to: a management
// socket such as "unix:/var/run/openvswitch/br-int.mgmt" or a bridge name.
func New(target string, opts ...Option) *Bridge {
	b := &Bridge{target: target, binary: "ovs-ofctl", runner: ExecRunner{}, maxBytes: DefaultMaxMessageBytes,
		timeouts: timeouts{call: DefaultCallTimeout, bundle: DefaultBundleTimeout, perOp: DefaultBundleOpTimeout}}
	for _, o := range opts {
		o(b)
	}
	return b
}

// Target returns the OpenFlow endpoint.
func (b *Bridge) Target() string { return b.target }

// stderrLimit bounds how much of ovs-ofctl's standard error is kept for error reports.
const stderrLimit = 256 << 10

// Apply executes ops as one atomic bundle. An empty batch starts no process. When OVS rejects the
// batch the error is a *RejectedOpError naming the op, and no op took effect.
func (b *Bridge) Apply(ctx context.Context, ops []openflow.Op) error {
	if len(ops) == 0 {
		return nil
	}
	for i := range ops {
		if err := validateOp(&ops[i]); err != nil {
			return fmt.Errorf("ovs-ofctl bundle %s: op %d: %w", b.target, i, err)
		}
	}
	start := time.Now()
	stderr := &cappedBuffer{limit: stderrLimit}
	var lines []lineRef
	args := []string{"-O", "OpenFlow15", "bundle", b.target, "-"}
	err := b.runWithin(ctx, "bundle", b.timeouts.forBundle(len(ops)), func(ctx context.Context) error {
		return b.runner.Run(ctx, b.binary, args, func(w io.Writer) error {
			bw := newBundleWriter(bufio.NewWriterSize(w, 64<<10), b.maxBytes)
			defer func() { lines = bw.lines }()
			for i := range ops {
				if err := bw.writeOp(i, &ops[i]); err != nil {
					return err
				}
			}
			return bw.w.Flush()
		}, nil, stderr)
	})
	if err == nil {
		klog.V(4).InfoS("Applied OpenFlow bundle", "target", b.target, "ops", len(ops), "lines", len(lines), "duration", time.Since(start))
		return nil
	}
	if interrupted(ctx, err) {
		// The deadline or ctx ended the run: what ovs-ofctl printed so far says nothing.
		return err
	}
	return b.applyError(ops, lines, stderr.buf, err)
}

// WriteBundle writes the exact bundle text Apply would stream for ops.
func (b *Bridge) WriteBundle(w io.Writer, ops []openflow.Op) error {
	bw := newBundleWriter(bufio.NewWriterSize(w, 64<<10), b.maxBytes)
	for i := range ops {
		if err := validateOp(&ops[i]); err != nil {
			return fmt.Errorf("op %d: %w", i, err)
		}
		if err := bw.writeOp(i, &ops[i]); err != nil {
			return err
		}
	}
	return bw.w.Flush()
}

// applyError turns a failed ovs-ofctl run into an error naming the rejected op when possible.
func (b *Bridge) applyError(ops []openflow.Op, lines []lineRef, stderr []byte, runErr error) error {
	rep := parseStderr(stderr)
	line, swErr, ok := rep.locate(len(lines), func(line int, e *switchError) bool {
		return consistentWith(&ops[lines[line].op], e)
	})
	if !ok {
		if len(rep.summary) == 0 {
			return fmt.Errorf("ovs-ofctl bundle %s: %w", b.target, runErr)
		}
		return fmt.Errorf("ovs-ofctl bundle %s: %w: %s", b.target, runErr, rep)
	}
	ref := lines[line]
	reason := rep.parseReason
	if swErr != nil {
		reason = swErr.code
	}
	return &RejectedOpError{
		Target: b.target,
		Index:  int(ref.op),
		Kind:   ops[ref.op].Kind,
		Line:   line + 1,
		Part:   int(ref.part),
		Text:   b.renderPart(&ops[ref.op], int(ref.part)),
		Reason: reason,
	}
}

// renderPart renders line part of op again, for an error message.
func (b *Bridge) renderPart(op *openflow.Op, part int) string {
	var buf bytes.Buffer
	bw := newBundleWriter(bufio.NewWriter(&buf), b.maxBytes)
	if err := bw.writeOp(0, op); err != nil {
		return ""
	}
	_ = bw.w.Flush()
	parts := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if part >= len(parts) {
		return ""
	}
	return truncate(parts[part], maxQuotedLen)
}

// DumpFlows returns the flows selected by filter, from `ovs-ofctl --no-stats dump-flows`. Lines
// it cannot parse (flows installed by others with actions the model lacks) are skipped and
// logged, never fatal: see openflow.ParseFlowDumpLenient.
func (b *Bridge) DumpFlows(ctx context.Context, filter openflow.FlowFilter) ([]openflow.Flow, error) {
	args := []string{"-O", "OpenFlow15", "--no-stats", "dump-flows", b.target}
	if sel := flowSelector(filter); sel != "" {
		args = append(args, sel)
	}
	out, err := b.output(ctx, "dump-flows", args)
	if err != nil {
		return nil, err
	}
	flows, skipped := openflow.ParseFlowDumpLenient(out)
	if skipped.Count > 0 {
		klog.InfoS("Skipped flows that could not be parsed in a flow dump (written by someone else?)",
			"target", b.target, "skipped", skipped.Count, "parsed", len(flows), "filter", flowSelector(filter))
		for _, e := range skipped.Errors {
			klog.V(2).InfoS("Skipped unparseable flow", "target", b.target, "lineNo", e.LineNo, "line", e.Line, "token", e.Token, "reason", e.Reason)
		}
	}
	return flows, nil
}

// CountFlows returns how many flows filter selects, from `ovs-ofctl dump-aggregate`: one small
// reply whatever the bridge holds.
func (b *Bridge) CountFlows(ctx context.Context, filter openflow.FlowFilter) (int, error) {
	st, err := b.AggregateStats(ctx, filter)
	if err != nil {
		return 0, err
	}
	return int(st.FlowCount), nil
}

// AggregateStats returns the flow, packet and byte counts of the flows filter selects, from
// `ovs-ofctl dump-aggregate`.
func (b *Bridge) AggregateStats(ctx context.Context, filter openflow.FlowFilter) (openflow.AggregateStats, error) {
	args := []string{"-O", "OpenFlow15", "dump-aggregate", b.target}
	if sel := flowSelector(filter); sel != "" {
		args = append(args, sel)
	}
	out, err := b.output(ctx, "dump-aggregate", args)
	if err != nil {
		return openflow.AggregateStats{}, err
	}
	st, err := openflow.ParseAggregateReply(out)
	if err != nil {
		return openflow.AggregateStats{}, fmt.Errorf("ovs-ofctl dump-aggregate %s: %w", b.target, err)
	}
	return st, nil
}

// TableStats returns every table's statistics, from `ovs-ofctl dump-tables`: the switch
// answers from its per-table counters without walking the flows.
func (b *Bridge) TableStats(ctx context.Context) ([]openflow.TableStats, error) {
	out, err := b.output(ctx, "dump-tables", []string{"-O", "OpenFlow15", "dump-tables", b.target})
	if err != nil {
		return nil, err
	}
	st, err := openflow.ParseTableStatsReply(out)
	if err != nil {
		return nil, fmt.Errorf("ovs-ofctl dump-tables %s: %w", b.target, err)
	}
	return st, nil
}

// DumpGroups returns every group, from `ovs-ofctl dump-groups`.
//
// For tests on small bridges only: ovs-vswitchd 3.1 aborts (`assertion start_ofs <= UINT16_MAX
// failed in ofpmp_postappend()`) when it serves dump-groups for a group whose description
// exceeds 64 KiB, such as a select group of a few thousand buckets, taking every flow with
// it. Production code must not dump groups: it knows the group IDs it wrote from the
// group:N actions of its own flows (DumpFlows with a cookie filter, or CountFlows), which OVS
// serves safely whatever the groups' sizes.
//
// Open vSwitch sends a description per group (ofpmp_postappend can split the reply only
// between groups), so this limit cannot be worked around from the client side.
func (b *Bridge) DumpGroups(ctx context.Context) ([]openflow.Group, error) {
	out, err := b.output(ctx, "dump-groups", []string{"-O", "OpenFlow15", "dump-groups", b.target})
	if err != nil {
		return nil, err
	}
	groups, err := openflow.ParseGroupDump(out)
	if err != nil {
		return nil, fmt.Errorf("parsing ovs-ofctl dump-groups %s: %w", b.target, err)
	}
	return groups, nil
}

func flowSelector(f openflow.FlowFilter) string {
	var p []string
	if f.Cookie != 0 || f.CookieMask != 0 {
		p = append(p, openflow.FormatCookieFilter(f.Cookie, f.CookieMask))
	}
	if f.TableSet {
		p = append(p, "table="+strconv.Itoa(int(f.Table)))
	}
	return strings.Join(p, ",")
}

// output runs ovs-ofctl command cmd (args is its full argument list) and returns its standard
// output.
func (b *Bridge) output(ctx context.Context, cmd string, args []string) (string, error) {
	var stdout bytes.Buffer
	stderr := &cappedBuffer{limit: stderrLimit}
	err := b.runWithin(ctx, cmd, b.timeouts.call, func(ctx context.Context) error {
		return b.runner.Run(ctx, b.binary, args, nil, &stdout, stderr)
	})
	if interrupted(ctx, err) {
		return "", err
	}
	if err != nil {
		msg := strings.TrimSpace(truncate(string(stderr.buf), maxQuotedLen))
		if msg == "" {
			return "", fmt.Errorf("ovs-ofctl %s %s: %w", cmd, b.target, err)
		}
		return "", fmt.Errorf("ovs-ofctl %s %s: %w: %s", cmd, b.target, err, msg)
	}
	return stdout.String(), nil
}
