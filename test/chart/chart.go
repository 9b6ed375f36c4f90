// Package chart renders the antrea-proxy Helm chart (build/charts/antrea-proxy) for tests, with
// the helm command built from the module pinned in hack/tools/helm (hack/build-helm.sh), and
// decodes the result into typed Kubernetes objects. Its own tests check the chart (lint, the
// rendered config files against the binaries' strict loaders, checksums, RBAC against the API
// calls the code makes, the generated manifest); test/e2e uses it for server-side dry runs.
package chart

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
)

// Release name and namespace of every rendering, as in build/yamls/antrea-proxy.yml.
const (
	ReleaseName = "antrea-proxy"
	Namespace   = "kube-system"
)

// Helm runs the pinned helm binary on the chart.
type Helm struct {
	// Root is the repository checkout; Bin is _output/bin/helm in it.
	Root, Bin string
}

// NewHelm builds helm with hack/build-helm.sh if it is missing or out of date (about two
// minutes once; an up-to-date check is instant) and returns it.
func NewHelm(t testing.TB) *Helm {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatalf("locating the repository: %v", err)
	}
	cmd := exec.Command("bash", filepath.Join(root, "hack", "build-helm.sh"))
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/build-helm.sh: %v\n%s", err, out)
	}
	return &Helm{Root: root, Bin: filepath.Join(root, "_output", "bin", "helm")}
}

// ChartDir is build/charts/antrea-proxy in the checkout.
func (h *Helm) ChartDir() string { return filepath.Join(h.Root, "build", "charts", "antrea-proxy") }

// Run runs helm with args in the checkout and returns its standard output; the error carries
// its standard error.
func (h *Helm) Run(args ...string) (string, error) {
	cmd := exec.Command(h.Bin, args...)
	cmd.Dir = h.Root
	// A private, empty helm home: nothing from the user's repositories or plugins is read.
	home := os.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(home, "helm-cache-antrea-proxy"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "helm-config-antrea-proxy"),
		"HELM_DATA_HOME="+filepath.Join(home, "helm-data-antrea-proxy"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// Template renders chartDir (the chart itself when "") as release ReleaseName in Namespace with
// extra helm arguments such as "--set", "antreaProxy.proxyLoadBalancerIPs=false".
func (h *Helm) Template(chartDir string, args ...string) (string, error) {
	if chartDir == "" {
		chartDir = h.ChartDir()
	}
	return h.Run(append([]string{"template", ReleaseName, chartDir, "--namespace", Namespace}, args...)...)
}

// MustTemplate is Template that fails the test on error.
func (h *Helm) MustTemplate(t testing.TB, args ...string) string {
	t.Helper()
	out, err := h.Template("", args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Documents splits a multi-document YAML stream into its non-empty documents.
func Documents(manifest string) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifest)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return docs, nil
			}
			return nil, fmt.Errorf("splitting the manifest: %w", err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) > 0 {
			docs = append(docs, doc)
		}
	}
}

// Decode decodes every document of manifest into a typed object of client-go's scheme, strictly:
// an unknown or duplicated field is an error naming the document.
func Decode(manifest string) ([]runtime.Object, error) {
	docs, err := Documents(manifest)
	if err != nil {
		return nil, err
	}
	s := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme,
		json.SerializerOptions{Yaml: true, Strict: true})
	objs := make([]runtime.Object, 0, len(docs))
	for i, d := range docs {
		obj, gvk, err := s.Decode(d, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("document %d (%s): %w", i, sourceOf(d), err)
		}
		if gvk.Kind == "" {
			return nil, fmt.Errorf("document %d (%s) has no kind", i, sourceOf(d))
		}
		objs = append(objs, obj)
	}
	return objs, nil
}

// sourceOf is the "# Source: <template>" comment helm puts on each document.
func sourceOf(doc []byte) string {
	for _, l := range strings.Split(string(doc), "\n") {
		if s, ok := strings.CutPrefix(strings.TrimSpace(l), "# Source: "); ok {
			return s
		}
	}
	return "no source comment"
}

func stripComments(doc []byte) []byte {
	var out []byte
	for _, l := range bytes.Split(doc, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(l), []byte("#")) {
			out = append(out, l...)
			out = append(out, '\n')
		}
	}
	return out
}

// modulePath is the main module, whose go.mod marks the checkout's root.
const modulePath = "github.com/antrea-proxy/antrea-proxy"

// RepoRoot finds the checkout by walking up from the working directory (go test runs a test in
// its package directory) to the go.mod of the main module.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && declaresModule(b) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of module %s above the working directory", modulePath)
		}
		dir = parent
	}
}

func declaresModule(gomod []byte) bool {
	for _, l := range strings.Split(string(gomod), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "module" {
			return f[1] == modulePath
		}
	}
	return false
}
