package ofctl

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
)

// hangingRunner plays an ovs-ofctl stuck on a wedged switch: it returns only when its context
// ends, and records the deadline it was given.
type hangingRunner struct {
	deadlines []time.Duration
}

func (h *hangingRunner) Run(ctx context.Context, _ string, _ []string, _ func(io.Writer) error, _, _ io.Writer) error {
	d, ok := ctx.Deadline()
	if !ok {
		return errors.New("run without a deadline")
	}
	h.deadlines = append(h.deadlines, time.Until(d))
	<-ctx.Done()
	return errors.New("signal: killed")
}

func TestEveryRunHasADeadlineAndTimesOut(t *testing.T) {
	const call, base, perOp = 20 * time.Millisecond, 30 * time.Millisecond, time.Millisecond
	h := &hangingRunner{}
	b := New("unix:/run/br.mgmt", WithRunner(h), WithTimeouts(call, base, perOp))
	ctx := context.Background()
	checks := []struct {
		cmd   string
		limit time.Duration
		run   func() error
	}{
		{"bundle", base + 10*perOp, func() error { return b.Apply(ctx, flows(10, 0)) }},
		{"dump-flows", call, func() error { _, err := b.DumpFlows(ctx, openflow.FlowFilter{}); return err }},
		{"dump-aggregate", call, func() error { _, err := b.CountFlows(ctx, openflow.FlowFilter{}); return err }},
		{"dump-groups", call, func() error { _, err := b.DumpGroups(ctx); return err }},
	}
	for i, c := range checks {
		err := c.run()
		var te *TimeoutError
		require.ErrorAs(t, err, &te, c.cmd)
		require.Equal(t, &TimeoutError{Command: c.cmd, Target: "unix:/run/br.mgmt", After: c.limit}, te)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.EqualError(t, err, "ovs-ofctl "+c.cmd+" unix:/run/br.mgmt timed out after "+c.limit.String()+" (is ovs-vswitchd responsive?)")
		require.LessOrEqual(t, h.deadlines[i], c.limit, c.cmd)
		_, isRejected := openflow.RejectedOpIndex(err)
		require.False(t, isRejected)
	}
}

func TestDefaultTimeouts(t *testing.T) {
	h := &hangingRunner{}
	b := New("br0", WithRunner(h))
	require.Equal(t, timeouts{call: 10 * time.Second, bundle: 30 * time.Second, perOp: 50 * time.Microsecond}, b.timeouts)
	require.Equal(t, 30*time.Second+time.Second, b.timeouts.forBundle(20000))
	// Zero keeps a default.
	b = New("br0", WithTimeouts(0, time.Minute, 0))
	require.Equal(t, timeouts{call: 10 * time.Second, bundle: time.Minute, perOp: 50 * time.Microsecond}, b.timeouts)
}

func TestCallerCancellationIsNotATimeout(t *testing.T) {
	h := &hangingRunner{}
	b := New("br0", WithRunner(h))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := b.DumpFlows(ctx, openflow.FlowFilter{})
	require.ErrorIs(t, err, context.Canceled)
	var te *TimeoutError
	require.False(t, errors.As(err, &te))
	require.EqualError(t, err, "ovs-ofctl dump-flows br0: context canceled")
	err = b.Apply(ctx, flows(1, 0))
	require.EqualError(t, err, "ovs-ofctl bundle br0: context canceled")
}
