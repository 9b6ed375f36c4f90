package apiserver

import (
	"net/http"
	"net/http/pprof"
)

// PathPprof is where Go's runtime profiles are served when enablePprof is set, e.g.
// /debug/pprof/profile?seconds=60 (CPU) and /debug/pprof/heap.
const PathPprof = "/debug/pprof/"

// registerPprof serves net/http/pprof's handlers under PathPprof on m; the listener's access
// rules (root peers on the unix socket, the bearer token over TCP) apply to them as to every
// other path.
func registerPprof(m *http.ServeMux) {
	m.HandleFunc(PathPprof, pprof.Index)
	m.HandleFunc(PathPprof+"cmdline", pprof.Cmdline)
	m.HandleFunc(PathPprof+"profile", pprof.Profile)
	m.HandleFunc(PathPprof+"symbol", pprof.Symbol)
	m.HandleFunc(PathPprof+"trace", pprof.Trace)
}
