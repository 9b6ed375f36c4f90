package server

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/antrea-proxy/antrea-proxy/pkg/cni/protocol"
)

// needRoot stops a test that mounts file systems when it cannot.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
}

// mountTmpfs mounts a tmpfs of the given size (mount's size= option) on a new directory, for
// the test's duration.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	needRoot(t)
	dir := t.TempDir()
	require.NoError(t, unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0700"))
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

// fill writes path until the file system is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			require.True(t, errors.Is(err, syscall.ENOSPC), "filling %s: %v", path, err)
			return
		}
	}
}

// bindUnreadable makes path a file whose every read fails with EIO (this process's
// /proc/self/mem, read at offset 0, bind-mounted over it), for the test's duration.
func bindUnreadable(t *testing.T, path string) {
	t.Helper()
	needRoot(t)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		require.NoError(t, os.WriteFile(path, nil, 0o600))
	}
	require.NoError(t, unix.Mount("/proc/self/mem", path, "", unix.MS_BIND, ""))
	t.Cleanup(func() { _ = unix.Unmount(path, unix.MNT_DETACH) })
	_, err := os.ReadFile(path)
	require.ErrorIs(t, err, syscall.EIO)
}

// On a full disk ADD still succeeds: the record and the reservation are kept in memory (and
// reported once), CHECK and DEL see them, and Reconcile writes them when there is room again.
func TestAddOnFullDisk(t *testing.T) {
	e := newEnv(t)
	rep := &fakeReporter{}
	e.opts.Reporter = rep
	e.opts.StateDir = filepath.Join(mountTmpfs(t, "256k"), "state")
	e.restart(1)
	e.mustOK(req("ADD", "c1", "/var/run/netns/pod1"))
	filler := filepath.Join(filepath.Dir(e.opts.StateDir), "filler")
	fill(t, filler)

	e.mustOK(req("ADD", "c2", "/var/run/netns/pod2"))
	e.mustOK(req("ADD", "c3", "/var/run/netns/pod2"))
	st := e.srv.Stats()
	require.Equal(t, 2, st.UnsavedRecords)
	require.Equal(t, 2, st.UnsavedAddresses)
	require.NotZero(t, st.WriteFailures)
	require.Len(t, rep.unsaved, 1, "reported once")
	require.ErrorContains(t, rep.unsaved[0], "is full")
	require.True(t, e.srv.Ready())
	e.mustOK(req("CHECK", "c2", "/var/run/netns/pod2"))
	e.mustOK(req("DEL", "c3", "/var/run/netns/pod2"))
	require.Equal(t, 1, e.srv.Stats().UnsavedRecords)

	require.ErrorContains(t, e.srv.Reconcile(context.Background()), "no space left on device", "still full")
	require.NoError(t, os.Remove(filler))
	require.NoError(t, e.srv.Reconcile(context.Background()))
	st = e.srv.Stats()
	require.Zero(t, st.UnsavedRecords)
	require.Zero(t, st.UnsavedAddresses)
	require.FileExists(t, e.recordFile("c2"))
	require.Equal(t, []string{"10.10.0.2", "10.10.0.3"}, e.ipamFiles())

	e.restart(2)
	e.mustOK(req("CHECK", "c2", "/var/run/netns/pod2"))
	require.Contains(t, string(e.mustOK(req("ADD", "c4", "/var/run/netns/pod2")).Result), `"10.10.0.4/24"`)
}

// A pod record, a spooled DEL and an address reservation whose reads fail with EIO (and that
// cannot even be moved or removed: they are mount points) do not stop the start.
func TestStartSurvivesUnreadableFiles(t *testing.T) {
	e := newEnv(t)
	e.mustOK(req("ADD", "c1", "/var/run/netns/pod1"))
	e.mustOK(req("ADD", "c2", "/var/run/netns/pod2"))
	bindUnreadable(t, e.recordFile("c2"))
	require.NoError(t, os.MkdirAll(e.opts.SpoolDir, 0o700))
	bindUnreadable(t, filepath.Join(e.opts.SpoolDir, protocol.SpoolName("c9", "eth0")))
	bindUnreadable(t, filepath.Join(e.opts.StateDir, "ipam", "10.10.0.9"))

	rep := &fakeReporter{}
	e.opts.Reporter = rep
	e.restart(2)
	require.Equal(t, []string{KindIPAM, KindPodRecord, KindSpooledDel}, rep.kinds(), "each reported once")
	require.Contains(t, rep.quarantined[0].LeftInPlace, "device or resource busy")
	e.mustOK(req("CHECK", "c1", "/var/run/netns/pod1"))
	require.Contains(t, string(e.mustOK(req("ADD", "c3", "/var/run/netns/pod2")).Result), `"10.10.0.4/24"`)
	require.NoError(t, e.srv.Reconcile(context.Background()))
	require.Len(t, rep.kinds(), 3, "not reported again")
}
