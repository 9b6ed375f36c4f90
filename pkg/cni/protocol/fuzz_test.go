package protocol

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// FuzzParseArgs checks that CNI_ARGS parsing never panics, that every accepted key is
// non-empty and free of ';' and '=', every value free of ';', that rejection happens exactly
// when a non-empty element lacks a key, and that re-joining the result parses to the same map.
func FuzzParseArgs(f *testing.F) {
	for _, s := range []string{
		"", "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0;K8S_POD_INFRA_CONTAINER_ID=abc",
		"A=;B==c;;", "novalue", "=v", ";;;", "K=v;K=w",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseArgs(s)
		wantErr := false
		for _, kv := range strings.Split(s, ";") {
			if k, _, ok := strings.Cut(kv, "="); kv != "" && (!ok || k == "") {
				wantErr = true
			}
		}
		if (err != nil) != wantErr {
			t.Fatalf("ParseArgs(%q) error %v, want error %t", s, err, wantErr)
		}
		if err != nil {
			return
		}
		parts := make([]string, 0, len(m))
		for k, v := range m {
			if k == "" || strings.ContainsAny(k, ";=") || strings.Contains(v, ";") {
				t.Fatalf("ParseArgs(%q): bad pair %q=%q", s, k, v)
			}
			parts = append(parts, k+"="+v)
		}
		sort.Strings(parts)
		again, err := ParseArgs(strings.Join(parts, ";"))
		if err != nil || !reflect.DeepEqual(m, again) {
			t.Fatalf("ParseArgs(%q) = %v, re-joined %v (%v)", s, m, again, err)
		}
	})
}

// FuzzParseNetConf checks that a network configuration is either rejected with a decoding or
// invalid-configuration error, or accepted with a name, a cniVersion and the paths defaulted,
// and that an accepted configuration survives encoding and parsing again.
func FuzzParseNetConf(f *testing.F) {
	for _, s := range []string{
		`{"cniVersion":"1.0.0","name":"antrea","type":"antrea-cni","socketPath":"/var/run/antrea/cni.sock"}`,
		`{"cniVersion":"1.1.0","name":"antrea","type":"antrea-cni","cni.dev/valid-attachments":[{"containerID":"c1","ifname":"eth0"}]}`,
		`{"cniVersion":"0.4.0","name":"antrea","type":"antrea-cni","delSpoolDir":"/tmp/spool","prevResult":{"cniVersion":"0.4.0","ips":[{"version":"4","address":"10.0.0.2/24"}]}}`,
		`{"name":"antrea"}`, `{"cniVersion":"1.0.0"}`, `[]`, `{"cniVersion":1}`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, cerr := ParseNetConf(data)
		if cerr != nil {
			if c != nil || (cerr.Code != ErrDecodingFailure && cerr.Code != ErrInvalidNetworkConfig) {
				t.Fatalf("ParseNetConf(%q) = %v, %v", data, c, cerr)
			}
			return
		}
		if c.Name == "" || c.CNIVersion == "" || c.SocketPath == "" || c.DelSpoolDir == "" {
			t.Fatalf("ParseNetConf(%q) accepted %+v", data, c)
		}
		enc, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("encoding %+v: %v", c, err)
		}
		again, cerr := ParseNetConf(enc)
		if cerr != nil {
			t.Fatalf("re-parsing %s: %v", enc, cerr)
		}
		if !bytes.Equal(compact(t, c.PrevResult), compact(t, again.PrevResult)) {
			t.Fatalf("prevResult changed: %s → %s", c.PrevResult, again.PrevResult)
		}
		c.PrevResult, again.PrevResult = nil, nil
		if !cmp.Equal(c, again, cmpopts.EquateEmpty()) {
			t.Fatalf("round trip changed the configuration:\n%+v\n%+v", c, again)
		}
	})
}

func compact(t *testing.T, raw json.RawMessage) []byte {
	t.Helper()
	if len(raw) == 0 {
		return nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatalf("compacting %q: %v", raw, err)
	}
	return b.Bytes()
}

// FuzzReadSpool checks that ReadSpool never fails or panics on a spool file of arbitrary
// content: the file is either returned as a DEL request with a container ID or listed as bad,
// never both. A request written by WriteSpool (valid UTF-8) is read back unchanged.
func FuzzReadSpool(f *testing.F) {
	f.Add([]byte(`{"command":"DEL","containerID":"c1","ifName":"eth0","args":"K8S_POD_NAME=a","path":"/opt/cni/bin","config":{"cniVersion":"1.0.0","name":"antrea"}}`), "c1", "eth0", "K8S_POD_NAME=a")
	f.Add([]byte(`{"command":"ADD","containerID":"c1"}`), "c2", "", "")
	f.Add([]byte(`{"command":"DEL","containerID":""}`), "c3", "net1", ";")
	f.Add([]byte(`not json`), "", "eth0", "")
	f.Fuzz(func(t *testing.T, data []byte, containerID, ifName, args string) {
		dir := t.TempDir()
		file := filepath.Join(dir, "del-fuzz.json")
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
		reqs, bad, err := ReadSpool(dir)
		if err != nil || len(reqs)+len(bad) != 1 {
			t.Fatalf("ReadSpool of %q: %d requests, bad %v, err %v", data, len(reqs), bad, err)
		}
		if len(reqs) == 1 && (reqs[0].Request.Command != CmdDel || reqs[0].Request.ContainerID == "" || reqs[0].File != file) {
			t.Fatalf("ReadSpool of %q returned %+v", data, reqs[0])
		}
		// JSON replaces invalid UTF-8 with U+FFFD; the plugin validates container IDs and
		// interface names, and CNI_ARGS carry Kubernetes names, so only valid UTF-8 must survive.
		if containerID == "" || !utf8.ValidString(containerID) || !utf8.ValidString(ifName) || !utf8.ValidString(args) {
			return
		}
		if err := os.Remove(file); err != nil {
			t.Fatal(err)
		}
		req := Request{Command: CmdDel, ContainerID: containerID, IfName: ifName, Args: args, Config: json.RawMessage(`{"name":"antrea"}`)}
		if err := WriteSpool(dir, req); err != nil {
			t.Fatalf("WriteSpool: %v", err)
		}
		reqs, bad, err = ReadSpool(dir)
		if err != nil || len(bad) != 0 || len(reqs) != 1 {
			t.Fatalf("ReadSpool after WriteSpool: %+v, bad %v, err %v", reqs, bad, err)
		}
		got := reqs[0].Request
		if got.ContainerID != req.ContainerID || got.IfName != req.IfName || got.Args != req.Args ||
			filepath.Base(reqs[0].File) != SpoolName(containerID, ifName) {
			t.Fatalf("spooled %+v, read back %+v from %s", req, got, reqs[0].File)
		}
	})
}
