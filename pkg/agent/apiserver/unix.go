package apiserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"
)

// socketMode is the permission of the API socket: read-write for its owner (root) only.
const socketMode fs.FileMode = 0o600

// socketDirMode is the permission given to the socket's directory when the server creates it.
const socketDirMode fs.FileMode = 0o750

// maxSocketPath is the longest usable unix socket path (sizeof(sun_path) - 1).
const maxSocketPath = 107

// unixListener is the API's unix socket listener; it remembers the socket file it created so
// that it removes that file only.
type unixListener struct {
	*net.UnixListener
	path string
	info os.FileInfo
}

// listenUnix creates the API socket at path with mode 0600, owned by the agent's user, without
// a window in which it exists with looser permissions: the socket is bound inside a fresh 0700
// directory next to path, restricted there, then renamed into place. A stale socket file (no
// one listening) is removed first; a live one or a non-socket file is an error.
func listenUnix(path string) (*unixListener, error) {
	if path == "" || !filepath.IsAbs(path) {
		return nil, fmt.Errorf("agent API socket %q: must be an absolute path", path)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, socketDirMode); err != nil {
		return nil, fmt.Errorf("agent API socket %s: creating its directory: %w", path, err)
	}
	if err := removeStaleSocket(path); err != nil {
		return nil, err
	}
	tmpDir, err := os.MkdirTemp(dir, ".api")
	if err != nil {
		return nil, fmt.Errorf("agent API socket %s: creating a private directory: %w", path, err)
	}
	defer os.RemoveAll(tmpDir)
	tmp := filepath.Join(tmpDir, "s")
	if len(tmp) > maxSocketPath {
		return nil, fmt.Errorf("agent API socket %s: the temporary path %s is longer than %d bytes; use a shorter apiSocket directory", path, tmp, maxSocketPath)
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("agent API socket %s: %w", path, err)
	}
	// The file is renamed below; the listener must not unlink the temporary name on Close.
	l.SetUnlinkOnClose(false)
	fail := func(step string, err error) (*unixListener, error) {
		l.Close()
		return nil, fmt.Errorf("agent API socket %s: %s: %w", path, step, err)
	}
	if err := os.Chmod(tmp, socketMode); err != nil {
		return fail("restricting permissions", err)
	}
	if err := os.Lchown(tmp, os.Geteuid(), os.Getegid()); err != nil {
		return fail("setting owner", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail("moving into place", err)
	}
	info, err := os.Lstat(path)
	if err != nil {
		return fail("checking the socket file", err)
	}
	if err := checkSocketFile(path, info); err != nil {
		os.Remove(path)
		return fail("checking the socket file", err)
	}
	return &unixListener{UnixListener: l, path: path, info: info}, nil
}

// checkSocketFile verifies that the file at path is a socket with mode 0600 owned by us.
func checkSocketFile(path string, info os.FileInfo) error {
	if info.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("%s is not a socket (%v)", path, info.Mode().Type())
	}
	if perm := info.Mode().Perm(); perm != socketMode {
		return fmt.Errorf("%s has mode %#o, want %#o", path, perm, socketMode)
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s is owned by uid %d, want %d", path, st.Uid, os.Geteuid())
	}
	return nil
}

// removeStaleSocket removes a socket file that nobody listens on. It refuses to remove a file
// that is not a socket, or a socket that another process (another agent) still serves.
func removeStaleSocket(path string) error {
	info, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("agent API socket %s: %w", path, err)
	}
	if info.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("agent API socket %s: the path exists and is not a socket (%v); refusing to remove it", path, info.Mode().Type())
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("agent API socket %s: another process is serving on it (is another antrea-agent running?)", path)
	}
	klog.InfoS("Removing stale agent API socket", "socket", path, "dialError", err.Error())
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("agent API socket %s: removing the stale socket: %w", path, err)
	}
	return nil
}

// removeSocket deletes the socket file if it is still the one this listener created.
func (u *unixListener) removeSocket() {
	if info, err := os.Lstat(u.path); err == nil && os.SameFile(info, u.info) {
		if err := os.Remove(u.path); err != nil {
			klog.ErrorS(err, "Removing the agent API socket", "socket", u.path)
		}
	}
}

// peerCredKey is the context key of a unix connection's peer credentials.
type peerCredKey struct{}

// peerCred is a unix peer's credentials, or the error that prevented reading them.
type peerCred struct {
	cred *syscall.Ucred
	err  error
}

// withPeerCred records the credentials of a unix connection's peer (SO_PEERCRED) in the
// connection's context.
func withPeerCred(ctx context.Context, c net.Conn) context.Context {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return context.WithValue(ctx, peerCredKey{}, peerCred{err: fmt.Errorf("not a unix connection (%T)", c)})
	}
	pc := peerCred{}
	raw, err := uc.SyscallConn()
	if err != nil {
		pc.err = err
	} else if cerr := raw.Control(func(fd uintptr) {
		pc.cred, pc.err = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); cerr != nil {
		pc.err = cerr
	}
	return context.WithValue(ctx, peerCredKey{}, pc)
}

// requireRootPeer refuses requests whose unix peer is not root, whatever the socket's
// permissions are.
func requireRootPeer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pc, _ := r.Context().Value(peerCredKey{}).(peerCred)
		switch {
		case pc.err != nil || pc.cred == nil:
			writeError(w, http.StatusForbidden, "cannot read the client's credentials: %v", pc.err)
		case pc.cred.Uid != 0:
			klog.InfoS("Refused agent API request from a non-root user", "uid", pc.cred.Uid, "pid", pc.cred.Pid, "path", r.URL.Path)
			writeError(w, http.StatusForbidden, "the agent API is restricted to root; the client runs as uid %d", pc.cred.Uid)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// ReadTokenFile reads the bearer token of the TCP listener. The file must be a regular file
// owned by the agent's user, not accessible to group or others, and hold a non-empty token
// (surrounding white space is ignored).
func ReadTokenFile(path string) ([]byte, error) {
	if path == "" {
		return nil, errors.New("no token file configured (apiTokenFile)")
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("token file %s: %w", path, err)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("token file %s is not a regular file", path)
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("token file %s has mode %#o: it must not be accessible to group or others (chmod 600 %s)", path, perm, path)
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return nil, fmt.Errorf("token file %s is owned by uid %d; it must be owned by the agent's user (uid %d)", path, st.Uid, os.Geteuid())
	}
	data, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return nil, fmt.Errorf("token file %s: %w", path, err)
	}
	tok := strings.TrimSpace(string(data))
	if tok == "" {
		return nil, fmt.Errorf("token file %s is empty", path)
	}
	return []byte(tok), nil
}
