package antctl

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver"
	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver/apiservertest"
	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver/apiv1"
	"github.com/antrea-proxy/antrea-proxy/pkg/config"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden with the current output")

// now is the clock of every golden output: 42s after the fixture's last sync.
var now = apiservertest.SyncTime.Add(42 * time.Second)

// startAgent serves src on a socket in a temp dir and returns the socket's path.
func startAgent(t *testing.T, src apiserver.ServiceSource) string {
	t.Helper()
	return startAgentWith(t, apiserver.Options{Services: src})
}

// startAgentWith serves the agent API with opts (its Config made here) on a socket in a temp
// dir and returns the socket's path.
func startAgentWith(t *testing.T, opts apiserver.Options) string {
	t.Helper()
	cfg := &config.AgentConfig{}
	cfg.DefaultsFrom(config.Env{Getenv: func(string) string { return "node-a" }})
	cfg.APISocket = filepath.Join(t.TempDir(), "agent.sock")
	opts.Config = cfg
	ctx, cancel := context.WithCancel(context.Background())
	s, err := apiserver.Start(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { cancel(); s.Close() })
	return cfg.APISocket
}

// run runs antctl with args and returns stdout, stderr and the exit code.
func run(args ...string) (string, string, int) {
	var out, errOut bytes.Buffer
	code := MainWithClock(args, &out, &errOut, func() time.Time { return now })
	return out.String(), errOut.String(), code
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run `go test ./pkg/antctl -run TestGolden -update` to create it")
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs from %s (-want +got):\n%s", name, path, diff)
	}
}

// TestGoldenServiceMap prints a servicemap covering every Option 1 decision and reason, through
// the whole antctl → socket → agent API path, in every output format.
func TestGoldenServiceMap(t *testing.T) {
	sock := startAgent(t, apiservertest.AllDecisions())
	for _, tc := range []struct {
		golden string
		args   []string
	}{
		{"servicemap-table", []string{"get", "servicemap", "-A"}},
		{"servicemap-wide", []string{"get", "servicemap", "-A", "-o", "wide"}},
		{"servicemap-json", []string{"get", "servicemap", "-A", "-o", "json"}},
		{"servicemap-yaml", []string{"get", "servicemap", "-A", "-o", "yaml"}},
		{"servicemap-namespace", []string{"get", "servicemap", "-n", "prod"}},
		{"servicemap-name", []string{"get", "sm", "web"}},
		{"ovsflows-web", []string{"get", "ovsflows", "-S", "default/web"}},
		{"ovsflows-web-no-names", []string{"get", "ovsflows", "-S", "default/web", "--no-names"}},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			out, errOut, code := run(append(tc.args, "--socket", sock)...)
			require.Equal(t, 0, code, "stderr: %s", errOut)
			require.Empty(t, errOut)
			checkGolden(t, tc.golden, out)
		})
	}
}

// TestServiceMapCoversEveryReason guards the fixture: every decision and reason of the model
// appears in the golden servicemap, with the decision matching the reason.
func TestServiceMapCoversEveryReason(t *testing.T) {
	sock := startAgent(t, apiservertest.AllDecisions())
	out, errOut, code := run("get", "servicemap", "-A", "-o", "json", "--socket", sock)
	require.Equal(t, 0, code, errOut)
	var m apiv1.ServiceMap
	require.NoError(t, json.Unmarshal([]byte(out), &m))
	seen := map[string]bool{}
	for _, it := range m.Items {
		for _, ing := range it.LoadBalancerIngress {
			seen[ing.Reason] = true
			require.Equal(t, strings.HasPrefix(ing.Reason, "programmed"), ing.Programmed, "ingress %+v", ing)
		}
	}
	var want, got []string
	for _, r := range apiservertest.AllReasons {
		want = append(want, string(r))
	}
	for r := range seen {
		got = append(got, r)
	}
	sort.Strings(want)
	sort.Strings(got)
	require.Empty(t, cmp.Diff(want, got))
}

