package ofctl

import (
	"context"
	"errors"
	"io"
	"os/exec"
	"time"
)

// Runner runs one process to completion. The default runs it with os/exec; tests may fake it.
type Runner interface {
	// Run runs name with args. When stdin is non-nil, it is called with a writer connected to
	// the process's standard input, which is closed when stdin returns. The process's standard
	// output and error are copied to stdout and stderr (either may be nil to discard).
	Run(ctx context.Context, name string, args []string, stdin func(io.Writer) error, stdout, stderr io.Writer) error
}

// waitDelay bounds how long Run waits for a killed process's output to drain.
const waitDelay = time.Second

// ExecRunner is the Runner that starts real processes.
type ExecRunner struct{}

// Run implements Runner.
func (ExecRunner) Run(ctx context.Context, name string, args []string, stdin func(io.Writer) error, stdout, stderr io.Writer) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// When ctx ends the process is killed; do not wait long for its output pipes after that.
	cmd.WaitDelay = waitDelay
	if stdin == nil {
		return cmd.Run()
	}
	pipe, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	writeErr := stdin(pipe)
	if cerr := pipe.Close(); writeErr == nil && cerr != nil && !errors.Is(cerr, io.ErrClosedPipe) {
		writeErr = cerr
	}
	waitErr := cmd.Wait()
	if waitErr != nil {
		// A process that exits early breaks the pipe; its own failure is the real cause.
		return waitErr
	}
	return writeErr
}

// cappedBuffer keeps the first limit bytes written to it and counts the rest, so that a
// multi-megabyte hex dump on ovs-ofctl's standard error cannot exhaust memory.
type cappedBuffer struct {
	buf     []byte
	limit   int
	dropped int
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	room := c.limit - len(c.buf)
	if room >= len(p) {
		c.buf = append(c.buf, p...)
	} else {
		if room > 0 {
			c.buf = append(c.buf, p[:room]...)
		}
		c.dropped += len(p) - max(room, 0)
	}
	return len(p), nil
}
