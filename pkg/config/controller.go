package config

// This file holds the schema of antrea-controller.conf, the YAML file that
// configures antrea-controller (the LoadBalancer IP provider). Loading
// follows the same three steps as antrea-agent.conf (strict decode,
// defaults, validate; see the package documentation) and reports errors
// with the same types (*UnknownFieldError, *FieldError).

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"reflect"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// Defaults applied by ControllerConfig.Defaults.
const (
	DefaultLoadBalancerClass = "antrea-proxy.io/lb"
	DefaultLeaseName         = "antrea-controller"
	DefaultLeaseNamespace    = "kube-system"
	DefaultLeaseDuration     = 15 * time.Second
	DefaultRenewDeadline     = 10 * time.Second
	DefaultRetryPeriod       = 2 * time.Second
	// DefaultControllerBindAddress is where antrea-controller serves
	// /healthz, /readyz and /metrics.
	DefaultControllerBindAddress = "0.0.0.0:10351"
	// DefaultReleaseGracePeriod is how long the address of a deleted
	// Service stays reserved for a Service of the same namespace and name.
	DefaultReleaseGracePeriod = 5 * time.Minute
)

// Values of IPPool.IPMode, spelled as the Service status field
// status.loadBalancer.ingress[].ipMode (KEP-1860).
const (
	IPModeVIP   = "VIP"
	IPModeProxy = "Proxy"
)

// leaderElectionJitter is client-go's leaderelection.JitterFactor: the
// renew deadline must exceed retryPeriod times this factor.
const leaderElectionJitter = 1.2

// ControllerConfig is the content of antrea-controller.conf.
type ControllerConfig struct {
	// Kubeconfig is the path of a kubeconfig file; "" means in-cluster config.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// KubeAPIServerOverride, when set, is the kube-apiserver to talk to instead of the server of
	// the kubeconfig or of the in-cluster configuration (the kubernetes Service's ClusterIP):
	// "https://host:port", or host or host:port (https). Needed where no kube-proxy runs,
	// since the ClusterIP works only once an agent programmed it. Default "".
	KubeAPIServerOverride string `json:"kubeAPIServerOverride,omitempty"`
	// LoadBalancerClass is the spec.loadBalancerClass this controller
	// handles, besides Services without a class. Default "antrea-proxy.io/lb".
	LoadBalancerClass string `json:"loadBalancerClass,omitempty"`
	// BindAddress is the IP:port where /healthz, /readyz and /metrics
	// are served (plain HTTP). Default "0.0.0.0:10351"; port 0 picks a
	// free port (logged).
	BindAddress string `json:"bindAddress,omitempty"`
	// LeaderElection makes sure only one replica writes.
	LeaderElection LeaderElectionConfig `json:"leaderElection"`
	// ReleaseGracePeriod is how long an address a deleted Service held
	// stays reserved for a Service of the same namespace and name: no other
	// Service gets it meanwhile, and that Service gets it back when it is
	// re-created. Default 5m; "0s" turns the reservation off.
	ReleaseGracePeriod *Duration `json:"releaseGracePeriod,omitempty"`
	// AnnouncerLeases decides which nodes may announce VIP-mode addresses from the agents'
	// announcer Leases (see AnnouncerLeasesConfig).
	AnnouncerLeases AnnouncerLeasesConfig `json:"announcerLeases"`
	// IPPools are the address pools, in the order automatic allocation
	// tries them. None means that no Service gets an address (each reports
	// why in its LoadBalancerServing condition).
	IPPools []IPPool `json:"ipPools"`
}

// LeaderElectionConfig configures the Lease-based leader election.
type LeaderElectionConfig struct {
	// Enable turns leader election on. Default true; see Enabled.
	Enable *bool `json:"enable,omitempty"`
	// LeaseName is the name of the coordination.k8s.io Lease. Default
	// "antrea-controller".
	LeaseName string `json:"leaseName,omitempty"`
	// LeaseNamespace is the namespace of the Lease. Default "kube-system".
	LeaseNamespace string `json:"leaseNamespace,omitempty"`
	// LeaseDuration is how long non-leaders wait before taking over.
	// Default 15s.
	LeaseDuration Duration `json:"leaseDuration"`
	// RenewDeadline is how long the leader keeps retrying to renew before
	// giving up leadership. Default 10s.
	RenewDeadline Duration `json:"renewDeadline"`
	// RetryPeriod is the time between attempts. Default 2s.
	RetryPeriod Duration `json:"retryPeriod"`
}

