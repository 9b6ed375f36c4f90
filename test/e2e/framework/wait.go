package framework

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// pollInterval is how often waits re-check their condition.
const pollInterval = 100 * time.Millisecond

// Poll calls cond every 100ms until it reports done, returns an error, ctx ends or timeout passes.
// cond's error is final; to keep polling through transient errors, return (false, nil) and record
// the reason in the closure. On a timeout the error says what never happened (what) and cond's last
// explanation (the string it returned), if any.
func Poll(ctx context.Context, timeout time.Duration, what string, cond func(ctx context.Context) (done bool, status string, err error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	last := ""
	for {
		done, status, err := cond(ctx)
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if done {
			return nil
		}
		if status != "" {
			last = status
		}
		select {
		case <-ctx.Done():
			if last == "" {
				return fmt.Errorf("%s did not happen within %v", what, timeout)
			}
			return fmt.Errorf("%s did not happen within %v; last seen: %s", what, timeout, last)
		case <-ticker.C:
		}
	}
}

// WaitFor is Poll for tests: it fails t if the condition is not met in time.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) (done bool, status string, err error)) {
	t.Helper()
	if err := Poll(context.Background(), timeout, what, cond); err != nil {
		t.Fatal(err)
	}
}
