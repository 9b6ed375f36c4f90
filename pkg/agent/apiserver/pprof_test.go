package apiserver

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPprofOnlyWhenEnabled: /debug/pprof/ answers 404 by default and serves the profiles with
// enablePprof.
func TestPprofOnlyWhenEnabled(t *testing.T) {
	for _, enabled := range []bool{false, true} {
		sock := filepath.Join(t.TempDir(), "a.sock")
		cfg := testConfig(t, sock)
		cfg.EnablePprof = enabled
		start(t, Options{Config: cfg})
		c := unixClient(sock)
		code, body, _ := get(t, c, "http://agent/debug/pprof/")
		code2, cmdline, _ := get(t, c, "http://agent/debug/pprof/cmdline")
		if !enabled {
			require.Equal(t, http.StatusNotFound, code)
			require.Equal(t, http.StatusNotFound, code2)
			continue
		}
		require.Equal(t, http.StatusOK, code)
		require.True(t, strings.Contains(body, "goroutine"), "index: %.200s", body)
		require.Equal(t, http.StatusOK, code2)
		require.True(t, strings.Contains(cmdline, "apiserver"), "cmdline: %q", cmdline)
		code, heap, _ := get(t, c, "http://agent/debug/pprof/heap?debug=1")
		require.Equal(t, http.StatusOK, code)
		require.True(t, strings.Contains(heap, "heap profile"), "heap: %.200s", heap)
	}
}
