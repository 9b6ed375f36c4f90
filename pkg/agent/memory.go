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

// startupRelease returns the memory of the first full sync to the OS once it is installed and
// then sets the steady GC percent.
//
// The runtime's scavenger returns free pages only down to the current heap goal, so without a
// release the process would keep the peak's size while at rest. One forced collection that
// returns every free page (debug.FreeOSMemory) brings the resident size back to what the agent
// holds. It runs once, off the sync goroutine; later syncs are incremental and small.
type startupRelease struct {
	once    sync.Once
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
// sync.
func (r *startupRelease) SyncDone(res observe.SyncResult) {
	if res.Err != nil || !res.Full {
		return
	}
	r.once.Do(func() {
		if r.setGCPercent != nil {
			prev := r.setGCPercent(steadyGCPercent)
			klog.InfoS("Steady GC percent set after the first full sync", "gcPercent", steadyGCPercent, "previous", prev)
		}
		r.spawn(r.release)
	})
}

// releaseMemory collects and returns every free page to the OS, and logs the heap around it.
func releaseMemory() {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	debug.FreeOSMemory()
	runtime.ReadMemStats(&after)
	const mb = 1 << 20
	klog.InfoS("Returned the first full sync's free memory to the OS",
		"heapInUseMB", after.HeapInuse/mb, "heapHeldBeforeMB", (before.HeapSys-before.HeapReleased)/mb,
		"heapHeldAfterMB", (after.HeapSys-after.HeapReleased)/mb)
}
