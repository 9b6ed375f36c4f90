package native

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/ofconn"
)

// flowMonitorID is the id of the FlowWatch's monitor on each connection (ids are per
// connection).
const flowMonitorID uint32 = 1

// FlowWatch reports the changes of the bridge's flows that the Bridge's own connection did not
// make: another writer's (an operator's `ovs-ofctl del-flows`), or the switch's own (a learned
// flow, an evicted or expired one, the flows a deleted group or meter took along). It keeps an
// OpenFlow flow monitor on the Bridge's connection, re-adding it on every new connection; as
// the connection is the one every Apply uses, the switch abbreviates the Bridge's own changes
// to one small update per request, which FlowWatch counts and does not report.
//
// A watcher that must not miss a change checks what the switch holds when Watching changes,
// and checks periodically while it is false (no connection, or a switch that refused the
// monitor).
type FlowWatch struct {
	b        *Bridge
	changes  chan struct{}
	watching atomic.Bool
	stats    struct{ monitors, foreign, own, malformed atomic.Uint64 }
}

// FlowWatchStats counts the updates a FlowWatch received.
type FlowWatchStats struct {
	// Monitors counts the monitors the switch accepted (one per connection).
	Monitors uint64
	// Foreign are the full updates (flows added, removed or modified other than by the
	// Bridge's connection, pause and resume notices); Own the abbreviated updates of the
	// Bridge's own requests; Malformed the messages that could not be decoded (each reported
	// as a change).
	Foreign, Own, Malformed uint64
}

// NewFlowWatch returns a FlowWatch of b's flows; it watches once Run starts.
func (b *Bridge) NewFlowWatch() *FlowWatch {
	return &FlowWatch{b: b, changes: make(chan struct{}, 1)}
}

// Changes receives a value after the switch reported a change of the flows other than the
// Bridge's own, and whenever Watching changes. Sends do not block and coalesce.
func (w *FlowWatch) Changes() <-chan struct{} { return w.changes }

// Watching reports whether the switch is reporting changes now: false while there is no
// connection and when the switch refused the monitor.
func (w *FlowWatch) Watching() bool { return w.watching.Load() }

// Stats returns the update counters.
func (w *FlowWatch) Stats() FlowWatchStats {
	return FlowWatchStats{Monitors: w.stats.monitors.Load(), Foreign: w.stats.foreign.Load(), Own: w.stats.own.Load(), Malformed: w.stats.malformed.Load()}
}

func (w *FlowWatch) notify() {
	select {
	case w.changes <- struct{}{}:
	default:
	}
}

func (w *FlowWatch) setWatching(on bool) {
	if w.watching.Swap(on) != on {
		w.notify()
	}
}

// Run watches until ctx ends: on each connection of the Bridge (it dials one when there is
// none, as any request does) it adds the monitor, then waits for the connection to end. Without
// a connection it retries as the Bridge's Run reconnects (100 ms doubling to 1 s); a monitor the
// switch refused is asked for again after 100 ms doubling to 30 s.
func (w *FlowWatch) Run(ctx context.Context) {
	dial := ofconn.Backoff{Min: 100 * time.Millisecond, Max: time.Second}
	refused := ofconn.Backoff{Min: 100 * time.Millisecond, Max: 30 * time.Second}
	failures := 0
	for ctx.Err() == nil {
		c, err := w.b.connection(ctx)
		backoff := &dial
		if err == nil {
			err, backoff = w.watch(ctx, c), &refused
		}
		if err != nil {
			w.setWatching(false)
			if ctx.Err() != nil {
				break
			}
			// A lost connection is the Bridge's to report; a refused monitor is this watch's.
			if failures++; failures == 1 && backoff == &refused {
				klog.ErrorS(err, "Cannot watch the flows of the OpenFlow switch, retrying", "target", w.b.target)
			} else {
				klog.V(2).InfoS("Cannot watch the flows of the OpenFlow switch", "target", w.b.target, "attempts", failures, "err", err)
			}
			if !backoff.Wait(ctx) {
				break
			}
			continue
		}
		if failures > 0 {
			klog.InfoS("Watching the flows of the OpenFlow switch", "target", w.b.target)
		}
		dial.Reset()
		refused.Reset()
		failures = 0
		w.setWatching(true)
		select {
		case <-c.Done():
		case <-ctx.Done():
		}
		w.setWatching(false)
	}
	w.setWatching(false)
}

// watch adds the monitor on c and waits for the switch's (empty) reply. The handler is in
// place before the request is sent: no update can be missed.
func (w *FlowWatch) watch(ctx context.Context, c *ofconn.Conn) error {
	cancel := c.HandleUnsolicited(w.onMessage)
	xid := c.NextXid()
	err := c.Multipart(ctx, xid, encodeFlowMonitorRequest(xid, flowMonitorID), func([]byte) (bool, error) { return false, nil })
	if err != nil {
		cancel()
		return fmt.Errorf("adding a flow monitor on %s: %w", w.b.target, err)
	}
	w.stats.monitors.Add(1)
	return nil
}

// onMessage runs on the connection's read loop: it counts the updates of one message and
// reports a change when one is not the Bridge's own. Other unsolicited multipart replies (the
// late part of a request whose caller gave up) are not the watch's.
func (w *FlowWatch) onMessage(msg []byte) {
	if len(msg) >= multipartHeaderLen && binary.BigEndian.Uint16(msg[headerLen:]) != multipartFlowMonitor {
		return
	}
	var foreign, own uint64
	err := decodeFlowUpdates(msg, func(u FlowUpdate) {
		if u.Event == FlowAbbrev {
			own++
		} else {
			foreign++
		}
	})
	w.stats.own.Add(own)
	w.stats.foreign.Add(foreign)
	if err != nil {
		w.stats.malformed.Add(1)
		klog.V(2).InfoS("Malformed flow monitor update", "target", w.b.target, "err", err)
	}
	if foreign > 0 || err != nil {
		w.notify()
	}
}
