//go:build cluster

package cluster

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// UpstreamOptions configure a run of the upstream Kubernetes e2e suite (e2e.test of
// hack/build-e2e.sh) against a real cluster.
type UpstreamOptions struct {
	// Focus and Skip are ginkgo's regular expressions over the spec texts.
	Focus, Skip string
	// Procs is ginkgo's parallel process count.
	Procs int
	// Timeout bounds the whole suite (ginkgo --timeout).
	Timeout time.Duration
	// OutDir receives the suite's output (e2e.log), its JUnit report and summary.txt.
	OutDir string
	// IPMode is the LoadBalancer pool's ipMode: "VIP" (LBPool, announced by the nodes) or
	// "Proxy" (ProxyPool, relayed by ProxyLB).
	IPMode string
}

// Values of UpstreamOptions.IPMode.
const (
	IPModeVIP   = "VIP"
	IPModeProxy = "Proxy"
)

// Defaults fills what is unset: ipMode VIP; the Services and LoadBalancers specs of SIG Network
// (in Proxy mode the LoadBalancers specs only: the Services specs do not depend on the pool)
// without the disruptive, serial and flaky ones; four processes (the slow LoadBalancer specs
// mostly wait); two and a half hours.
func (o UpstreamOptions) Defaults() UpstreamOptions {
	if o.IPMode == "" {
		o.IPMode = IPModeVIP
	}
	if o.Focus == "" && o.IPMode == IPModeProxy {
		o.Focus = `\[sig-network\] LoadBalancers`
	}
	if o.Focus == "" {
		o.Focus = `\[sig-network\] (Services|LoadBalancers)`
	}
	if o.Skip == "" {
		o.Skip = `\[Disruptive\]|\[Serial\]|\[Flaky\]`
	}
	if o.Procs == 0 {
		o.Procs = 4
	}
	if o.Timeout == 0 {
		o.Timeout = 150 * time.Minute
	}
	return o
}

// Validate reports every problem of the options at once.
func (o UpstreamOptions) Validate() error {
	var errs []error
	for name, re := range map[string]string{"focus": o.Focus, "skip": o.Skip} {
		if _, err := regexp.Compile(re); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %w", name, re, err))
		}
	}
	if o.Procs < 1 {
		errs = append(errs, fmt.Errorf("procs %d: want at least 1", o.Procs))
	}
	if o.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("timeout %v: want a positive duration", o.Timeout))
	}
	if o.OutDir == "" {
		errs = append(errs, errors.New("no output directory"))
	}
	if o.IPMode != IPModeVIP && o.IPMode != IPModeProxy {
		errs = append(errs, fmt.Errorf("ipMode %q: want %q or %q", o.IPMode, IPModeVIP, IPModeProxy))
	}
	return errors.Join(errs...)
}

// UpstreamOptionsFromEnv reads UPSTREAM_E2E_FOCUS, UPSTREAM_E2E_SKIP, UPSTREAM_E2E_PROCS,
// UPSTREAM_E2E_TIMEOUT (a Go duration) and UPSTREAM_E2E_IPMODE over the defaults; outDir is the
// output directory.
func UpstreamOptionsFromEnv(outDir string) (UpstreamOptions, error) {
	o := UpstreamOptions{Focus: os.Getenv("UPSTREAM_E2E_FOCUS"), Skip: os.Getenv("UPSTREAM_E2E_SKIP"), OutDir: outDir,
		IPMode: os.Getenv("UPSTREAM_E2E_IPMODE")}
	var errs []error
	if v := os.Getenv("UPSTREAM_E2E_PROCS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("UPSTREAM_E2E_PROCS=%q: %w", v, err))
		}
		o.Procs = n
		if err == nil && n == 0 {
			o.Procs = -1 // an explicit 0 is an error, not the default
		}
	}
	if v := os.Getenv("UPSTREAM_E2E_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("UPSTREAM_E2E_TIMEOUT=%q: %w", v, err))
		}
		o.Timeout = d
		if err == nil && d == 0 {
			o.Timeout = -1
		}
	}
	o = o.Defaults()
	if err := o.Validate(); err != nil {
		errs = append(errs, err)
	}
	return o, errors.Join(errs...)
}

