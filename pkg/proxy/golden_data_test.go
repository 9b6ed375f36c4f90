package proxy

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/yaml"

	"github.com/antrea-proxy/antrea-proxy/pkg/model"
)

// A golden data file (testdata/golden/<case>.yaml) is one case: YAML documents separated by
// "---". The first is the case's header (goldenHeader: what it shows and the proxier options
// it changes); then the Kubernetes objects the proxier is fed, each with its apiVersion and
// kind: at most one Node (this node; the default one without it), one Service, its
// EndpointSlices; the last document is the expected dump ("expected: |", the bridge's groups
// and flows with table and register names), which -update rewrites. Every document is decoded
// strictly: an unknown field fails the test.

// expectedMarker starts the last document of a golden data file.
const expectedMarker = "---\nexpected: |\n"

// goldenHeader is the first document of a golden data file.
type goldenHeader struct {
	// Description says what the case shows.
	Description string        `json:"description"`
	Options     goldenOptions `json:"options,omitempty"`
}

// goldenOptions are the changes to testOptions a case makes.
type goldenOptions struct {
	// GatewayIPv6, when set, serves IPv6 too with this gateway address.
	GatewayIPv6 string `json:"gatewayIPv6,omitempty"`
	// SkipIPs are ClusterIPs of skipped Services (antreaProxy.skipServices).
	SkipIPs []string `json:"skipIPs,omitempty"`
	// ServiceCIDRs are set (SetServiceCIDRs) before the sync.
	ServiceCIDRs []string `json:"serviceCIDRs,omitempty"`
	// RejectMeters and AffinityFlowsPerService turn the pipeline's rate limits on.
	RejectMeters            uint32 `json:"rejectMeters,omitempty"`
	AffinityFlowsPerService uint32 `json:"affinityFlowsPerService,omitempty"`
}

// goldenExpected is the last document of a golden data file.
type goldenExpected struct {
	Expected string `json:"expected"`
}

// goldenFile is a decoded golden data file.
type goldenFile struct {
	path   string
	header goldenHeader
	node   *v1.Node
	svc    *v1.Service
	slices []*discovery.EndpointSlice
	// expected is the expected dump; body is the file's text before its expected document.
	expected, body string
}

// loadGoldenFiles reads every golden data file of dir, by name.
func loadGoldenFiles(t *testing.T, dir string) []goldenFile {
	t.Helper()
	files, err := readGoldenFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func readGoldenFiles(dir string) ([]goldenFile, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(paths) == 0 {
		return nil, fmt.Errorf("no golden data files in %s (%v)", dir, err)
	}
	slices.Sort(paths)
	out := make([]goldenFile, 0, len(paths))
	for _, p := range paths {
		text, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		gf, err := parseGoldenFile(p, string(text))
		if err != nil {
			return nil, err
		}
		out = append(out, gf)
	}
	return out, nil
}

// parseGoldenFile decodes the text of a golden data file strictly.
func parseGoldenFile(path, text string) (goldenFile, error) {
	gf := goldenFile{path: path}
	i := strings.LastIndex(text, expectedMarker)
	if i < 0 {
		return gf, fmt.Errorf("%s: no last document %q", path, strings.TrimSpace(expectedMarker))
	}
	gf.body = text[:i]
	var exp goldenExpected
	if err := yaml.UnmarshalStrict([]byte(text[i+len("---\n"):]), &exp); err != nil {
		return gf, fmt.Errorf("%s: expected document: %w", path, err)
	}
	gf.expected = exp.Expected
	docs := strings.Split(strings.TrimPrefix(gf.body, "---\n"), "\n---\n")
	if err := yaml.UnmarshalStrict([]byte(docs[0]), &gf.header); err != nil {
		return gf, fmt.Errorf("%s: header document: %w", path, err)
	}
	for n, doc := range docs[1:] {
		if err := gf.addObject(doc); err != nil {
			return gf, fmt.Errorf("%s: document %d: %w", path, n+2, err)
		}
	}
	if gf.svc == nil {
		return gf, fmt.Errorf("%s: no Service", path)
	}
	return gf, nil
}

// addObject decodes one Kubernetes object document by its apiVersion and kind.
func (gf *goldenFile) addObject(doc string) error {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
		return err
	}
	switch tm.APIVersion + " " + tm.Kind {
	case "v1 Node":
		if gf.node != nil {
			return fmt.Errorf("a second Node")
		}
		gf.node = &v1.Node{}
		return yaml.UnmarshalStrict([]byte(doc), gf.node)
	case "v1 Service":
		if gf.svc != nil {
			return fmt.Errorf("a second Service")
		}
		gf.svc = &v1.Service{}
		return yaml.UnmarshalStrict([]byte(doc), gf.svc)
	case "discovery.k8s.io/v1 EndpointSlice":
		s := &discovery.EndpointSlice{}
		gf.slices = append(gf.slices, s)
		return yaml.UnmarshalStrict([]byte(doc), s)
	}
	return fmt.Errorf("unsupported object %q %q", tm.APIVersion, tm.Kind)
}

// goldenCase is the case the file describes, for the harness.
func (gf *goldenFile) goldenCase() goldenCase {
	o := gf.header.Options
	var cidrs []netip.Prefix
	for _, c := range o.ServiceCIDRs {
		cidrs = append(cidrs, netip.MustParsePrefix(c))
	}
	eps := gf.slices
	return goldenCase{
		name:   strings.TrimSuffix(filepath.Base(gf.path), ".yaml"),
		svc:    gf.svc,
		node:   gf.node,
		slices: func(*v1.Service) []*discovery.EndpointSlice { return eps },
		cidrs:  cidrs,
		opts: func(opts *Options) {
			if o.GatewayIPv6 != "" {
				opts.Families.IPv6, opts.GatewayIPv6 = true, netip.MustParseAddr(o.GatewayIPv6)
			}
			if len(o.SkipIPs) > 0 {
				ips := sets.New[netip.Addr]()
				for _, ip := range o.SkipIPs {
					ips.Insert(netip.MustParseAddr(ip))
				}
				opts.Skip = model.SkipSet{IPs: ips}
			}
			opts.RejectMeters, opts.AffinityFlowsPerService = o.RejectMeters, o.AffinityFlowsPerService
		},
	}
}

// check compares got with the file's expected dump, or with -update rewrites the expected
// document (and nothing else) to got.
func (gf *goldenFile) check(t *testing.T, got string) {
	t.Helper()
	if *update {
		var b strings.Builder
		b.WriteString(gf.body)
		b.WriteString(expectedMarker)
		for _, line := range strings.SplitAfter(got, "\n") {
			if line != "" {
				b.WriteString("  " + line)
			}
		}
		if err := os.WriteFile(gf.path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if gf.expected != got {
		t.Errorf("%s: the dump differs from the expected document (-want +got):\n%s", gf.path, cmp.Diff(gf.expected, got))
	}
}
