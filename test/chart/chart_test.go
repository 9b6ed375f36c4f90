package chart

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/antrea-proxy/antrea-proxy/pkg/cni/plugin"
	"github.com/antrea-proxy/antrea-proxy/pkg/cni/protocol"
	"github.com/antrea-proxy/antrea-proxy/pkg/config"
)

// TestLint runs `helm lint --strict` for the default values and the variants the docs describe.
func TestLint(t *testing.T) {
	h := NewHelm(t)
	for _, args := range [][]string{
		nil,
		{"--set", "antreaProxy.proxyLoadBalancerIPs=false"},
		{"--set", "ovs.datapathType=netdev"},
	} {
		out, err := h.Run(append([]string{"lint", "--strict", h.ChartDir(), "--namespace", Namespace}, args...)...)
		require.NoError(t, err, "helm lint %q:\n%s", args, out)
		require.Contains(t, out, "0 chart(s) failed")
	}
}

// TestManifestUpToDate fails when build/yamls/antrea-proxy.yml differs from the chart rendered
// with its default values by hack/generate-manifest.sh (`make manifest`).
func TestManifestUpToDate(t *testing.T) {
	h := NewHelm(t)
	fresh := filepath.Join(t.TempDir(), "antrea-proxy.yml")
	cmdOut, err := runScript(h.Root, "hack/generate-manifest.sh", fresh)
	require.NoError(t, err, cmdOut)
	want, err := os.ReadFile(fresh)
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(h.Root, "build", "yamls", "antrea-proxy.yml"))
	require.NoError(t, err)
	if string(got) != string(want) {
		t.Fatalf("build/yamls/antrea-proxy.yml is out of date with build/charts/antrea-proxy: run `make manifest`\n%s",
			firstDifference(string(want), string(got)))
	}
	// The manifest is exactly the default rendering, and decodes.
	_, err = Decode(string(got))
	require.NoError(t, err)
}

// TestChecksumAnnotations checks that a change of one option changes the checksum annotation
// of the Pods that read it (rolling them), and only of those.
func TestChecksumAnnotations(t *testing.T) {
	h := NewHelm(t)
	sums := func(args ...string) (agent, controller string) {
		r := render(t, h, args...)
		agent = r.daemonSet(t).Spec.Template.Annotations["checksum/config"]
		controller = r.deployment(t).Spec.Template.Annotations["checksum/config"]
		require.Regexp(t, "^[0-9a-f]{64}$", agent)
		require.Regexp(t, "^[0-9a-f]{64}$", controller)
		return agent, controller
	}
	agent0, ctrl0 := sums()
	agentAgain, ctrlAgain := sums()
	require.Equal(t, agent0, agentAgain, "rendering is not deterministic")
	require.Equal(t, ctrl0, ctrlAgain, "rendering is not deterministic")

	for _, set := range []string{
		"antreaProxy.enable=false", "antreaProxy.proxyAll=true", "antreaProxy.nodePortAddresses={10.0.0.0/8}",
		"antreaProxy.skipServices={default/web}", "antreaProxy.proxyLoadBalancerIPs=false",
		"antreaProxy.serviceProxyName=x", "antreaProxy.minSyncInterval=2s", "antreaProxy.fullSyncPeriod=1m",
		"ovs.bridge=br-x", "ovs.datapathType=netdev", "ovs.hostGateway=gw-x", "agent.apiPort=10999",
		"agent.cni.portmap=false",
	} {
		agent, ctrl := sums("--set", set)
		require.NotEqual(t, agent0, agent, "--set %s changes the agent's configuration but not its checksum annotation", set)
		require.Equal(t, ctrl0, ctrl, "--set %s does not concern antrea-controller but changes its checksum annotation", set)
	}
	for _, args := range [][]string{
		{"--set-json", `lbPools=[{"name":"default","cidrs":["10.1.0.0/24"]}]`},
		{"--set", "controller.leaderElection.leaseDuration=20s"},
	} {
		agent, ctrl := sums(args...)
		require.NotEqual(t, ctrl0, ctrl, "%q changes the controller's configuration but not its checksum annotation", args)
		require.Equal(t, agent0, agent, "%q does not concern antrea-agent but changes its checksum annotation", args)
	}
	// The class concerns both: the agent announces only the addresses of the controller's class.
	agent, ctrl := sums("--set", "controller.loadBalancerClass=example.com/lb")
	require.NotEqual(t, agent0, agent, "controller.loadBalancerClass is also antreaProxy.loadBalancerClass of antrea-agent.conf")
	require.NotEqual(t, ctrl0, ctrl)
	// The annotation is the checksum of the content in the ConfigMap, not of something else.
	agent, _ = sums("--set-string", "agent.podAnnotations.example=1")
	require.Equal(t, agent0, agent)
}

