package ofconn

import (
	"context"
	"time"
)

// Backoff is the wait between the attempts of a reconnecting loop: Min after the first
// failure, doubling after each further one up to Max, back to Min after Reset.
type Backoff struct {
	Min, Max time.Duration
	next     time.Duration
}

// Current is the wait the next Wait takes.
func (b *Backoff) Current() time.Duration {
	if b.next <= 0 {
		return b.Min
	}
	return b.next
}

// Wait waits Current, or until ctx ends, and doubles the next wait (up to Max). It reports
// whether the wait passed.
func (b *Backoff) Wait(ctx context.Context) bool {
	d := b.Current()
	b.next = min(2*d, max(b.Max, b.Min))
	return sleepCtx(ctx, d)
}

// Reset makes the next wait Min again.
func (b *Backoff) Reset() { b.next = 0 }

// sleepCtx waits d or until ctx ends; it reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
