package server

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/cni/protocol"
)

// fakeReporter records what the server reports.
type fakeReporter struct {
	mu          sync.Mutex
	quarantined []Quarantined
	unsaved     []error
}

func (r *fakeReporter) Quarantined(q Quarantined) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.quarantined = append(r.quarantined, q)
}

func (r *fakeReporter) StateUnsaved(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unsaved = append(r.unsaved, err)
}

func (r *fakeReporter) kinds() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, q := range r.quarantined {
		out = append(out, q.Kind)
	}
	sort.Strings(out)
	return out
}

// quarantinedFiles lists StateDir/quarantine.
func (e *env) quarantinedFiles() []string {
	e.t.Helper()
	entries, err := os.ReadDir(filepath.Join(e.opts.StateDir, "quarantine"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(e.t, err)
	var out []string
	for _, en := range entries {
		out = append(out, en.Name())
	}
	return out
}

func (e *env) recordFile(cid string) string {
	return filepath.Join(e.opts.StateDir, "pods", recordName(ownerOf(cid)))
}

// The records of c2, c3 and c4 are damaged in three ways while the agent is down, and a stray
// oversized file appears: the restart quarantines all four, keeps c1 and serves new pods.
func TestStartQuarantinesCorruptPodRecords(t *testing.T) {
	e := newEnv(t)
	rep := &fakeReporter{}
	e.opts.Reporter = rep
	e.mustOK(req("ADD", "c1", "/var/run/netns/pod1"))
	e.mustOK(req("ADD", "c2", "/var/run/netns/pod2"))
	e.mustOK(req("ADD", "c3", "/var/run/netns/pod2"))
	e.mustOK(req("ADD", "c4", "/var/run/netns/pod2"))

	data, err := os.ReadFile(e.recordFile("c2"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(e.recordFile("c2"), data[:len(data)/2], 0o600), "truncated JSON")
	require.NoError(t, os.WriteFile(e.recordFile("c3"), []byte(`{"containerID":"c3","ifName":"eth0","ips":"10.10.0.4"}`), 0o600), "wrong schema")
	data, err = os.ReadFile(e.recordFile("c4"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(e.recordFile("c4"), []byte(strings.Replace(string(data), hostIfName("c4", "eth0"), "eth0", 1)), 0o600),
		"a host interface that is not the pod's: DEL would remove the node's eth0")
	require.NoError(t, os.WriteFile(filepath.Join(e.opts.StateDir, "pods", "ffff.json"), make([]byte, maxRecordSize+1), 0o600), "oversized")

	e.restart(2)
	require.Len(t, e.quarantinedFiles(), 4)
	require.Equal(t, []string{KindPodRecord, KindPodRecord, KindPodRecord, KindPodRecord}, rep.kinds())
	require.Equal(t, uint64(4), e.srv.Stats().Quarantined[KindPodRecord])
	require.NoError(t, testutil.CollectAndCompare(e.srv.Collector("antrea_proxy"), strings.NewReader(`
# HELP antrea_proxy_cni_quarantined_files_total CNI state files (pod records, spooled DELs, address reservations) that could not be used and were moved aside.
# TYPE antrea_proxy_cni_quarantined_files_total counter
antrea_proxy_cni_quarantined_files_total{kind="ipam-reservation"} 0
antrea_proxy_cni_quarantined_files_total{kind="pod-record"} 4
antrea_proxy_cni_quarantined_files_total{kind="spooled-del"} 0
`), "antrea_proxy_cni_quarantined_files_total"))
	e.mustOK(req("CHECK", "c1", "/var/run/netns/pod1"))
	e.mustOK(req("ADD", "c5", "/var/run/netns/pod2"))
	e.mustOK(req("CHECK", "c5", "/var/run/netns/pod2"))
	// The quarantined pods' runtime still sends DEL: it succeeds, from the container ID alone.
	e.mustOK(req("DEL", "c2", "/var/run/netns/pod2"))
}

// A spooled DEL that fails and a pod whose restore fails do not stop the start: the other pods
// are served, and Reconcile retries both.
func TestStartSurvivesFailingPodAndSpooledDel(t *testing.T) {
	e := newEnv(t)
	e.mustOK(req("ADD", "c1", "/var/run/netns/pod1"))
	e.mustOK(req("ADD", "c2", "/var/run/netns/pod2"))
	e.mustOK(req("ADD", "c3", "/var/run/netns/pod2"))
	require.NoError(t, protocol.WriteSpool(e.opts.SpoolDir, req("DEL", "c3", "/var/run/netns/pod2")))
	e.nl.failTeardown = map[string]error{hostIfName("c3", "eth0"): errors.New("device busy")}
	invalid := req("DEL", "c9", "/var/run/netns/pod2")
	invalid.IfName = ""
	require.NoError(t, protocol.WriteSpool(e.opts.SpoolDir, invalid))
	e.nl.failNext = errors.New("netlink: resource temporarily unavailable") // the first restored pod: c1

	e.restart(2)
	require.Equal(t, uint64(2), e.srv.Stats().RestoreFailures, "c1's restore and c3's DEL")
	require.Equal(t, uint64(1), e.srv.Stats().Quarantined[KindSpooledDel], "the DEL without an interface")
	e.mustOK(req("CHECK", "c2", "/var/run/netns/pod2"))
	require.NotNil(t, e.do(req("CHECK", "c1", "/var/run/netns/pod1")).Error, "c1 is not restored yet")

	e.nl.failTeardown = nil
	require.NoError(t, e.srv.Reconcile(context.Background()))
	e.mustOK(req("CHECK", "c1", "/var/run/netns/pod1"))
	require.NotNil(t, e.do(req("CHECK", "c3", "/var/run/netns/pod2")).Error, "c3's spooled DEL is carried out")
	entries, err := os.ReadDir(e.opts.SpoolDir)
	require.NoError(t, err)
	require.Empty(t, entries)
}

// A pod record that becomes unreadable while the agent runs does not make DEL fail for ever.
func TestDelOfCorruptRecord(t *testing.T) {
	e := newEnv(t)
	rep := &fakeReporter{}
	e.opts.Reporter = rep
	e.restart(1)
	e.mustOK(req("ADD", "c1", "/var/run/netns/pod1"))
	require.NoError(t, os.WriteFile(e.recordFile("c1"), []byte("{\"containerID\":"), 0o600))
	e.mustOK(req("DEL", "c1", "/var/run/netns/pod1"))
	require.Empty(t, e.ports.names(), "the port found from the container ID is removed")
	require.Empty(t, e.ipamFiles())
	require.Equal(t, []string{KindPodRecord}, rep.kinds())
}

func TestQuarantineKeepsTheNewest(t *testing.T) {
	e := newEnv(t)
	e.opts.QuarantineKeep = 2
	for _, n := range []string{"a", "b", "c"} {
		require.NoError(t, os.WriteFile(filepath.Join(e.opts.StateDir, "pods", n+".json"), []byte(n), 0o600))
		e.restart(1)
	}
	files := e.quarantinedFiles()
	require.Len(t, files, 2)
	require.True(t, strings.HasSuffix(files[0], "-"+KindPodRecord+"-b.json"), files[0])
	require.True(t, strings.HasSuffix(files[1], "-"+KindPodRecord+"-c.json"), files[1])
	require.Equal(t, uint64(1), e.srv.Stats().Quarantined[KindPodRecord], "counted per run")
}

// Unreadable address reservations: the one a restored pod holds is rewritten for it, the other
// is quarantined, which frees its address.
func TestStartRepairsOrQuarantinesCorruptReservations(t *testing.T) {
	e := newEnv(t)
	e.mustOK(req("ADD", "c1", "/var/run/netns/pod1")) // 10.10.0.2
	ipamDir := filepath.Join(e.opts.StateDir, "ipam")
	require.NoError(t, os.WriteFile(filepath.Join(ipamDir, "10.10.0.2"), []byte("garbage"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(ipamDir, "10.10.0.3"), []byte("\x00\x01"), 0o600))

	e.restart(2)
	got, err := e.srv.ipam.Get(ownerOf("c1"))
	require.NoError(t, err)
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.10.0.2/24")}, got, "rewritten for c1")
	require.Equal(t, uint64(1), e.srv.Stats().Quarantined[KindIPAM])
	require.Equal(t, []string{"10.10.0.2"}, e.ipamFiles())
	e.mustOK(req("CHECK", "c1", "/var/run/netns/pod1"))
}
