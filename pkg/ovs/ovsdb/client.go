package ovsdb

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ovn-org/libovsdb/cache"
	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	libovsdb "github.com/ovn-org/libovsdb/ovsdb"
	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/ovsdb/vswitchd"
)

const (
	// DefaultEndpoint is where Debian's ovsdb-server listens.
	DefaultEndpoint = "unix:/var/run/openvswitch/db.sock"

	// connectAttemptTimeout bounds one connection attempt (dial, schema and monitor set-up).
	connectAttemptTimeout = 5 * time.Second
	// pollInterval is how often waits re-check the cache when no update has arrived.
	pollInterval = 200 * time.Millisecond
	// staleRetries is how many times an operation is retried when the transaction shows that
	// the cache was behind the database (a row it relied on is gone, or a name got taken).
	staleRetries = 3
)

// ErrClosed is returned by operations on a closed Client.
var ErrClosed = errors.New("ovsdb client is closed")

// staleError marks a failure that may come from the local cache lagging behind the database (a
// row the transaction relied on is gone, a name got taken, two cached tables disagree); the
// operation is retried once the cache had a chance to catch up. Its message is the reason alone,
// so that it reads well if the retries run out.
type staleError struct{ reason string }

func (e *staleError) Error() string { return e.reason }

// stale returns a staleError with a formatted reason.
func stale(format string, args ...any) error {
	return &staleError{reason: fmt.Sprintf(format, args...)}
}

// isStale reports whether err, or an error it wraps, is a staleError.
func isStale(err error) bool {
	var s *staleError
	return errors.As(err, &s)
}

// Client manages bridges and ports in an Open_vSwitch database. It is safe for concurrent use.
type Client struct {
	endpoint string
	ovs      client.Client
	backoff  *reconnectBackoff
	changes  *notifier
	closed   atomic.Bool
}

// New connects to the OVSDB server at endpoint (e.g. "unix:/var/run/openvswitch/db.sock" or
// "tcp:127.0.0.1:6640") and starts monitoring the tables the client needs. It retries until the
// server answers or ctx is done, so it can be called while ovsdb-server is still starting.
func New(ctx context.Context, endpoint string) (*Client, error) {
	dbModel, err := vswitchd.FullDatabaseModel()
	if err != nil {
		return nil, fmt.Errorf("building Open_vSwitch database model: %w", err)
	}
	logger := klog.Background().WithName("libovsdb")
	b := newReconnectBackoff(50*time.Millisecond, 2*time.Second)
	ovs, err := client.NewOVSDBClient(dbModel,
		client.WithEndpoint(endpoint),
		client.WithReconnect(connectAttemptTimeout, b),
		client.WithLogger(&logger))
	if err != nil {
		return nil, fmt.Errorf("creating OVSDB client for %s: %w", endpoint, err)
	}
	c := &Client{endpoint: endpoint, ovs: ovs, backoff: b, changes: newNotifier()}
	if err := c.connect(ctx); err != nil {
		c.Close()
		return nil, err
	}
	klog.InfoS("Connected to OVSDB", "endpoint", endpoint)
	return c, nil
}

// connect dials until the server answers or ctx is done, then sets up the monitor.
func (c *Client) connect(ctx context.Context) error {
	delay := newReconnectBackoff(50*time.Millisecond, time.Second)
	for {
		attemptCtx, cancel := context.WithTimeout(ctx, connectAttemptTimeout)
		err := c.ovs.Connect(attemptCtx)
		cancel()
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("connecting to OVSDB at %s: %w (last error: %v)", c.endpoint, ctx.Err(), err)
		case <-time.After(delay.NextBackOff()):
		}
	}
	// The cache outlives reconnections (libovsdb purges and refills it), so one handler is
	// enough to learn about every change.
	c.ovs.Cache().AddEventHandler(&cache.EventHandlerFuncs{
		AddFunc:    func(string, model.Model) { c.changes.notify() },
		UpdateFunc: func(string, model.Model, model.Model) { c.changes.notify() },
		DeleteFunc: func(string, model.Model) { c.changes.notify() },
	})
	var (
		ovsRow vswitchd.OpenvSwitch
		br     vswitchd.Bridge
		port   vswitchd.Port
		iface  vswitchd.Interface
	)
	monitor := c.ovs.NewMonitor(
		client.WithTable(&ovsRow, &ovsRow.Bridges, &ovsRow.CurCfg, &ovsRow.NextCfg, &ovsRow.OVSVersion),
		client.WithTable(&br, &br.Name, &br.Ports, &br.DatapathType, &br.Protocols, &br.FailMode,
			&br.ExternalIDs),
		client.WithTable(&port, &port.Name, &port.Interfaces, &port.ExternalIDs),
		client.WithTable(&iface, &iface.Name, &iface.Type, &iface.Options, &iface.Ofport,
			&iface.OfportRequest, &iface.Error, &iface.ExternalIDs),
	)
	if _, err := c.ovs.Monitor(ctx, monitor); err != nil {
		return fmt.Errorf("monitoring OVSDB at %s: %w", c.endpoint, err)
	}
	return nil
}