// TestAgentDaemonSet checks the agent Pod's wiring against the rendered configuration: the
// probes reach the API port antrea-agent.conf opens, NODE_NAME comes from the downward API,
// every path the configuration names is mounted, and the conflist is one antrea-cni accepts.
func TestAgentDaemonSet(t *testing.T) {
	h := NewHelm(t)
	r := render(t, h)
	ds := r.daemonSet(t)
	cm := r.configMap(t)
	spec := ds.Spec.Template.Spec
	require.True(t, spec.HostNetwork)
	require.Equal(t, "antrea-agent", spec.ServiceAccountName)
	require.Equal(t, "install-cni", spec.InitContainers[0].Name)
	names := []string{}
	for _, c := range spec.Containers {
		names = append(names, c.Name)
	}
	require.Equal(t, []string{"antrea-ovs", "antrea-agent"}, names)

	cfg, err := config.ParseWithEnv([]byte(dataKey(t, cm, "antrea-agent.conf")), nodeEnv)
	require.NoError(t, err)
	agent := container(t, spec, "antrea-agent")
	require.Contains(t, agent.Args, "--config=/etc/antrea/antrea-agent.conf")
	require.Equal(t, []corev1.EnvVar{{Name: config.NodeNameEnv, ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}}, agent.Env)
	// Readiness is the static /healthz; liveness is /livez (KEP-3836: fails when syncs stall or
	// the OpenFlow connection to OVS stays down), so that the kubelet restarts a wedged agent.
	for name, p := range map[string]*corev1.Probe{"readiness": agent.ReadinessProbe, "liveness": agent.LivenessProbe} {
		require.NotNil(t, p, "%s probe", name)
		require.NotNil(t, p.HTTPGet, "%s probe must be an HTTP GET of the agent's health endpoint", name)
		want := map[string]string{"readiness": "/healthz", "liveness": "/livez"}[name]
		require.Equal(t, want, p.HTTPGet.Path, "%s probe path", name)
		require.Equal(t, cfg.APITCPAddress, p.HTTPGet.Host+":"+p.HTTPGet.Port.String(), "%s probe must reach apiTCPAddress", name)
		require.Equal(t, intstr.Int, p.HTTPGet.Port.Type)
	}
	mounted := func(c corev1.Container, path string) {
		t.Helper()
		for _, m := range c.VolumeMounts {
			if path == m.MountPath || strings.HasPrefix(path, m.MountPath+"/") {
				return
			}
		}
		t.Errorf("container %s does not mount a volume holding %s", c.Name, path)
	}
	nn := cfg.NodeNetwork
	for _, p := range []string{"/etc/antrea/antrea-agent.conf", cfg.APISocket, cfg.APITokenFile, cfg.OVSRunDir + "/db.sock",
		nn.CNISocketPath(), nn.CNIStatePath() + "/x", nn.CNIDelSpoolPath()} {
		mounted(agent, p)
	}
	mounted(container(t, spec, "antrea-ovs"), cfg.OVSRunDir+"/db.sock")
	install := container(t, spec, "install-cni")
	mounted(install, cfg.APITokenFile)
	require.Contains(t, strings.Join(install.Args, "\n"), "> "+cfg.APITokenFile)
	require.Equal(t, []string{"/bin/sh", "-ec"}, install.Command)
	if out, err := exec.Command("sh", "-n", "-c", install.Args[0]).CombinedOutput(); err != nil {
		t.Errorf("the install-cni script is not valid shell: %v\n%s", err, out)
	}

	// The conflist antrea-cni reads, with the agent's CNI socket under the shared host directory.
	raw := dataKey(t, cm, "10-antrea.conflist")
	list, err := libcni.ConfListFromBytes([]byte(raw))
	require.NoError(t, err, raw)
	require.Contains(t, plugin.SupportedVersions(), list.CNIVersion)
	require.Equal(t, "antrea-cni", list.Plugins[0].Network.Type)
	// The runtime hands each plugin its configuration with the list's name and cniVersion.
	first, err := libcni.InjectConf(list.Plugins[0], map[string]any{"name": list.Name, "cniVersion": list.CNIVersion})
	require.NoError(t, err)
	nc, cniErr := protocol.ParseNetConf(first.Bytes)
	require.Nil(t, cniErr)
	require.Equal(t, nn.CNISocketPath(), nc.SocketPath, "antrea-cni must call the agent's CNI socket")
	require.Equal(t, nn.CNIDelSpoolPath(), nc.DelSpoolDir, "antrea-cni must spool DELs where the agent replays them")
	require.Equal(t, "portmap", list.Plugins[1].Network.Type)
}

