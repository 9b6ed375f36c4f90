package protocol

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/antrea-proxy/antrea-proxy/pkg/cni/internal/atomicfile"
)

// spoolSuffix ends the name of every spooled request.
const spoolSuffix = ".json"

// SpoolName is the file name a DEL of (containerID, ifName) is spooled under: one file per
// attachment, so a DEL repeated by the runtime overwrites the earlier one.
func SpoolName(containerID, ifName string) string {
	sum := sha256.Sum256([]byte(containerID + "/" + ifName))
	return "del-" + hex.EncodeToString(sum[:12]) + spoolSuffix
}

// WriteSpool stores req in dir atomically (temporary file, fsync, rename).
func WriteSpool(dir string, req Request) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating DEL spool %s: %w", dir, err)
	}
	data, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("encoding spooled DEL of container %s: %w", req.ContainerID, err)
	}
	return atomicfile.Write(filepath.Join(dir, SpoolName(req.ContainerID, req.IfName)), data)
}

// SpooledRequest is a request read back from the spool.
type SpooledRequest struct {
	// File is the spool file; remove it once the request is done.
	File    string
	Request Request
}

// ReadSpool returns the requests in dir, oldest name first. A missing dir is empty. Files that
// cannot be read or decoded are returned in bad so the caller can log and move them aside.
func ReadSpool(dir string) (reqs []SpooledRequest, bad []string, err error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading DEL spool %s: %w", dir, err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), spoolSuffix) && !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	for _, n := range names {
		path := filepath.Join(dir, n)
		data, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			continue // carried out meanwhile
		}
		var r Request
		if err != nil || json.Unmarshal(data, &r) != nil || r.Command != CmdDel || r.ContainerID == "" {
			bad = append(bad, path)
			continue
		}
		reqs = append(reqs, SpooledRequest{File: path, Request: r})
	}
	return reqs, bad, nil
}