// externalClient is the address the host sends the suite's LoadBalancer traffic from: outside
// the nodes' /16, as a client outside the cluster is (the ExternalTrafficPolicy: Local specs take
// a source inside the first node's /16 for one a node SNATed). Only the host and the nodes' routes
// back to it know it.
var externalClient = netip.MustParsePrefix("10.124.0.1/32")

// AddExternalClient gives the host's underlay veth the externalClient address and every node a
// route back to it through the host.
func (c *Cluster) AddExternalClient() error {
	cmds := [][]string{{"ip", "addr", "replace", externalClient.String(), "dev", hostVeth}}
	for _, n := range c.Nodes {
		cmds = append(cmds, []string{"ip", "-n", n.Name, "route", "replace", externalClient.String(), "via", hostIP.String()})
	}
	return runAll(cmds...)
}

// RoutePodCIDRs routes every node's podCIDR from the host via the node's underlay address, as a
// control-plane machine of a real cluster reaches the Pod network: kube-apiserver's proxy to Pods
// and Services (which the suite uses to read Pod responses) dials Pod IPs from the host.
func (c *Cluster) RoutePodCIDRs(ctx context.Context) error { return c.routePodCIDRs(ctx) }

// RoutePodCIDRsFromSwitch routes every node's podCIDR from the switch namespace via the node, as
// a cloud network routes them: ProxyLB relays a Service without NodePorts to its endpoints.
func (c *Cluster) RoutePodCIDRsFromSwitch(ctx context.Context) error {
	return c.routePodCIDRs(ctx, "-n", switchNS)
}

// routePodCIDRs adds the routes with `ip <netns...> route replace`.
func (c *Cluster) routePodCIDRs(ctx context.Context, netns ...string) error {
	var cmds [][]string
	for _, n := range c.Nodes {
		node, err := c.CP.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cidr := range node.Spec.PodCIDRs {
			cmd := append(append([]string{"ip"}, netns...), "route", "replace", cidr, "via", n.IP.String())
			cmds = append(cmds, cmd)
		}
	}
	return runAll(cmds...)
}

// RouteIntoUnderlay routes a prefix from the host onto the underlay's link (on-link), from
// externalClient: a packet the host sends there (the suite's checks of LoadBalancer IPs) reaches
// the nodes' ARP answers or nothing, and never the host's default route.
func RouteIntoUnderlay(p netip.Prefix) error {
	return run("ip", "route", "replace", p.String(), "dev", hostVeth, "src", externalClient.Addr().String())
}

// repoList is the KUBE_TEST_REPO_LIST file: every registry the suite knows is the local
// localhost/antrea-proxy, so the one image the Services specs run (agnhost) is the one
// hack/images.sh built, and any other image fails to pull instead of being fetched.
func repoList() string {
	keys := []string{"promoterE2eRegistry", "buildImageRegistry", "invalidRegistry", "gcEtcdRegistry",
		"gcRegistry", "sigStorageRegistry", "privateRegistry", "dockerLibraryRegistry", "cloudProviderGcpRegistry"}
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: localhost/antrea-proxy\n", k)
	}
	return b.String()
}

// SpecResult is one spec of the run.
type SpecResult struct {
	Name    string
	State   string // passed, failed or skipped
	Seconds float64
	Message string // the failure or skip message, first line
}

