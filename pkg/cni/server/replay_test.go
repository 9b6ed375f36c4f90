package server

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/healer"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/openflowtest"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
	"github.com/antrea-proxy/antrea-proxy/pkg/reconciler"
)

// The pod flows are verified and replayed by the server's reconciler, the healer's owner.
var _ healer.Owner = (*reconciler.Reconciler)(nil)

// dumpCounter counts flows by dumping them from the fake bridge; before counts, when set, runs
// first (to change pod flows while Verify counts).
type dumpCounter struct {
	b      *openflowtest.FakeBridge
	before func()
	err    error
}

func (c *dumpCounter) CountFlows(ctx context.Context, filter openflow.FlowFilter) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if c.before != nil {
		c.before()
	}
	flows, err := c.b.DumpFlows(ctx, filter)
	return len(flows), err
}

// flush deletes every flow on the bridge, as `ovs-ofctl del-flows` does.
func (e *env) flush() {
	e.t.Helper()
	var ops []openflow.Op
	for _, f := range mustDump(e.t, e) {
		ops = append(ops, openflow.Op{Kind: openflow.DeleteFlowStrict, Flow: &f})
	}
	require.NoError(e.t, e.bridge.Apply(context.Background(), ops))
	require.Zero(e.t, e.bridge.FlowCount())
}

func TestVerifyAndReplayAfterFlush(t *testing.T) {
	e := newEnv(t, "10.10.0.0/24", "fd00:10::/64")
	e.mustOK(req("ADD", "c1", "/var/run/netns/pod1"))
	e.mustOK(req("ADD", "c2", "/var/run/netns/pod2"))
	want := e.bridge.Dump()
	c := &dumpCounter{b: e.bridge}
	ctx := context.Background()

	ok, err := e.srv.Reconciler().Verify(ctx, c)
	require.NoError(t, err)
	require.True(t, ok, "nothing changed behind the server's back")

	e.flush()
	ok, err = e.srv.Reconciler().Verify(ctx, c)
	require.NoError(t, err)
	require.False(t, ok, "the flush is noticed")

	calls := e.bridge.ApplyCount()
	require.NoError(t, e.srv.Reconciler().Replay(ctx))
	require.Equal(t, calls+1, e.bridge.ApplyCount(), "one bundle")
	require.Equal(t, want, e.bridge.Dump())
	ok, err = e.srv.Reconciler().Verify(ctx, c)
	require.NoError(t, err)
	require.True(t, ok)
	e.mustOK(req("CHECK", "c1", "/var/run/netns/pod1"))
}

func TestVerifyNoticesOneMissingFlowAndReplayRemovesStrays(t *testing.T) {
	e := newEnv(t)
	e.mustOK(req("ADD", "c1", "/var/run/netns/pod1"))
	want := e.bridge.Dump()
	require.NoError(t, e.bridge.Apply(context.Background(), []openflow.Op{{Kind: openflow.DeleteFlows, TableSet: true,
		Flow: &openflow.Flow{Table: pipeline.TableL3Forwarding, Cookie: pipeline.PodCookie(0, 10), CookieMask: pipeline.PodCookieMask}}}))
	// A stray pod flow of this round nobody owns.
	stray := openflow.Flow{Table: pipeline.TableClassifier, Priority: pipeline.PriorityLow,
		Cookie: pipeline.PodCookie(1, 99), Match: openflow.Match{InPort: 99}, Actions: []openflow.Action{openflow.Drop{}}}
	require.NoError(t, e.bridge.Apply(context.Background(), []openflow.Op{{Kind: openflow.AddFlow, Flow: &stray}}))

	ok, err := e.srv.Reconciler().Verify(context.Background(), &dumpCounter{b: e.bridge})
	require.NoError(t, err)
	require.False(t, ok)
	require.NoError(t, e.srv.Reconciler().Replay(context.Background()))
	require.Equal(t, want, e.bridge.Dump())
}

func TestVerifyIgnoresChangesDuringTheCount(t *testing.T) {
	e := newEnv(t)
	e.mustOK(req("ADD", "c1", "/var/run/netns/pod1"))
	// An ADD lands between Verify's snapshot and the count: the count includes flows the
	// snapshot does not.
	c := &dumpCounter{b: e.bridge}
	c.before = func() {
		c.before = nil
		e.mustOK(req("ADD", "c2", "/var/run/netns/pod2"))
	}
	ok, err := e.srv.Reconciler().Verify(context.Background(), c)
	require.NoError(t, err)
	require.True(t, ok, "a change of the server's own is not a mismatch")
	ok, err = e.srv.Reconciler().Verify(context.Background(), c)
	require.NoError(t, err)
	require.True(t, ok, "the next check counts both pods")
}

func TestVerifyErrorAndBeforeStart(t *testing.T) {
	e := newEnv(t)
	e.mustOK(req("ADD", "c1", "/var/run/netns/pod1"))
	_, err := e.srv.Reconciler().Verify(context.Background(), &dumpCounter{err: errors.New("timeout")})
	require.ErrorContains(t, err, "timeout")

	srv, err := New(e.opts, e.ports, e.bridge, e.nl)
	require.NoError(t, err)
	e.flush()
	ok, err := srv.Reconciler().Verify(context.Background(), &dumpCounter{b: e.bridge})
	require.NoError(t, err)
	require.True(t, ok, "not started: nothing to verify")
	calls := e.bridge.ApplyCount()
	require.NoError(t, srv.Reconciler().Replay(context.Background()))
	require.Equal(t, calls, e.bridge.ApplyCount(), "not started: Replay does nothing")
}

func TestReplayAfterDelKeepsOnlyLivePods(t *testing.T) {
	e := newEnv(t)
	e.mustOK(req("ADD", "c1", "/var/run/netns/pod1"))
	e.mustOK(req("ADD", "c2", "/var/run/netns/pod2"))
	e.mustOK(req("DEL", "c1", "/var/run/netns/pod1"))
	want := e.bridge.Dump()
	e.flush()
	require.NoError(t, e.srv.Reconciler().Replay(context.Background()))
	require.Equal(t, want, e.bridge.Dump())
	require.Empty(t, e.bridge.DumpCookie(pipeline.PodCookie(0, 10), pipeline.PodCookieMask))
}

// noDumpBridge fails every dump, as a bridge holding flows the parser cannot read might.
type noDumpBridge struct{ *openflowtest.FakeBridge }

func (noDumpBridge) DumpFlows(context.Context, openflow.FlowFilter) ([]openflow.Flow, error) {
	return nil, errors.New("dump refused")
}

func TestStartDoesNotDump(t *testing.T) {
	e := newEnv(t)
	e.mustOK(req("ADD", "c1", "/var/run/netns/pod1"))
	orphan := openflow.Flow{Table: pipeline.TableClassifier, Priority: pipeline.PriorityLow,
		Cookie: pipeline.PodCookie(0, 77), Match: openflow.Match{InPort: 77}, Actions: []openflow.Action{openflow.Drop{}}}
	require.NoError(t, e.bridge.Apply(context.Background(), []openflow.Op{{Kind: openflow.AddFlow, Flow: &orphan}}))
	e.opts.Round = 2
	srv, err := New(e.opts, e.ports, noDumpBridge{e.bridge}, e.nl)
	require.NoError(t, err)
	require.NoError(t, srv.Start(context.Background()))
	require.Empty(t, e.bridge.DumpCookie(pipeline.PodCookie(0, 77), pipeline.PodCookieMask), "the orphan is gone")
	for _, f := range mustDump(t, e) {
		require.Equal(t, uint16(2), pipeline.CookieRound(f.Cookie))
	}
}