// TestControllerDeployment checks the controller Pod's wiring.
func TestControllerDeployment(t *testing.T) {
	h := NewHelm(t)
	d := render(t, h).deployment(t)
	spec := d.Spec.Template.Spec
	require.Equal(t, "antrea-controller", spec.ServiceAccountName)
	c := container(t, spec, "antrea-controller")
	require.Contains(t, c.Args, "--config=/etc/antrea/antrea-controller.conf")
	require.Equal(t, "/etc/antrea", c.VolumeMounts[0].MountPath)
	require.Equal(t, "antrea-proxy/antrea-controller:0.1.0", c.Image)
	require.True(t, *spec.SecurityContext.RunAsNonRoot)

	// The probes use the port antrea-controller serves /healthz and /readyz on.
	require.Contains(t, c.Args, "--bind-address=0.0.0.0:10351")
	require.Len(t, c.Ports, 1)
	require.Equal(t, int32(10351), c.Ports[0].ContainerPort)
	require.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path)
	require.Equal(t, c.Ports[0].Name, c.LivenessProbe.HTTPGet.Port.String())
	require.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path)
	require.Equal(t, c.Ports[0].Name, c.ReadinessProbe.HTTPGet.Port.String())
	moved := container(t, render(t, h, "--set", "controller.port=10999").deployment(t).Spec.Template.Spec, "antrea-controller")
	require.Contains(t, moved.Args, "--bind-address=0.0.0.0:10999")
	require.Equal(t, int32(10999), moved.Ports[0].ContainerPort)
}

