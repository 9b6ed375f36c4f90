package server

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/klog/v2"

	"github.com/antrea-proxy/antrea-proxy/pkg/cni/internal/atomicfile"
	"github.com/antrea-proxy/antrea-proxy/pkg/cni/ipam"
)

// maxRecordSize bounds the size of a pod record file: a record is a few hundred bytes, so a
// larger file is not one (and is never read whole into memory).
const maxRecordSize = 64 << 10

// podRecord is what the server remembers about one pod interface, so that DEL, CHECK and the
// reconciliation at start-up work after an agent restart.
type podRecord struct {
	ContainerID  string         `json:"containerID"`
	IfName       string         `json:"ifName"`
	NetNS        string         `json:"netns"`
	PodNamespace string         `json:"podNamespace,omitempty"`
	PodName      string         `json:"podName,omitempty"`
	HostIfName   string         `json:"hostIfName"`
	OFPort       uint32         `json:"ofport,omitempty"`
	PodMAC       string         `json:"podMAC,omitempty"`
	HostMAC      string         `json:"hostMAC,omitempty"`
	IPs          []netip.Prefix `json:"ips,omitempty"`
}

func (r *podRecord) owner() ipam.Owner {
	return ipam.Owner{ContainerID: r.ContainerID, IfName: r.IfName}
}

func (r *podRecord) clone() *podRecord {
	c := *r
	c.IPs = append([]netip.Prefix(nil), r.IPs...)
	return &c
}

// hostIfName is the host end of a pod's veth pair: derived from the container ID and interface
// alone, so that a DEL without any record still finds it.
func hostIfName(containerID, ifName string) string {
	sum := sha256.Sum256([]byte(containerID + "/" + ifName))
	return "apx" + hex.EncodeToString(sum[:])[:12]
}

// store keeps one JSON file per pod interface in a directory. A record that cannot be written
// because the disk is full is kept in memory (unsaved) and written by flush; reads see it.
// A file that is not a valid record is handed to bad (which moves it aside) and treated as
// absent. The store is guarded by Server.mu.
type store struct {
	dir     string
	unsaved map[ipam.Owner]*podRecord
	// bad is called with every file that is not a valid record; it must remove the file.
	bad func(path string, reason error)
	// stats counts write failures and unsaved records.
	stats *stats
}

func newStore(dir string, st *stats, bad func(string, error)) (*store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating pod state directory %s: %w", dir, err)
	}
	return &store{dir: dir, unsaved: map[ipam.Owner]*podRecord{}, bad: bad, stats: st}, nil
}

func (s *store) path(o ipam.Owner) string {
	return filepath.Join(s.dir, recordName(o))
}

func recordName(o ipam.Owner) string {
	sum := sha256.Sum256([]byte(o.ContainerID + "/" + o.IfName))
	return hex.EncodeToString(sum[:16]) + ".json"
}

// get returns o's record. A file that is not a valid record is moved aside and reported as
// absent; err is only a failure to read the directory entry itself.
func (s *store) get(o ipam.Owner) (*podRecord, bool, error) {
	if r, ok := s.unsaved[o]; ok {
		return r.clone(), true, nil
	}
	p := s.path(o)
	r, err := readRecord(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		s.bad(p, err)
		return nil, false, nil
	}
	return r, true, nil
}

// put saves r. On a full disk the record is kept in memory and written by a later flush: put
// then returns nil (the pod works; only a restart before the flush would lose the record).
func (s *store) put(r *podRecord) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding state of %v: %w", r.owner(), err)
	}
	err = atomicfile.Write(s.path(r.owner()), data)
	switch {
	case err == nil:
		delete(s.unsaved, r.owner())
	case atomicfile.IsNoSpace(err):
		s.unsaved[r.owner()] = r.clone()
		s.stats.writeFailed(err)
		klog.ErrorS(err, "No space to save a pod record; keeping it in memory and retrying later",
			"container", r.ContainerID, "ifName", r.IfName, "unsaved", len(s.unsaved))
	default:
		return err
	}
	s.stats.setUnsaved(len(s.unsaved))
	return nil
}

