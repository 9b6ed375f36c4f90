package server

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/cni/internal/atomicfile"
)

// Kinds of state files the server quarantines.
const (
	KindPodRecord  = "pod-record"
	KindSpooledDel = "spooled-del"
	KindIPAM       = "ipam-reservation"
)

// DefaultQuarantineKeep is how many quarantined files are kept when Options.QuarantineKeep is 0.
const DefaultQuarantineKeep = 100

// maxQuarantineCopy bounds what is copied into the quarantine when a file cannot be renamed
// there (another file system): the rest is dropped.
const maxQuarantineCopy = 1 << 20

// Quarantined describes a state file the server could not use and moved aside.
type Quarantined struct {
	// Kind is KindPodRecord, KindSpooledDel or KindIPAM.
	Kind string
	// File is where the file was.
	File string
	// MovedTo is where it is now; empty when it could only be removed, or not even that.
	MovedTo string
	// Reason says what is wrong with it.
	Reason string
	// LeftInPlace, when set, says why the file could be neither moved nor removed: it stays
	// where it is and is ignored.
	LeftInPlace string
}

// Reporter tells operators about state the server could not use or save; the agent records
// Warning Events on its Node. It is called with the server's lock held and must not block.
type Reporter interface {
	// Quarantined is called for every file moved aside.
	Quarantined(q Quarantined)
	// StateUnsaved is called when state starts being kept in memory only (the disk is full).
	StateUnsaved(err error)
}

// quarantine moves unusable state files into one directory (StateDir/quarantine) and keeps the
// newest keep of them.
type quarantine struct {
	dir  string
	keep int
}

// move moves path into the quarantine and returns where it went ("" when the file could only
// be removed). File names start with the UTC time, so that name order is age order.
func (q *quarantine) move(kind, path string, now time.Time) (string, error) {
	if err := os.MkdirAll(q.dir, 0o700); err != nil {
		return q.drop(path, err)
	}
	dest := filepath.Join(q.dir, now.UTC().Format("20060102T150405.000000000Z")+"-"+kind+"-"+filepath.Base(path))
	if err := os.Rename(path, dest); err != nil {
		// Another file system (the spool is often on tmpfs): copy what can be read, then remove.
		data, rerr := readLimited(path, maxQuarantineCopy)
		if rerr != nil {
			return q.drop(path, rerr)
		}
		if werr := atomicfile.Write(dest, data); werr != nil {
			return q.drop(path, werr)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("removing %s after copying it to %s: %w", path, dest, err)
		}
	}
	q.prune()
	return dest, nil
}

// drop removes a file that could not be moved into the quarantine.
func (q *quarantine) drop(path string, why error) (string, error) {
	klog.ErrorS(why, "Cannot keep an unusable CNI state file in the quarantine; removing it", "file", path, "quarantine", q.dir)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("removing %s: %w", path, err)
	}
	return "", nil
}

// prune removes the oldest quarantined files beyond keep.
func (q *quarantine) prune() {
	entries, err := os.ReadDir(q.dir)
	if err != nil {
		return
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && e.Name()[0] != '.' {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	for len(names) > q.keep {
		if err := os.Remove(filepath.Join(q.dir, names[0])); err != nil && !errors.Is(err, os.ErrNotExist) {
			klog.ErrorS(err, "Pruning the CNI state quarantine", "file", names[0])
		}
		names = names[1:]
	}
}

func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, limit))
}

// quarantineFile moves path aside, logs it, counts it and reports it. A file that can be
// neither moved nor removed stays where it is, is ignored, and is met again at the next
// listing: it is counted and reported once. It is called with s.mu held (or before the server
// is shared).
func (s *Server) quarantineFile(kind, path string, reason error) {
	dest, err := s.quarantine.move(kind, path, time.Now())
	q := Quarantined{Kind: kind, File: path, MovedTo: dest, Reason: reason.Error()}
	if err != nil {
		if s.stuck[path] {
			return
		}
		s.stuck[path] = true
		q.LeftInPlace = err.Error()
		klog.ErrorS(reason, "Cannot move an unusable CNI state file aside; ignoring it", "kind", kind, "file", path, "moveError", err.Error())
	} else {
		klog.ErrorS(reason, "Quarantined an unusable CNI state file", "kind", kind, "file", path, "movedTo", dest)
	}
	s.stats.quarantined(kind)
	if s.opts.Reporter != nil {
		s.opts.Reporter.Quarantined(q)
	}
}
