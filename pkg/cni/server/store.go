package server

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/antrea-proxy/antrea-proxy/pkg/cni/internal/atomicfile"
	"github.com/antrea-proxy/antrea-proxy/pkg/cni/ipam"
)

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

// hostIfName is the host end of a pod's veth pair: derived from the container ID and interface
// alone, so that a DEL without any record still finds it.
func hostIfName(containerID, ifName string) string {
	sum := sha256.Sum256([]byte(containerID + "/" + ifName))
	return "apx" + hex.EncodeToString(sum[:])[:12]
}

// store keeps one JSON file per pod interface in a directory.
type store struct{ dir string }

func newStore(dir string) (*store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating pod state directory %s: %w", dir, err)
	}
	return &store{dir: dir}, nil
}

func (s *store) path(o ipam.Owner) string {
	sum := sha256.Sum256([]byte(o.ContainerID + "/" + o.IfName))
	return filepath.Join(s.dir, hex.EncodeToString(sum[:16])+".json")
}

func (s *store) get(o ipam.Owner) (*podRecord, bool, error) {
	data, err := os.ReadFile(s.path(o))
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading state of %v: %w", o, err)
	}
	var r podRecord
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, false, fmt.Errorf("decoding state of %v: %w", o, err)
	}
	return &r, true, nil
}

func (s *store) put(r *podRecord) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding state of %v: %w", r.owner(), err)
	}
	return atomicfile.Write(s.path(r.owner()), data)
}

func (s *store) delete(o ipam.Owner) error {
	if err := os.Remove(s.path(o)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing state of %v: %w", o, err)
	}
	return nil
}

// list returns every record, sorted by container ID and interface. Undecodable files are
// returned by name in bad.
func (s *store) list() (recs []*podRecord, bad []string, err error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, nil, fmt.Errorf("reading pod state directory %s: %w", s.dir, err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		p := filepath.Join(s.dir, e.Name())
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, nil, fmt.Errorf("reading %s: %w", p, err)
		}
		var r podRecord
		if err := json.Unmarshal(data, &r); err != nil || r.ContainerID == "" || r.IfName == "" {
			bad = append(bad, p)
			continue
		}
		recs = append(recs, &r)
	}
	sort.Slice(recs, func(i, j int) bool {
		if recs[i].ContainerID != recs[j].ContainerID {
			return recs[i].ContainerID < recs[j].ContainerID
		}
		return recs[i].IfName < recs[j].IfName
	})
	return recs, bad, nil
}