// Close disconnects and stops reconnecting. Operations on a closed Client fail with ErrClosed.
func (c *Client) Close() {
	if c.closed.Swap(true) {
		return
	}
	// libovsdb's Close only prevents reconnect loops that have not started yet. If the
	// connection is down right now, its loop keeps asking the backoff for a delay; a stopped
	// backoff parks that goroutine for good instead of letting it reconnect a closed client.
	c.backoff.stop()
	c.ovs.Close()
	klog.V(2).InfoS("Closed OVSDB client", "endpoint", c.endpoint)
}

// Connected reports whether the client currently has a session with ovsdb-server.
func (c *Client) Connected() bool {
	// libovsdb keeps Connected() true while it reconnects; the current endpoint is only known
	// while a session exists.
	return !c.closed.Load() && c.ovs.Connected() && c.ovs.CurrentEndpoint() != ""
}

// OVSVersion returns Open_vSwitch.ovs_version. It is empty until something writes it: the OVS
// start-up script (ovs-ctl) does, ovs-vswitchd itself does not.
func (c *Client) OVSVersion(ctx context.Context) (string, error) {
	root, err := c.root(ctx)
	if err != nil {
		return "", fmt.Errorf("reading OVS version: %w", err)
	}
	if root.OVSVersion == nil {
		return "", nil
	}
	return *root.OVSVersion, nil
}

// root returns the single Open_vSwitch row from the cache.
func (c *Client) root(ctx context.Context) (*vswitchd.OpenvSwitch, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	var rows []vswitchd.OpenvSwitch
	if err := c.ovs.List(ctx, &rows); err != nil {
		return nil, fmt.Errorf("listing Open_vSwitch table: %w", err)
	}
	if len(rows) == 0 {
		return nil, errors.New("the Open_vSwitch table is empty (database not initialized, run ovs-vsctl init)")
	}
	return &rows[0], nil
}

