package reject

import (
	"hash/maphash"
	"net/netip"
	"sync"
	"time"
)

// bucket is a token bucket: rate events per second on average, bursts of up to burst. Its
// owner serializes access.
type bucket struct {
	tokens float64
	last   time.Time
}

// refill adds the tokens earned since the last call, up to burst.
func (b *bucket) refill(now time.Time, rate, burst float64) {
	if elapsed := now.Sub(b.last); elapsed > 0 {
		b.tokens = min(burst, b.tokens+elapsed.Seconds()*rate)
	}
	b.last = now
}

// Why a refusal was not sent.
type limitResult uint8

const (
	limitAllowed limitResult = iota
	// limitSource: the packet's source used up its own share.
	limitSource
	// limitGlobal: every source together used up the responder's rate.
	limitGlobal
)

// fairLimiter is a global token bucket with a token bucket per source in front of it, so that
// one source flooding uses up its own share of refusals and not everyone's. The per-source
// buckets are a fixed table indexed by a seeded hash of the source address: memory is bounded
// whatever the number of sources, and two sources landing in the same slot share a bucket
// (with n slots a given pair collides with probability 1/n; the seed is per limiter, so a
// client cannot aim at another's slot).
type fairLimiter struct {
	mu                      sync.Mutex
	rate, burst             float64
	sourceRate, sourceBurst float64
	global                  bucket
	sources                 []bucket
	seed                    maphash.Seed
	now                     func() time.Time
}

func newFairLimiter(rate float64, burst int, sourceRate float64, sourceBurst, sources int, now func() time.Time) *fairLimiter {
	t := now()
	l := &fairLimiter{rate: rate, burst: float64(burst), sourceRate: sourceRate, sourceBurst: float64(sourceBurst),
		global: bucket{tokens: float64(burst), last: t}, sources: make([]bucket, sources), seed: maphash.MakeSeed(), now: now}
	for i := range l.sources {
		l.sources[i] = bucket{tokens: l.sourceBurst, last: t}
	}
	return l
}

// allow takes a token from src's bucket and one from the global bucket when both have one.
func (l *fairLimiter) allow(src netip.Addr) limitResult {
	b16 := src.As16()
	slot := &l.sources[maphash.Bytes(l.seed, b16[:])%uint64(len(l.sources))]
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	slot.refill(now, l.sourceRate, l.sourceBurst)
	if slot.tokens < 1 {
		return limitSource
	}
	l.global.refill(now, l.rate, l.burst)
	if l.global.tokens < 1 {
		return limitGlobal
	}
	slot.tokens--
	l.global.tokens--
	return limitAllowed
}
