package agent

import (
	"runtime"
	"runtime/debug"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/proxy/observe"
)

// startupRelease returns the memory of the first full sync to the OS once it is installed.
//
// The first full sync is the agent's peak: every Service is computed, the whole state and the
// one big bundle are live together, and with the default GOGC of 100 the Go heap grows to about
// twice that before the next collection. Once the sync is done most of it is garbage, but the
// runtime's scavenger returns free pages only down to the current heap goal, so the process
// would keep the peak's size while at rest. One forced collection that returns every free page
// (debug.FreeOSMemory) brings the resident size back to what the agent holds. It runs once, off
// the sync goroutine; later syncs are incremental and small.
type startupRelease struct {
	once    sync.Once
	release func()
	// spawn runs release off the sync goroutine.
	spawn func(func())
}

func newStartupRelease() *startupRelease {
	return &startupRelease{release: releaseMemory, spawn: func(f func()) { go f() }}
}

// QueuedUpdate implements observe.Observer.
func (*startupRelease) QueuedUpdate() {}

// NodeUpdated implements observe.Observer.
func (*startupRelease) NodeUpdated(*v1.Node) {}

// SyncDone releases memory after the first successful full sync.
func (r *startupRelease) SyncDone(res observe.SyncResult) {
	if res.Err != nil || !res.Full {
		return
	}
	r.once.Do(func() { r.spawn(r.release) })
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