// get fills m (which carries an index such as a name) from the cache; found is false when no
// such row exists.
func (c *Client) get(ctx context.Context, m model.Model) (found bool, err error) {
	if c.closed.Load() {
		return false, ErrClosed
	}
	err = c.ovs.Get(ctx, m)
	if errors.Is(err, client.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// transact runs ops as one transaction and checks every result. Failures caused by a stale
// cache (a wait assertion timing out, a unique name already taken) are reported as stale.
func (c *Client) transact(ctx context.Context, ops []libovsdb.Operation) ([]libovsdb.OperationResult, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	results, err := c.ovs.Transact(ctx, ops...)
	if err != nil {
		if !c.Connected() {
			return nil, fmt.Errorf("not connected to OVSDB at %s: %w", c.endpoint, err)
		}
		return nil, fmt.Errorf("OVSDB transaction: %w", err)
	}
	opErrs, err := libovsdb.CheckOperationResults(results, ops)
	if err == nil {
		return results, nil
	}
	// A failing operation shows up in opErrs; a failure at commit time (such as a duplicate
	// name, detected once all operations ran) comes back as err itself.
	all := []error{err}
	if len(opErrs) > 0 {
		all = all[:0]
		for _, opErr := range opErrs {
			all = append(all, opErr)
		}
	}
	var msgs []string
	cacheLagged := false
	for _, e := range all {
		var timedOut *libovsdb.TimedOut
		var constraint *libovsdb.ConstraintViolation
		if errors.As(e, &timedOut) || errors.As(e, &constraint) {
			cacheLagged = true
		}
		msgs = append(msgs, e.Error())
	}
	if cacheLagged {
		return nil, stale("OVSDB transaction failed: %s", strings.Join(msgs, "; "))
	}
	return nil, fmt.Errorf("OVSDB transaction failed: %s", strings.Join(msgs, "; "))
}

// transactAndWait runs ops together with an increment of Open_vSwitch.next_cfg, then waits until
// ovs-vswitchd has applied the new configuration (cur_cfg reached the new next_cfg). Once it
// returns, the cache reflects ops and everything ovs-vswitchd wrote when applying them, such as
// Interface.ofport and Interface.error.
func (c *Client) transactAndWait(ctx context.Context, root *vswitchd.OpenvSwitch, ops []libovsdb.Operation) error {
	bump, err := c.ovs.Where(root).Mutate(root, model.Mutation{
		Field: &root.NextCfg, Mutator: libovsdb.MutateOperationAdd, Value: 1,
	})
	if err != nil {
		return fmt.Errorf("building next_cfg increment: %w", err)
	}
	ops = append(ops, assertExists(vswitchd.OpenvSwitchTable, root.UUID))
	ops = append(ops, bump...)
	ops = append(ops, libovsdb.Operation{
		Op:      libovsdb.OperationSelect,
		Table:   vswitchd.OpenvSwitchTable,
		Where:   []libovsdb.Condition{uuidIs(root.UUID)},
		Columns: []string{"next_cfg"},
	})
	results, err := c.transact(ctx, ops)
	if err != nil {
		return err
	}
	selected := results[len(ops)-1]
	if len(selected.Rows) != 1 {
		return stale("Open_vSwitch row %s disappeared", root.UUID)
	}
	var updated vswitchd.OpenvSwitch
	if err := c.decodeRow(selected.Rows[0], &updated); err != nil {
		return err
	}
	return c.waitApplied(ctx, updated.NextCfg)
}

// waitApplied waits until ovs-vswitchd reports (through cur_cfg) that it has applied
// configuration number nextCfg.
func (c *Client) waitApplied(ctx context.Context, nextCfg int) error {
	cur := 0
	err := c.waitFor(ctx, func() (bool, error) {
		root, err := c.root(ctx)
		if err != nil {
			return false, err
		}
		cur = root.CurCfg
		return cur >= nextCfg, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for ovs-vswitchd to apply configuration %d (it is at %d): %w", nextCfg, cur, err)
	}
	return nil
}

// waitUpToDate waits until ovs-vswitchd has applied everything written to the database so far.
func (c *Client) waitUpToDate(ctx context.Context) error {
	root, err := c.root(ctx)
	if err != nil {
		return err
	}
	return c.waitApplied(ctx, root.NextCfg)
}

// waitFor calls cond after every cache change (and at least every pollInterval) until it reports
// done, fails, or ctx is done.
func (c *Client) waitFor(ctx context.Context, cond func() (bool, error)) error {
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	for {
		changed := c.changes.changed()
		done, err := cond()
		if err != nil || done {
			return err
		}
		if c.closed.Load() {
			return ErrClosed
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		case <-ticker.C:
		}
	}
}

// retryStale runs op again (after the cache has had a chance to catch up) while it fails with a
// staleError.
func (c *Client) retryStale(ctx context.Context, op func() error) error {
	var err error
	for attempt := 0; attempt < staleRetries; attempt++ {
		if err = op(); !isStale(err) {
			return err
		}
		klog.V(2).InfoS("Retrying OVSDB operation on a refreshed cache", "attempt", attempt+1, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (while retrying after: %v)", ctx.Err(), err)
		case <-c.changes.changed():
		case <-time.After(pollInterval):
		}
	}
	return err
}

// decodeRow converts a row returned by a select into the model m.
func (c *Client) decodeRow(row libovsdb.Row, m model.Model) error {
	info, err := c.ovs.Cache().DatabaseModel().NewModelInfo(m)
	if err != nil {
		return fmt.Errorf("decoding OVSDB row: %w", err)
	}
	if err := c.ovs.Cache().Mapper().GetRowData(&row, info); err != nil {
		return fmt.Errorf("decoding OVSDB row: %w", err)
	}
	return nil
}

// uuidIs is the condition "_uuid == id".
func uuidIs(id string) libovsdb.Condition {
	return libovsdb.Condition{Column: "_uuid", Function: libovsdb.ConditionEqual, Value: libovsdb.UUID{GoUUID: id}}
}

// assertExists is a wait operation that aborts the transaction (with "timed out") unless the row
// id still exists in table. It keeps transactions built from the cache atomic.
func assertExists(table, id string) libovsdb.Operation {
	timeout := 0
	return libovsdb.Operation{
		Op:      libovsdb.OperationWait,
		Table:   table,
		Timeout: &timeout,
		Where:   []libovsdb.Condition{uuidIs(id)},
		Columns: []string{"_uuid"},
		Until:   string(libovsdb.WaitConditionEqual),
		Rows:    []libovsdb.Row{{"_uuid": libovsdb.UUID{GoUUID: id}}},
	}
}

// notifier hands out a channel that is closed at the next change.
type notifier struct {
	mu sync.Mutex
	ch chan struct{}
}

func newNotifier() *notifier { return &notifier{ch: make(chan struct{})} }

func (n *notifier) changed() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ch
}

func (n *notifier) notify() {
	n.mu.Lock()
	defer n.mu.Unlock()
	close(n.ch)
	n.ch = make(chan struct{})
}

// reconnectBackoff is an exponential backoff that never gives up (libovsdb panics when its
// reconnect backoff stops) and parks the reconnect loop once the client is closed. It satisfies
// github.com/cenkalti/backoff/v4.BackOff.
type reconnectBackoff struct {
	mu       sync.Mutex
	min, max time.Duration
	next     time.Duration
	stopped  bool
}

// parked is the delay handed to the reconnect loop of a closed client: it sleeps for good.
const parked = time.Duration(1<<63 - 1)

func newReconnectBackoff(shortest, longest time.Duration) *reconnectBackoff {
	return &reconnectBackoff{min: shortest, max: longest, next: shortest}
}

// NextBackOff returns the delay before the next attempt.
func (b *reconnectBackoff) NextBackOff() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return parked
	}
	d := b.next
	b.next = min(2*b.next, b.max)
	return d
}

// Reset starts over from the shortest delay.
func (b *reconnectBackoff) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.next = b.min
}

func (b *reconnectBackoff) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stopped = true
}
