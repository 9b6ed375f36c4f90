package plugin

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/antrea-proxy/antrea-proxy/pkg/cni/protocol"
)

// FuzzParse checks the plugin's validation of an invocation (CNI_* variables and the network
// configuration on stdin) without any agent: it never panics, rejects with a non-zero CNI
// error code, and accepts only a known command with its required variables set, valid
// CNI_ARGS and a configuration of a supported version, passing stdin on verbatim.
func FuzzParse(f *testing.F) {
	conf := []byte(`{"cniVersion":"1.0.0","name":"antrea","type":"antrea-cni"}`)
	for _, cmd := range []string{"ADD", "DEL", "CHECK", "GC", "STATUS", "VERSION", "add", ""} {
		f.Add(cmd, "c0ffee", "/var/run/netns/p1", "eth0", "K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0", "/opt/cni/bin", conf)
	}
	f.Add("ADD", "bad id!", "/netns", "eth0/1", "x", "/opt/cni/bin", []byte(`{"cniVersion":"9.9.9","name":"a"}`))
	f.Add("GC", "", "", "", "", "/opt/cni/bin", []byte(`{"cniVersion":"1.0.0","name":"antrea"}`))
	f.Fuzz(func(t *testing.T, cmd, containerID, netns, ifName, args, path string, stdin []byte) {
		vars := map[string]string{"CNI_COMMAND": cmd, "CNI_CONTAINERID": containerID, "CNI_NETNS": netns,
			"CNI_IFNAME": ifName, "CNI_ARGS": args, "CNI_PATH": path}
		env := Env{Getenv: func(k string) string { return vars[k] }, Stdin: bytes.NewReader(stdin)}
		inv, cerr := parse(env, cmd)
		if cerr != nil {
			if inv != nil || cerr.Code == 0 || cerr.Msg == "" {
				t.Fatalf("rejection %+v with invocation %+v", cerr, inv)
			}
			return
		}
		req, known := required[cmd]
		if !known {
			t.Fatalf("accepted unknown command %q", cmd)
		}
		for _, v := range req {
			if vars[v] == "" {
				t.Fatalf("%s accepted without %s", cmd, v)
			}
		}
		if _, err := protocol.ParseArgs(args); err != nil {
			t.Fatalf("accepted CNI_ARGS %q: %v", args, err)
		}
		if !slices.Contains(supportedVersions, inv.conf.CNIVersion) {
			t.Fatalf("accepted cniVersion %q", inv.conf.CNIVersion)
		}
		if r := inv.req; r.Command != cmd || r.ContainerID != containerID || r.IfName != ifName ||
			r.Args != args || !bytes.Equal(r.Config, stdin) {
			t.Fatalf("request %+v does not carry the invocation", r)
		}
	})
}

// FuzzConvertResult checks that converting the agent's result to a configuration's version
// never panics and, when it succeeds, prints JSON that states the requested version.
func FuzzConvertResult(f *testing.F) {
	for _, v := range supportedVersions {
		f.Add([]byte(result100), v)
	}
	f.Add([]byte(`{"cniVersion":"1.0.0","ips":[{"address":"fd00::2/64","interface":-1}]}`), "0.3.1")
	f.Add([]byte(`{"cniVersion":"1.0.0","interfaces":[{"name":"eth0"}],"ips":[{"interface":5,"address":"10.0.0.2/24"}]}`), "0.4.0")
	f.Add([]byte(`{}`), "2.0.0")
	f.Fuzz(func(t *testing.T, raw []byte, version string) {
		out, cerr := convertResult(raw, version)
		if cerr != nil {
			if out != nil || cerr.Code == 0 {
				t.Fatalf("rejection %+v with output %q", cerr, out)
			}
			return
		}
		var res struct {
			CNIVersion string `json:"cniVersion"`
		}
		// An empty version is the CNI spec's 0.1.0 (never reached: parse rejects it).
		want := version
		if want == "" {
			want = "0.1.0"
		}
		if err := json.Unmarshal(out, &res); err != nil || res.CNIVersion != want {
			t.Fatalf("converted %q to %q: version %q, err %v", raw, out, res.CNIVersion, err)
		}
	})
}
