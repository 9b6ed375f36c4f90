//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent"
	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

const cniStartNS = "cnistart"

// TestAgentRestartWithCorruptCNIState kills node1's agent, damages its CNI state the ways a
// crash or a failing disk does (one pod's record truncated, a record file every read of which
// fails with EIO, a garbage spooled DEL) and starts it again: it must come up, quarantine what
// it can, report it on the Node, and keep serving the other pods of the node, old and new.
func TestAgentRestartWithCorruptCNIState(t *testing.T) {
	sb := framework.StartSandbox(t, framework.SandboxOptions{})
	ctx := context.Background()
	n1, n2 := sb.Nodes[0], sb.Nodes[1]
	require.NoError(t, sb.CreateNamespace(ctx, cniStartNS))
	pods, err := sb.RunPods(ctx,
		framework.EchoPod(cniStartNS, "web-1", n1, map[string]string{"app": "web"}),
		framework.EchoPod(cniStartNS, "victim-1", n1, map[string]string{"app": "victim"}),
		framework.EchoPod(cniStartNS, "client-2", n2, map[string]string{"app": "client"}),
	)
	require.NoError(t, err)
	client, err := sb.PodNetNS(pods[2])
	require.NoError(t, err)
	svc := createService(t, sb, echoService(cniStartNS, "web", "web", corev1.ServiceTypeClusterIP))
	require.NoError(t, sb.WaitEndpoints(ctx, cniStartNS, "web", pods[0].Status.PodIP))
	require.NoError(t, sb.WaitProgrammed(ctx, cniStartNS, "web", "with web-1", framework.HasEndpoints(1)))
	webAddr := hostPort(svc.Spec.ClusterIP, 80)
	echoUntil(t, client, "tcp", webAddr, "client-2 reaching web-1 before the restart", fromBackend(map[string]bool{"web-1": true}, ""))

	n1.KillAgent(t)
	podsDir := filepath.Join(n1.CNIStateDir(), "pods")
	victim := podRecordOf(t, podsDir, "victim-1")
	data, err := os.ReadFile(victim)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(victim, data[:len(data)/2], 0o600), "truncating victim-1's record")
	bindUnreadable(t, filepath.Join(podsDir, strings.Repeat("0", 32)+".json"))
	require.NoError(t, os.MkdirAll(n1.CNIDelSpoolDir(), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(n1.CNIDelSpoolDir(), "del-garbage.json"), []byte(`{"command":`), 0o600))

	require.NoError(t, n1.RestartAgentAfterKill(t, 2*time.Minute), "the agent must start with corrupt CNI state (log %s)", n1.AgentLog())
	echoUntil(t, client, "tcp", webAddr, "client-2 reaching web-1 after the restart", fromBackend(map[string]bool{"web-1": true}, ""))

	quarantined, err := os.ReadDir(filepath.Join(n1.CNIStateDir(), "quarantine"))
	require.NoError(t, err)
	var names []string
	for _, e := range quarantined {
		names = append(names, e.Name())
	}
	require.Len(t, names, 2, "victim-1's record and the spooled DEL: %v", names)
	require.Contains(t, strings.Join(names, " "), "-pod-record-"+filepath.Base(victim))
	require.Contains(t, strings.Join(names, " "), "-spooled-del-del-garbage.json")
	framework.WaitFor(t, time.Minute, "CNIStateQuarantined events on "+n1.Name, func(ctx context.Context) (bool, string, error) {
		evs, err := sb.CP.Client.CoreV1().Events("").List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + n1.Name + ",reason=" + agent.EventCNIStateQuarantined})
		if err != nil {
			return false, err.Error(), nil
		}
		// victim-1's record, the spooled DEL, and the unreadable record left in place.
		return len(evs.Items) >= 3, "events: " + eventMessages(evs.Items), nil
	})

	framework.WaitFor(t, time.Minute, "the CNI metrics of "+n1.Name, func(ctx context.Context) (bool, string, error) {
		text, err := n1.AgentMetrics(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		lines := strings.Split(text, "\n")
		for _, want := range []string{`antrea_proxy_cni_quarantined_files_total{kind="pod-record"} 2`,
			`antrea_proxy_cni_quarantined_files_total{kind="spooled-del"} 1`,
			`antrea_proxy_http_connections_rejected_total{server="service-healthcheck"} 0`} {
			if !slices.Contains(lines, want) {
				return false, "no line " + want, nil
			}
		}
		return true, "", nil
	})

	// New pods on the node get their network, and reach the old ones.
	more, err := sb.RunPods(ctx, framework.EchoPod(cniStartNS, "client-1", n1, map[string]string{"app": "client"}))
	require.NoError(t, err)
	client1, err := sb.PodNetNS(more[0])
	require.NoError(t, err)
	echoUntil(t, client1, "tcp", webAddr, "a pod created after the restart reaching web-1", fromBackend(map[string]bool{"web-1": true}, ""))
}

// podRecordOf returns the file of the pod record of the pod named name in dir.
func podRecordOf(t *testing.T, dir, name string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		var rec struct {
			PodName string `json:"podName"`
		}
		if json.Unmarshal(data, &rec) == nil && rec.PodName == name {
			return p
		}
	}
	t.Fatalf("no pod record of %s in %s", name, dir)
	return ""
}

// bindUnreadable makes path a file whose every read fails with EIO: this test process's
// memory file, read at offset 0, bind-mounted over it (until the test ends).
func bindUnreadable(t *testing.T, path string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, nil, 0o600))
	require.NoError(t, unix.Mount("/proc/self/mem", path, "", unix.MS_BIND, ""))
	t.Cleanup(func() { _ = unix.Unmount(path, unix.MNT_DETACH) })
	_, err := os.ReadFile(path)
	require.True(t, errors.Is(err, syscall.EIO), "reading the bind-mounted file: %v", err)
}

func eventMessages(evs []corev1.Event) string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Message)
	}
	return strings.Join(out, "; ")
}