// Enabled reports whether leader election is on (default true).
func (l LeaderElectionConfig) Enabled() bool { return boolOr(l.Enable, true) }

// IPPool is one pool of LoadBalancer addresses.
type IPPool struct {
	// Name identifies the pool, e.g. in the antrea-proxy.io/lb-pool
	// annotation. A DNS-1123 label, unique among pools.
	Name string `json:"name"`
	// CIDRs are prefixes such as "10.0.10.0/24" or "fd00:10::/120". The
	// network address (and, for IPv4, the broadcast address) of a prefix
	// is never handed out.
	CIDRs []string `json:"cidrs"`
	// Ranges are inclusive ranges "first-last" of one family, such as
	// "10.0.20.10-10.0.20.19" or "fd00:20::10-fd00:20::1f".
	Ranges []string `json:"ranges"`
	// IPMode is "VIP" (default: nodes receive the traffic to the address
	// and one node announces it) or "Proxy" (an external proxy in front of
	// the cluster receives it; nodes never announce it).
	IPMode string `json:"ipMode,omitempty"`
	// NodeSelector restricts the nodes that may announce the pool's
	// addresses (VIP pools only); nil means every node.
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`
	// Namespaces and NamespaceSelector restrict the pool to the Services
	// of the listed namespaces or of the namespaces whose labels match the
	// selector (either suffices); both unset means every namespace.
	Namespaces        []string              `json:"namespaces,omitempty"`
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	// ServiceSelector restricts the pool to the Services whose labels
	// match it; nil means every Service. A Service the pool is not for
	// cannot get its addresses, even by naming the pool or an address.
	ServiceSelector *metav1.LabelSelector `json:"serviceSelector,omitempty"`
	// AutoAssign: when false, the pool is used only for Services that name
	// it (antrea-proxy.io/lb-pool) or request one of its addresses.
	// Default true; see AutoAssigns.
	AutoAssign *bool `json:"autoAssign,omitempty"`
	// AllowCrossNamespaceSharing lets Services of different namespaces
	// share one of the pool's addresses (same antrea-proxy.io/allow-shared-ip
	// key, no clashing port). Default false: only Services of one
	// namespace share an address.
	AllowCrossNamespaceSharing bool `json:"allowCrossNamespaceSharing,omitempty"`
	// ProxyEnforcesSourceRanges (ipMode Proxy only) states that the external proxy in front of
	// the pool's addresses enforces a Service's loadBalancerSourceRanges, as cloud load
	// balancers do. Default false: the controller cannot enforce source ranges on an address
	// the proxy receives, so it refuses Services that set them (LoadBalancerSourceRanges).
	ProxyEnforcesSourceRanges bool `json:"proxyEnforcesSourceRanges,omitempty"`
}

// AutoAssigns reports whether automatic allocation uses the pool (default true).
func (p IPPool) AutoAssigns() bool { return boolOr(p.AutoAssign, true) }

// IPRange is an inclusive range of addresses of one family.
type IPRange struct {
	First, Last netip.Addr
}

// Contains reports whether a lies in r.
func (r IPRange) Contains(a netip.Addr) bool {
	a = a.Unmap()
	return r.First.BitLen() == a.BitLen() && r.First.Compare(a) <= 0 && a.Compare(r.Last) <= 0
}

func (r IPRange) overlaps(o IPRange) bool {
	return r.First.BitLen() == o.First.BitLen() && r.First.Compare(o.Last) <= 0 && o.First.Compare(r.Last) <= 0
}

func (r IPRange) String() string { return r.First.String() + "-" + r.Last.String() }

// ParseIPRange parses "first-last" (both of one family, first <= last).
// IPv4-mapped IPv6 addresses are unmapped.
func ParseIPRange(s string) (IPRange, error) {
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		return IPRange{}, fmt.Errorf("%q is not a range \"first-last\"", s)
	}
	first, err1 := netip.ParseAddr(strings.TrimSpace(a))
	last, err2 := netip.ParseAddr(strings.TrimSpace(b))
	switch {
	case err1 != nil || err2 != nil:
		return IPRange{}, fmt.Errorf("%q is not a range \"first-last\" of two IP addresses", s)
	case first.Zone() != "" || last.Zone() != "":
		return IPRange{}, fmt.Errorf("%q: addresses must not have a zone", s)
	}
	first, last = first.Unmap(), last.Unmap()
	switch {
	case first.Is4() != last.Is4():
		return IPRange{}, fmt.Errorf("%q mixes IPv4 and IPv6", s)
	case last.Less(first):
		return IPRange{}, fmt.Errorf("%q: first address is after last address", s)
	}
	return IPRange{First: first, Last: last}, nil
}

// CIDRRange returns the usable addresses of a prefix: all but the network
// address, and for IPv4 also the broadcast address. /32, /31, /128 and
// /127 prefixes keep all their addresses.
func CIDRRange(p netip.Prefix) IPRange {
	p = p.Masked()
	first := p.Addr()
	hostBits := first.BitLen() - p.Bits()
	last := lastAddr(p)
	if hostBits >= 2 {
		first = first.Next()
		if first.Is4() {
			last = last.Prev()
		}
	}
	return IPRange{First: first, Last: last}
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 1 << (7 - i%8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// AddressRanges returns the pool's CIDRs and ranges as IPRanges, CIDRs
// first, in file order.
func (p IPPool) AddressRanges() ([]IPRange, error) {
	var out []IPRange
	var errs []error
	for i, s := range p.CIDRs {
		pfx, err := netip.ParsePrefix(s)
		if err != nil || pfx.Addr().Zone() != "" || pfx.Addr().Is4In6() {
			errs = append(errs, fieldErr(fmt.Sprintf("cidrs[%d]", i), "%q is not a valid CIDR", s))
			continue
		}
		out = append(out, CIDRRange(pfx))
	}
	for i, s := range p.Ranges {
		r, err := ParseIPRange(s)
		if err != nil {
			errs = append(errs, fieldErr(fmt.Sprintf("ranges[%d]", i), "%v", err))
			continue
		}
		if mappedRange(s) {
			errs = append(errs, fieldErr(fmt.Sprintf("ranges[%d]", i),
				"pool %q: %q: IPv4-mapped IPv6 addresses are not allowed; write the IPv4 address", p.Name, s))
			continue
		}
		out = append(out, r)
	}
	return out, errors.Join(errs...)
}

// LoadController reads the antrea-controller.conf at path; see ParseController.
func LoadController(path string) (*ControllerConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading antrea-controller config: %w", err)
	}
	c, err := ParseController(data)
	if err != nil {
		return nil, fmt.Errorf("loading antrea-controller config %s: %w", path, err)
	}
	return c, nil
}

// ParseController decodes antrea-controller.conf content strictly (unknown
// keys and values of the wrong type are errors naming the key's full path),
// applies the defaults and validates. All decode problems, or else all
// validation problems, are reported together.
func ParseController(data []byte) (*ControllerConfig, error) {
	c, err := decodeController(data)
	if err != nil {
		return nil, err
	}
	c.Defaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

func decodeController(data []byte) (*ControllerConfig, error) {
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("parsing antrea-controller config as YAML: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var generic any
	if err := dec.Decode(&generic); err != nil {
		return nil, fmt.Errorf("parsing antrea-controller config: %w", err)
	}
	var errs []error
	checkTree("", generic, reflect.TypeFor[ControllerConfig](), &errs)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	c := &ControllerConfig{}
	dec = json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(c); err != nil {
		return nil, fmt.Errorf("decoding antrea-controller config: %w", err)
	}
	return c, nil
}

// checkTree is checkValue extended with string-keyed maps (such as a
// LabelSelector's matchLabels): it walks pointers, structs, lists and maps
// itself and hands every leaf to checkValue.
func checkTree(path string, v any, t reflect.Type, errs *[]error) {
	if v == nil {
		return
	}
	if t == reflect.TypeFor[Duration]() {
		checkValue(path, v, t, errs)
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		checkTree(path, v, t.Elem(), errs)
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			*errs = append(*errs, fieldErr(path, "expected a mapping, got %s", describe(v)))
			return
		}
		fields := jsonFields(t)
		for _, k := range sortedKeys(m) {
			sub := joinPath(path, k)
			f, ok := fields[k]
			if !ok {
				*errs = append(*errs, &UnknownFieldError{Path: sub, Suggestion: suggest(k, fields)})
				continue
			}
			checkTree(sub, m[k], f, errs)
		}
	case reflect.Slice:
		list, ok := v.([]any)
		if !ok {
			*errs = append(*errs, fieldErr(path, "expected a list, got %s", describe(v)))
			return
		}
		for i, e := range list {
			checkTree(fmt.Sprintf("%s[%d]", path, i), e, t.Elem(), errs)
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok || t.Key().Kind() != reflect.String {
			*errs = append(*errs, fieldErr(path, "expected a mapping, got %s", describe(v)))
			return
		}
		for _, k := range sortedKeys(m) {
			checkTree(joinPath(path, k), m[k], t.Elem(), errs)
		}
	default:
		checkValue(path, v, t, errs)
	}
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Defaults fills every unset field of c with its default.
func (c *ControllerConfig) Defaults() {
	setString(&c.LoadBalancerClass, DefaultLoadBalancerClass)
	setString(&c.BindAddress, DefaultControllerBindAddress)
	l := &c.LeaderElection
	setBool(&l.Enable, true)
	setString(&l.LeaseName, DefaultLeaseName)
	setString(&l.LeaseNamespace, DefaultLeaseNamespace)
	setDuration(&l.LeaseDuration, DefaultLeaseDuration)
	setDuration(&l.RenewDeadline, DefaultRenewDeadline)
	setDuration(&l.RetryPeriod, DefaultRetryPeriod)
	if c.ReleaseGracePeriod == nil {
		c.ReleaseGracePeriod = &Duration{Duration: DefaultReleaseGracePeriod}
	}
	c.AnnouncerLeases.defaults()
	if c.IPPools == nil {
		c.IPPools = []IPPool{}
	}
	for i := range c.IPPools {
		setString(&c.IPPools[i].IPMode, IPModeVIP)
		setBool(&c.IPPools[i].AutoAssign, true)
	}
}

// validateLoadBalancerClass checks that class is a valid spec.loadBalancerClass (a qualified
// name prefixed with a domain), as both antrea-controller and antrea-agent require.
func validateLoadBalancerClass(path, class string) error {
	if msgs := validation.IsQualifiedName(class); len(msgs) > 0 {
		return fieldErr(path, "%q is not a valid class: %s", class, strings.Join(msgs, "; "))
	}
	if !strings.Contains(class, "/") {
		return fieldErr(path, "%q must be prefixed with a domain, e.g. %q", class, DefaultLoadBalancerClass)
	}
	return nil
}

// Validate checks c, which should already have its defaults, and reports
// every problem at once (errors.Join of *FieldError), or nil.
func (c *ControllerConfig) Validate() error {
	var errs []error
	if err := validateAPIServerOverride(c.KubeAPIServerOverride); err != nil {
		errs = append(errs, err)
	}
	if err := validateLoadBalancerClass("loadBalancerClass", c.LoadBalancerClass); err != nil {
		errs = append(errs, err)
	}
	if _, err := netip.ParseAddrPort(c.BindAddress); err != nil {
		errs = append(errs, fieldErr("bindAddress", "%q is not an IP:port", c.BindAddress))
	}
	errs = append(errs, c.LeaderElection.validate("leaderElection")...)
	if err := c.AnnouncerLeases.validate(); err != nil {
		errs = append(errs, err)
	}
	if g := c.ReleaseGracePeriod; g != nil && g.Duration < 0 {
		errs = append(errs, fieldErr("releaseGracePeriod", "must be >= 0, got %v", g.Duration))
	}
	type seenRange struct {
		path string
		r    IPRange
	}
	var seen []seenRange
	names := map[string]int{}
	for i, p := range c.IPPools {
		path := fmt.Sprintf("ipPools[%d]", i)
		if p.Name == "" {
			errs = append(errs, fieldErr(path+".name", "required"))
		} else if msgs := validation.IsDNS1123Label(p.Name); len(msgs) > 0 {
			errs = append(errs, fieldErr(path+".name", "%q is not a valid pool name: %s", p.Name, strings.Join(msgs, "; ")))
		} else if j, dup := names[p.Name]; dup {
			errs = append(errs, fieldErr(path+".name", "%q is already the name of ipPools[%d]", p.Name, j))
		} else {
			names[p.Name] = i
		}
		switch p.IPMode {
		case IPModeVIP:
			if p.ProxyEnforcesSourceRanges {
				errs = append(errs, fieldErr(path+".proxyEnforcesSourceRanges", "only applies to ipMode %q: the nodes enforce a VIP address's source ranges", IPModeProxy))
			}
		case IPModeProxy:
			if p.NodeSelector != nil {
				errs = append(errs, fieldErr(path+".nodeSelector", "only applies to ipMode %q: nodes never announce %q addresses", IPModeVIP, IPModeProxy))
			}
		default:
			errs = append(errs, fieldErr(path+".ipMode", "%q must be %q or %q", p.IPMode, IPModeVIP, IPModeProxy))
		}
		errs = append(errs, p.validateScope(path)...)
		if len(p.CIDRs) == 0 && len(p.Ranges) == 0 {
			errs = append(errs, fieldErr(path, "needs at least one entry in cidrs or ranges"))
		}
		ranges, err := p.AddressRanges()
		errs = append(errs, prefixFieldErrors(path, err)...)
		special := p.specialRanges(path)
		errs = append(errs, special...)
		for _, r := range ranges {
			if len(special) > 0 && p.isSpecial(r) {
				continue // reported above; overlaps would only repeat it
			}
			for _, s := range seen {
				if s.r.overlaps(r) {
					errs = append(errs, fieldErr(path, "%s overlaps %s of %s", r, s.r, s.path))
				}
			}
			seen = append(seen, seenRange{path: path, r: r})
		}
	}
	return errors.Join(errs...)
}

func (l *LeaderElectionConfig) validate(path string) []error {
	var errs []error
	if msgs := validation.IsDNS1123Subdomain(l.LeaseName); len(msgs) > 0 {
		errs = append(errs, fieldErr(path+".leaseName", "%q is not a valid Lease name: %s", l.LeaseName, strings.Join(msgs, "; ")))
	}
	if msgs := validation.IsDNS1123Label(l.LeaseNamespace); len(msgs) > 0 {
		errs = append(errs, fieldErr(path+".leaseNamespace", "%q is not a valid namespace: %s", l.LeaseNamespace, strings.Join(msgs, "; ")))
	}
	lease, renew, retry := l.LeaseDuration.Duration, l.RenewDeadline.Duration, l.RetryPeriod.Duration
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"leaseDuration", lease}, {"renewDeadline", renew}, {"retryPeriod", retry}} {
		if d.v <= 0 {
			errs = append(errs, fieldErr(path+"."+d.name, "must be > 0, got %v", d.v))
		}
	}
	if lease <= 0 || renew <= 0 || retry <= 0 {
		return errs
	}
	if lease <= renew {
		errs = append(errs, fieldErr(path+".renewDeadline", "%v must be < leaseDuration (%v)", renew, lease))
	}
	if float64(renew) <= leaderElectionJitter*float64(retry) {
		errs = append(errs, fieldErr(path+".retryPeriod", "%v is too long for renewDeadline %v (must be < renewDeadline/%.1f)", retry, renew, leaderElectionJitter))
	}
	return errs
}

// prefixFieldErrors flattens err (an errors.Join of *FieldError) and puts
// path in front of each error's path.
func prefixFieldErrors(path string, err error) []error {
	if err == nil {
		return nil
	}
	var out []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			out = append(out, prefixFieldErrors(path, e)...)
		}
		return out
	}
	var fe *FieldError
	if errors.As(err, &fe) {
		return []error{&FieldError{Path: joinPath(path, fe.Path), Reason: fe.Reason}}
	}
	return []error{fieldErr(path, "%v", err)}
}
