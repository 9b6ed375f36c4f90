package agent

import (
	"os"
	"runtime"
	"runtime/debug"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/observe"
)

// steadyGCPercent is the agent's GOGC once the first full sync is installed, unless GOGC or
// GOMEMLIMIT is set in its environment.
//
// The first full sync is the agent's peak: every Service is computed and the whole state and
// the one big bundle are live together, and it runs with the default GOGC of 100, so that it is
// not slowed down by collections. At rest the agent holds its state and allocates little (a
// periodic full resync recomputes nothing that did not change), but with GOGC=100 the heap
// grows to twice what is live before each collection and the resident size follows the heap
// goal: at 10,000 Services 110 MB live made an RSS of 235 MB. At 50 the goal is 1.5× the live
// heap; a collection then comes after half the live heap was allocated instead of all of it.
const steadyGCPercent = 50

// startupRelease returns start-up memory to the OS twice: once the first full sync is
// installed (and it then sets the steady GC percent), and once the agent is at rest, at the
// first later full sync that recomputed nothing.
//
// The runtime's scavenger returns free pages only down to the current heap goal, and at rest
// the agent allocates too little to reach that goal and collect, so without a release the
// process would keep the size of its busiest moment while at rest. One forced collection that
// returns every free page (debug.FreeOSMemory) brings the resident size back to what the agent
// holds. The first release drops the first sync's peak; the second what start-up left after it:
// the initial lists, the first reads of the agent API (a service map of every Service), the
// syncs of the EndpointSlices that arrived late. Each runs once, off the sync goroutine; later
// syncs are incremental and small.
type startupRelease struct {
	mu sync.Mutex
	// stage counts the releases done: 0, 1 (after the first full sync) or 2 (at rest).
	stage   int
	release func()
	// spawn runs release off the sync goroutine.
	spawn func(func())
	// setGCPercent is debug.SetGCPercent; nil leaves GOGC as the environment set it.
	setGCPercent func(int) int
}

func newStartupRelease() *startupRelease {
	r := &startupRelease{release: releaseMemory, spawn: func(f func()) { go f() }}
	if os.Getenv("GOGC") == "" && os.Getenv("GOMEMLIMIT") == "" {
		r.setGCPercent = debug.SetGCPercent
	}
	return r
}

// QueuedUpdate implements observe.Observer.
func (*startupRelease) QueuedUpdate() {}

// NodeUpdated implements observe.Observer.
func (*startupRelease) NodeUpdated(*v1.Node) {}

// SyncDone sets the steady GC percent and releases memory after the first successful full
// sync, and releases again after the first successful full sync after it that changed nothing.
func (r *startupRelease) SyncDone(res observe.SyncResult) {
	if res.Err != nil || !res.Full {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.stage == 0:
		if r.setGCPercent != nil {
			prev := r.setGCPercent(steadyGCPercent)
			klog.InfoS("Steady GC percent set after the first full sync", "gcPercent", steadyGCPercent, "previous", prev)
		}
	case r.stage == 1 && atRest(res):
		klog.InfoS("At rest after start-up: returning its free memory to the OS")
	default:
		return
	}
	r.stage++
	r.spawn(r.release)
}

// atRest reports whether a sync recomputed nothing: no Service or EndpointSlice change drained,
// no Service recomputed.
func atRest(res observe.SyncResult) bool {
	return res.ServiceChanges == 0 && res.EndpointChanges == 0 && len(res.Services) == 0
}

// releaseMemory collects and returns every free page to the OS, and logs the heap around it.
func releaseMemory() {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	debug.FreeOSMemory()
	runtime.ReadMemStats(&after)
	const mb = 1 << 20
	klog.InfoS("Returned free memory to the OS",
		"heapInUseMB", after.HeapInuse/mb, "heapHeldBeforeMB", (before.HeapSys-before.HeapReleased)/mb,
		"heapHeldAfterMB", (after.HeapSys-after.HeapReleased)/mb)
}
