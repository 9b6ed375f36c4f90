package conntrack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// DefaultTimeout bounds one ovs-appctl call.
const DefaultTimeout = 10 * time.Second

// Runner runs ovs-appctl with args and returns its standard output; tests may fake it.
type Runner func(ctx context.Context, args []string) (string, error)

// Table is ovs-vswitchd's connection tracker, reached with ovs-appctl through the unixctl
// socket in RunDir.
type Table struct {
	// RunDir is ovs-vswitchd's run directory (config ovsRunDir).
	RunDir string
	// Timeout bounds each call; 0 means DefaultTimeout.
	Timeout time.Duration
	// Run runs ovs-appctl; nil runs the binary found on PATH.
	Run Runner
}

// Dump lists the entries of zone.
func (t *Table) Dump(ctx context.Context, zone uint16) ([]Entry, error) {
	out, err := t.appctl(ctx, "dpctl/dump-conntrack", "zone="+strconv.Itoa(int(zone)))
	if err != nil {
		return nil, err
	}
	entries, bad := ParseDump(out)
	if bad > 0 {
		return entries, fmt.Errorf("dpctl/dump-conntrack zone=%d: %d lines not understood", zone, bad)
	}
	return entries, nil
}

// Delete removes exactly e (the entry with e's zone and original 5-tuple).
func (t *Table) Delete(ctx context.Context, e Entry) error {
	_, err := t.appctl(ctx, append([]string{"dpctl/flush-conntrack"}, e.FlushArgs()...)...)
	return err
}

func (t *Table) appctl(ctx context.Context, args ...string) (string, error) {
	target, err := t.target()
	if err != nil {
		return "", err
	}
	timeout := t.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	full := append([]string{"-t", target}, args...)
	run := t.Run
	if run == nil {
		run = execAppctl
	}
	out, err := run(ctx, full)
	if err != nil {
		return "", fmt.Errorf("ovs-appctl %s: %w", strings.Join(args, " "), err)
	}
	return out, nil
}

// target is ovs-vswitchd's unixctl socket: RunDir/ovs-vswitchd.ctl when it was started with
// that name (--unixctl), else RunDir/ovs-vswitchd.<pid>.ctl of its pidfile (OVS's default).
// It is resolved at each call: ovs-vswitchd's pid changes when it restarts.
func (t *Table) target() (string, error) {
	fixed := filepath.Join(t.RunDir, "ovs-vswitchd.ctl")
	if _, err := os.Stat(fixed); err == nil {
		return fixed, nil
	}
	b, err := os.ReadFile(filepath.Join(t.RunDir, "ovs-vswitchd.pid"))
	if err != nil {
		return "", fmt.Errorf("finding ovs-vswitchd's control socket: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return "", fmt.Errorf("ovs-vswitchd's pidfile: %w", err)
	}
	return filepath.Join(t.RunDir, "ovs-vswitchd."+strconv.Itoa(pid)+".ctl"), nil
}

func execAppctl(ctx context.Context, args []string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "ovs-appctl", args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return "", fmt.Errorf("%w: %s", err, msg)
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return "", fmt.Errorf("%w (timed out)", err)
		}
		return "", err
	}
	return stdout.String(), nil
}