// TestAntreaProxyValuesMatchConfig checks that values.yaml's antreaProxy section carries every
// option of antrea-agent.conf's antreaProxy section, and nothing else, but loadBalancerClass,
// which the chart sets from controller.loadBalancerClass so that agent and controller agree.
func TestAntreaProxyValuesMatchConfig(t *testing.T) {
	h := NewHelm(t)
	var values struct {
		AntreaProxy map[string]any `json:"antreaProxy"`
	}
	b, err := os.ReadFile(filepath.Join(h.ChartDir(), "values.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, &values))
	var got, want []string
	for k := range values.AntreaProxy {
		got = append(got, k)
	}
	typ := reflect.TypeFor[config.AntreaProxyConfig]()
	for i := range typ.NumField() {
		if k := strings.Split(typ.Field(i).Tag.Get("json"), ",")[0]; k != "loadBalancerClass" {
			want = append(want, k)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	require.Equal(t, want, got)
	// Antrea's own antreaProxy options are all there, proxyLoadBalancerIPs among them.
	for _, k := range []string{"enable", "proxyAll", "nodePortAddresses", "skipServices", "proxyLoadBalancerIPs", "serviceProxyName"} {
		require.Contains(t, got, k)
	}
}

// TestValuesDocumented checks values.yaml helm-docs style: every value has a "# --" comment, or
// is a mapping whose values all have one.
func TestValuesDocumented(t *testing.T) {
	h := NewHelm(t)
	b, err := os.ReadFile(filepath.Join(h.ChartDir(), "values.yaml"))
	require.NoError(t, err)
	undocumented := undocumentedValues(string(b))
	require.Empty(t, undocumented, "values without a \"# --\" comment")

	// And the schema knows every value (helm validates the defaults against it, too).
	var schema map[string]any
	sb, err := os.ReadFile(filepath.Join(h.ChartDir(), "values.schema.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(sb, &schema))
	require.Equal(t, false, schema["additionalProperties"])
}

var keyLine = regexp.MustCompile(`^(\s*)([A-Za-z][A-Za-z0-9]*):`)

// undocumentedValues returns the paths of values.yaml keys that are neither documented with a
// "# --" comment block right above them nor mappings of documented keys.
func undocumentedValues(values string) []string {
	type key struct {
		indent     int
		path       string
		documented bool
		children   []int
	}
	var keys []key
	var stack []int // indexes of open parents
	commentDoc := false
	for _, l := range strings.Split(values, "\n") {
		trimmed := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(trimmed, "# --"):
			commentDoc = true
			continue
		case strings.HasPrefix(trimmed, "#"):
			continue
		case trimmed == "":
			commentDoc = false
			continue
		}
		m := keyLine.FindStringSubmatch(l)
		if m == nil { // a list item or continuation line
			commentDoc = false
			continue
		}
		indent := len(m[1])
		for len(stack) > 0 && keys[stack[len(stack)-1]].indent >= indent {
			stack = stack[:len(stack)-1]
		}
		path := m[2]
		if len(stack) > 0 {
			parent := stack[len(stack)-1]
			path = keys[parent].path + "." + path
			keys[parent].children = append(keys[parent].children, len(keys))
		}
		keys = append(keys, key{indent: indent, path: path, documented: commentDoc})
		stack = append(stack, len(keys)-1)
		commentDoc = false
	}
	var bad []string
	var walk func(i int)
	walk = func(i int) {
		switch k := keys[i]; {
		case k.documented:
		case len(k.children) == 0:
			bad = append(bad, k.path)
		default:
			for _, c := range k.children {
				walk(c)
			}
		}
	}
	for i, k := range keys {
		if k.indent == 0 {
			walk(i)
		}
	}
	return bad
}

// runScript runs a repository script with bash and returns its combined output.
func runScript(root, script string, args ...string) (string, error) {
	cmd := exec.Command("bash", append([]string{filepath.Join(root, script)}, args...)...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// firstDifference describes the first line where two texts differ.
func firstDifference(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return fmt.Sprintf("first difference at line %d:\n  generated: %q\n  committed: %q", i+1, wl, gl)
		}
	}
	return "no difference"
}

// TestUndocumentedValuesDetector checks the checker TestValuesDocumented relies on.
func TestUndocumentedValuesDetector(t *testing.T) {
	got := undocumentedValues("a:\n  # -- documented\n  b: 1\n  c: 2\nd:\n  - x\n# -- documented,\n# over two lines\ne:\n  f: 1\n\n# -- a blank line ends the comment\n\ng: 1\n")
	require.Equal(t, []string{"a.c", "d", "g"}, got)
}
