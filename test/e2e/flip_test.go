//go:build e2e

package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// attempt is one connection of the flip test's client.
type attempt struct {
	start time.Time
	reply framework.EchoReply
	err   error
}

// prober connects from a pod to an address every interval and records every attempt.
type prober struct {
	mu       sync.Mutex
	attempts []attempt
	stop     chan struct{}
	done     chan struct{}
}

func startProber(ns *framework.NetNS, addr string, interval time.Duration) *prober {
	p := &prober{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for {
			start := time.Now()
			r, err := ns.Echo(context.Background(), "tcp", addr, dialTimeout)
			p.mu.Lock()
			p.attempts = append(p.attempts, attempt{start: start, reply: r, err: err})
			p.mu.Unlock()
			select {
			case <-p.stop:
				return
			case <-time.After(interval):
			}
		}
	}()
	return p
}

// since returns the attempts started at or after t.
func (p *prober) since(t time.Time) []attempt {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []attempt
	for _, a := range p.attempts {
		if !a.start.Before(t) {
			out = append(out, a)
		}
	}
	return out
}

func (p *prober) halt() []attempt {
	close(p.stop)
	<-p.done
	return p.since(time.Time{})
}

// waitAttempts waits until n attempts started at or after t have finished.
func (p *prober) waitAttempts(t *testing.T, since time.Time, n int, what string) []attempt {
	t.Helper()
	framework.WaitFor(t, time.Minute, what, func(context.Context) (bool, string, error) {
		got := len(p.since(since))
		return got >= n, "", nil
	})
	return p.since(since)
}

// flip: with proxyLoadBalancerIPs=true, a client pod keeps connecting to an LB IP whose ingress
// changes from VIP to Proxy and back. Each agent applies the change within one sync, and every
// connection started after that follows the new mode: answered directly (the backend sees the
// pod) in VIP mode, relayed by the external load balancer (counted by it; the backend sees a
// node) in Proxy mode. None fails.
func (e *option1) flip(t *testing.T) {
	ctx := context.Background()
	e.waitIngressSeen(t, "web-flip", flipIP, corev1.LoadBalancerIPModeVIP)
	require.NoError(t, e.sb.WaitLBApplied(ctx, e.ns, "web-flip", flipIP, true))
	statsBefore, err := e.flipLB.Stats(ctx)
	require.NoError(t, err)

	p := startProber(e.clientNS, hostPort(flipIP.String(), 80), 50*time.Millisecond)
	stopped := false
	defer func() {
		if !stopped {
			p.halt()
		}
	}()
	direct := fromBackend(e.backends, e.clientIP)
	relayed := e.viaNode()
	check := func(mode string, as []attempt, ok func(framework.EchoReply) (bool, string)) {
		t.Helper()
		require.NotEmpty(t, as)
		for i, a := range as {
			require.NoError(t, a.err, "%s mode: connection %d (started %s) failed", mode, i+1, a.start.Format("15:04:05.000"))
			good, why := ok(a.reply)
			require.True(t, good, "%s mode: connection %d (started %s): reply %s: %s", mode, i+1, a.start.Format("15:04:05.000"), a.reply, why)
		}
	}
	check("VIP", p.waitAttempts(t, time.Time{}, 10, "10 connections to the VIP-mode LB IP"), direct)

	for _, step := range []struct {
		mode       corev1.LoadBalancerIPMode
		programmed bool
		ok         func(framework.EchoReply) (bool, string)
	}{
		{corev1.LoadBalancerIPModeProxy, false, relayed},
		{corev1.LoadBalancerIPModeVIP, true, direct},
	} {
		changed := time.Now()
		require.NoError(t, e.sb.SetLBIngress(ctx, e.ns, "web-flip", flipIP, step.mode))
		require.NoError(t, e.sb.WaitLBApplied(ctx, e.ns, "web-flip", flipIP, step.programmed), "after the ingress changed to %s", step.mode)
		applied := time.Now()
		took := applied.Sub(changed)
		t.Logf("ingress %s -> %s: every agent applied it %v after the change", flipIP, step.mode, took.Round(time.Millisecond))
		require.Less(t, took, syncBound, "the agents must apply a changed ipMode within one sync")
		for _, a := range p.since(changed) {
			if !a.start.After(applied) && a.err != nil {
				t.Logf("during the change to %s: connection started %s failed: %v", step.mode, a.start.Format("15:04:05.000"), a.err)
			}
		}
		check(string(step.mode), p.waitAttempts(t, applied, 10, "10 connections after the change to "+string(step.mode)), step.ok)
	}
	all := p.halt()
	stopped = true
	statsAfter, err := e.flipLB.Stats(ctx)
	require.NoError(t, err)
	var viaLB, failed int64
	for _, a := range all {
		switch {
		case a.err != nil:
			failed++
		case a.reply.ClientIP() != e.clientIP:
			viaLB++
		}
	}
	relayedCount := statsAfter.TCP - statsBefore.TCP
	t.Logf("%d connections: %d relayed by the external load balancer (it counted %d), %d failed during changes", len(all), viaLB, relayedCount, failed)
	require.Positive(t, viaLB)
	require.GreaterOrEqual(t, relayedCount, viaLB, "every connection the backend saw from a node went through the external load balancer")
	require.LessOrEqual(t, relayedCount, viaLB+failed, "the external load balancer relayed connections that the backends saw directly from the pod")
}
