package server

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzStoreList checks the pod state store's decoding of a state file of arbitrary content,
// stored under the name of container c1's eth0: list never fails or panics, returns the file
// either as a valid record or as bad, and a returned record is stored and read back unchanged.
func FuzzStoreList(f *testing.F) {
	f.Add([]byte(`{"containerID":"c1","ifName":"eth0","netns":"/var/run/netns/p1","podNamespace":"default","podName":"web-0",` +
		`"hostIfName":"` + hostIfName("c1", "eth0") + `","ofport":7,"podMAC":"0a:58:0a:0a:00:02","hostMAC":"0a:58:0a:0a:00:01","ips":["10.10.0.2/24","fd00:10::2/64"]}`))
	f.Add([]byte(`{"containerID":"c1","ifName":""}`))
	f.Add([]byte(`{"containerID":"c1","ifName":"eth0","ips":["10.10.0.2"]}`))
	f.Add([]byte(`{"containerID":"c1","ifName":"eth0","ofport":-1}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var bad []string
		s, err := newStore(t.TempDir(), newStats(), func(p string, _ error) { bad = append(bad, p) })
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(s.dir, recordName(ownerOf("c1"))), data, 0o600); err != nil {
			t.Fatal(err)
		}
		recs, err := s.list()
		if err != nil || len(recs)+len(bad) != 1 {
			t.Fatalf("list of %q: %d records, bad %v, err %v", data, len(recs), bad, err)
		}
		if len(recs) == 0 {
			return
		}
		r := recs[0]
		if r.validate(recordName(r.owner())) != nil {
			t.Fatalf("list of %q returned %+v", data, r)
		}
		if err := s.put(r); err != nil {
			t.Fatalf("put %+v: %v", r, err)
		}
		got, ok, err := s.get(r.owner())
		if err != nil || !ok || !reflect.DeepEqual(got, r) {
			t.Fatalf("stored %+v, read back %+v (found %t, err %v)", r, got, ok, err)
		}
	})
}