// flush writes the records kept in memory. It returns the first error of a record that still
// cannot be written; those stay in memory.
func (s *store) flush() error {
	var errs []error
	for o, r := range s.unsaved {
		data, err := json.MarshalIndent(r, "", "  ")
		if err == nil {
			err = atomicfile.Write(s.path(o), data)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		delete(s.unsaved, o)
		klog.InfoS("Saved a pod record kept in memory", "container", o.ContainerID, "ifName", o.IfName)
	}
	s.stats.setUnsaved(len(s.unsaved))
	if len(errs) > 0 {
		s.stats.writeFailed(errs[0])
		return fmt.Errorf("%d pod records still unsaved: %w", len(s.unsaved), errs[0])
	}
	return nil
}

func (s *store) delete(o ipam.Owner) error {
	delete(s.unsaved, o)
	s.stats.setUnsaved(len(s.unsaved))
	if err := os.Remove(s.path(o)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing state of %v: %w", o, err)
	}
	return nil
}

// list returns every record, those kept in memory included, sorted by container ID and
// interface. Files that are not valid records are handed to bad and left out.
func (s *store) list() ([]*podRecord, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("reading pod state directory %s: %w", s.dir, err)
	}
	byOwner := map[ipam.Owner]*podRecord{}
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		p := filepath.Join(s.dir, e.Name())
		r, err := readRecord(p)
		if errors.Is(err, os.ErrNotExist) {
			continue // removed meanwhile
		}
		if err != nil {
			s.bad(p, err)
			continue
		}
		byOwner[r.owner()] = r
	}
	for o, r := range s.unsaved {
		byOwner[o] = r.clone()
	}
	recs := make([]*podRecord, 0, len(byOwner))
	for _, r := range byOwner {
		recs = append(recs, r)
	}
	sort.Slice(recs, func(i, j int) bool {
		if recs[i].ContainerID != recs[j].ContainerID {
			return recs[i].ContainerID < recs[j].ContainerID
		}
		return recs[i].IfName < recs[j].IfName
	})
	return recs, nil
}

// readRecord reads and checks the record file at p. A missing file is os.ErrNotExist; any
// other error means the file is not a usable record.
func readRecord(p string) (*podRecord, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxRecordSize+1))
	if err != nil {
		return nil, fmt.Errorf("unreadable: %w", err)
	}
	if len(data) > maxRecordSize {
		return nil, fmt.Errorf("larger than %d bytes", maxRecordSize)
	}
	var r podRecord
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("undecodable: %w", err)
	}
	if err := r.validate(filepath.Base(p)); err != nil {
		return nil, err
	}
	return &r, nil
}

// validate checks what the server relies on: the owner (which names the file and the host
// interface, so that DEL finds it) and a network namespace.
func (r *podRecord) validate(fileName string) error {
	var errs []error
	if r.ContainerID == "" || r.IfName == "" || strings.ContainsAny(r.ContainerID+r.IfName, "\n/") {
		errs = append(errs, fmt.Errorf("invalid owner %q/%q", r.ContainerID, r.IfName))
	} else {
		if want := recordName(r.owner()); fileName != want {
			errs = append(errs, fmt.Errorf("owner %v belongs in %s", r.owner(), want))
		}
		if want := hostIfName(r.ContainerID, r.IfName); r.HostIfName != want {
			errs = append(errs, fmt.Errorf("host interface %q is not the owner's %q", r.HostIfName, want))
		}
	}
	if r.NetNS == "" {
		errs = append(errs, errors.New("no network namespace"))
	}
	for _, ip := range r.IPs {
		if !ip.IsValid() {
			errs = append(errs, fmt.Errorf("invalid address %v", ip))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid record: %w", err)
	}
	return nil
}