func TestTableCells(t *testing.T) {
	require.Equal(t, "172.18.0.100(VIP):programmed,172.18.0.101(Proxy):skipped: ipMode=Proxy,lb.example.com:skipped: hostname-only ingress",
		lbIngressCell([]apiv1.LBIngress{
			{IP: "172.18.0.100", IPMode: "VIP", Programmed: true, Reason: "programmed (ipMode VIP)"},
			{IP: "172.18.0.101", IPMode: "Proxy", Reason: "skipped: ipMode=Proxy"},
			{Hostname: "lb.example.com", Reason: "skipped: hostname-only ingress"},
		}))
	require.Equal(t, "", lbIngressCell(nil))
	for d, want := range map[time.Duration]string{
		-time.Second: "0s", 0: "0s", 119 * time.Second: "119s", 125 * time.Second: "2m5s", 5 * time.Minute: "5m",
		45 * time.Minute: "45m", 3*time.Hour + 30*time.Minute: "3h30m", 5 * time.Hour: "5h", 30 * time.Hour: "30h", 72 * time.Hour: "3d",
	} {
		require.Equal(t, want, humanDuration(d), "duration %v", d)
	}
	require.Equal(t, "<unknown>", age("", now))
}

// problemMap is a servicemap with a quarantined Service, a conflict loser and a refused address (the agent API's
// side is pkg/agent/apiserver's TestServiceMapProblems).
func problemMap() apiv1.ServiceMap {
	item := func(ns, name string, port uint16, p *apiv1.Problem) apiv1.ServicePort {
		return apiv1.ServicePort{Namespace: ns, Name: name, Port: port, Protocol: "TCP", IPFamily: "IPv4",
			ClusterIPs: []string{"10.96.0.10"}, ExternalIPs: []string{}, LoadBalancerIngress: []apiv1.LBIngress{},
			ExternalTrafficPolicy: "Cluster", InternalTrafficPolicy: "Cluster", SessionAffinity: apiv1.SessionAffinity{Type: "None"},
			Cookie: "0x0", CookieMask: "0xffffffffff", LastSync: apiservertest.SyncTime.UTC().Format(time.RFC3339), Problem: p}
	}
	ts := func(d time.Duration) string { return now.Add(d).UTC().Format(time.RFC3339) }
	return apiv1.ServiceMap{Kind: "ServiceMap", APIVersion: apiv1.APIVersion, Items: []apiv1.ServicePort{
		item("default", "ok", 80, nil),
		item("default", "rejected", 80, &apiv1.Problem{Reason: apiv1.ProblemOVSRejected,
			Message: "OFPBAC_BAD_SET_ARGUMENT: ct(nat(dst=10.10.0.5:8080)) rejected", Since: ts(-5 * time.Minute), Retries: 3, NextRetry: ts(8 * time.Second)}),
		item("prod", "loser", 80, &apiv1.Problem{Reason: apiv1.ProblemFlowConflict,
			Message: "externalIP 10.96.0.10:80/TCP is claimed by default/ok (its ClusterIP)", Since: ts(-42 * time.Second)}),
		item("prod", "refused", 80, &apiv1.Problem{Reason: apiv1.ProblemAddressRefused,
			Message: "externalIP 127.0.0.1 is refused: a loopback address", Since: ts(-42 * time.Second)}),
	}}
}

func TestGoldenServiceMapProblems(t *testing.T) {
	for _, format := range []string{"table", "wide", "json", "yaml"} {
		t.Run(format, func(t *testing.T) {
			var b bytes.Buffer
			require.NoError(t, PrintServiceMap(&b, problemMap(), format, true, now))
			checkGolden(t, "servicemap-problem-"+format, b.String())
		})
	}
	require.Equal(t, "OVSRejected(retries=3, next in 8s)", problemCell(problemMap().Items[1].Problem, false, now))
	require.Equal(t, "FlowConflict", problemCell(problemMap().Items[2].Problem, false, now))
	require.Equal(t, "FlowConflict: externalIP 10.96.0.10:80/TCP is claimed by default/ok (its ClusterIP) (since 42s)",
		problemCell(problemMap().Items[2].Problem, true, now))
	require.Equal(t, "AddressRefused", problemCell(problemMap().Items[3].Problem, false, now))
	require.Equal(t, "", problemCell(nil, true, now))
}