type junitSuites struct {
	Suites []struct {
		Cases []struct {
			Name    string  `xml:"name,attr"`
			Time    float64 `xml:"time,attr"`
			Skipped *struct {
				Message string `xml:"message,attr"`
			} `xml:"skipped"`
			Failure *struct {
				Message string `xml:"message,attr"`
			} `xml:"failure"`
			Error *struct {
				Message string `xml:"message,attr"`
			} `xml:"error"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

// ParseJUnit reads the suite's JUnit report and keeps the specs that focus selects and skip
// does not (the report lists every spec of e2e.test, the filtered ones as skipped). The names
// lose ginkgo's "[It] " prefix.
func ParseJUnit(data []byte, focus, skip string) ([]SpecResult, error) {
	var js junitSuites
	if err := xml.Unmarshal(data, &js); err != nil {
		return nil, err
	}
	fre, sre := regexp.MustCompile(focus), regexp.MustCompile(skip)
	var out []SpecResult
	for _, s := range js.Suites {
		for _, c := range s.Cases {
			if !fre.MatchString(c.Name) || sre.MatchString(c.Name) {
				continue
			}
			r := SpecResult{Name: strings.TrimPrefix(c.Name, "[It] "), State: "passed", Seconds: c.Time}
			switch {
			case c.Failure != nil:
				r.State, r.Message = "failed", c.Failure.Message
			case c.Error != nil:
				r.State, r.Message = "failed", c.Error.Message
			case c.Skipped != nil:
				r.State, r.Message = "skipped", c.Skipped.Message
			}
			r.Message, _, _ = strings.Cut(strings.TrimSpace(r.Message), "\n")
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Summary is "N passed, N failed, N skipped" and one line per spec.
func Summary(results []SpecResult) string {
	count := map[string]int{}
	var b strings.Builder
	for _, r := range results {
		count[r.State]++
		fmt.Fprintf(&b, "%-7s %7.1fs  %s", strings.ToUpper(r.State), r.Seconds, r.Name)
		if r.State != "passed" && r.Message != "" {
			fmt.Fprintf(&b, "\n                  %s", r.Message)
		}
		b.WriteString("\n")
	}
	return fmt.Sprintf("%d passed, %d failed, %d skipped\n%s", count["passed"], count["failed"], count["skipped"], b.String())
}

// upstreamArgs are ginkgo's arguments for a run of e2e.test against the kubeconfig of a cluster
// of nodes nodes. --num-nodes: only ginkgo's first process detects the node count, the others
// would skip the specs that need two nodes ("Requires at least 2 nodes (not -1)").
func upstreamArgs(o UpstreamOptions, e2eTest, kubeconfig string, nodes int) []string {
	return []string{
		"--procs=" + strconv.Itoa(o.Procs), "--timeout=" + o.Timeout.String(), "--no-color",
		"--focus=" + o.Focus, "--skip=" + o.Skip,
		e2eTest, "--",
		"--kubeconfig=" + kubeconfig,
		"--provider=skeleton",
		"--num-nodes=" + strconv.Itoa(nodes),
		"--disable-log-dump",
		"--prepull-images=false",
		"--report-dir=" + o.OutDir,
	}
}

// upstreamOutDir is _output/upstream-e2e/<UTC time>.
func upstreamOutDir(root string, now time.Time) string {
	return filepath.Join(root, "_output", "upstream-e2e", now.UTC().Format("20060102T150405Z"))
}

// ProxyPool is the cluster's LoadBalancer pool of ipMode Proxy (UPSTREAM_E2E_IPMODE=Proxy): the
// switch namespace owns it, and ProxyLB there relays its addresses to the nodes.
var ProxyPool = netip.MustParsePrefix("192.168.241.0/28")

// RouteProxyPool makes the switch namespace own every address of p (a local route), gives it a
// route back to externalClient, and routes p from the host via the switch, from externalClient:
// the host's and the nodes' packets to p reach the switch's ProxyLB or are refused there.
func RouteProxyPool(p netip.Prefix) error {
	return runAll(
		[]string{"ip", "-n", switchNS, "route", "replace", "local", p.String(), "dev", "lo"},
		[]string{"ip", "-n", switchNS, "route", "replace", externalClient.String(), "via", hostIP.String()},
		[]string{"ip", "route", "replace", p.String(), "via", switchIP.String(), "dev", hostVeth, "src", externalClient.Addr().String()},
	)
}
