package config

import (
	"errors"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Defaults of the agent's announcer section.
const (
	DefaultAnnouncerLeaseNamespace = DefaultLeaseNamespace
	DefaultAnnouncerLeaseDuration  = 2 * time.Second
	DefaultAnnouncerRenewInterval  = 500 * time.Millisecond
	DefaultAnnouncerIdleRenew      = 5 * time.Second
	DefaultAnnouncerHandover       = 5 * time.Second
	DefaultAnnouncerGratuitous     = 30 * time.Second
)

// AnnouncerConfig is the announcer section of antrea-agent.conf: how this node holds the
// VIP-mode LoadBalancer IPs antrea-controller assigns it (docs/design/failure-handling.md).
type AnnouncerConfig struct {
	// EnableLease makes the agent renew its announcer Lease (antrea-proxy-announcer-<node>,
	// coordination.k8s.io) while it is healthy (KEP-3836: synced, and the Node not tainted for
	// deletion), announce only while the Lease is valid, and release it at shutdown. The
	// controller's announcerLeases.enable must match. Default true.
	EnableLease *bool `json:"enableLease,omitempty"`
	// LeaseNamespace is the Lease's namespace, the controller's announcerLeases.namespace.
	// Default "kube-system".
	LeaseNamespace string `json:"leaseNamespace"`
	// LeaseDuration is how long the controller waits after the last renewal before it moves
	// the node's addresses (whole seconds, at least 1s). Default 2s.
	LeaseDuration Duration `json:"leaseDuration"`
	// RenewInterval is the time between renewals; at most half of LeaseDuration. Default 500ms.
	RenewInterval Duration `json:"renewInterval"`
	// IdleRenewInterval is the time between renewals while the node announces no address; such
	// a renewal writes a Lease duration of twice the interval (whole seconds, at least
	// LeaseDuration). A node that is assigned an address renews at once and then every
	// RenewInterval with LeaseDuration. Default 5s; "0s" renews every RenewInterval always.
	IdleRenewInterval *Duration `json:"idleRenewInterval,omitempty"`
	// HandoverTimeout bounds how long a stopping agent keeps answering for its addresses while
	// the controller moves them, after releasing its Lease. Default 5s; "0s" withdraws at once.
	HandoverTimeout *Duration `json:"handoverTimeout,omitempty"`
	// GratuitousInterval repeats a gratuitous ARP/unsolicited NA for every announced address at
	// this interval, for switches and routers that forgot it. Default 30s; "0s" sends them only
	// when an address is taken over.
	GratuitousInterval *Duration `json:"gratuitousInterval,omitempty"`
}

// Gratuitous returns GratuitousInterval (default DefaultAnnouncerGratuitous).
func (a AnnouncerConfig) Gratuitous() time.Duration {
	if a.GratuitousInterval == nil {
		return DefaultAnnouncerGratuitous
	}
	return a.GratuitousInterval.Duration
}

// IdleRenew returns IdleRenewInterval (default DefaultAnnouncerIdleRenew).
func (a AnnouncerConfig) IdleRenew() time.Duration {
	if a.IdleRenewInterval == nil {
		return DefaultAnnouncerIdleRenew
	}
	return a.IdleRenewInterval.Duration
}

// IdleLeaseDuration is the Lease duration an idle renewal writes: twice IdleRenew, rounded up
// to whole seconds, at least LeaseDuration.
func (a AnnouncerConfig) IdleLeaseDuration() time.Duration {
	d := (2*a.IdleRenew() + time.Second - 1).Truncate(time.Second)
	return max(d, a.LeaseDuration.Duration)
}

// LeaseEnabled reports whether the announcer Lease is on (default true).
func (a AnnouncerConfig) LeaseEnabled() bool { return boolOr(a.EnableLease, true) }

// Handover returns HandoverTimeout (default DefaultAnnouncerHandover).
func (a AnnouncerConfig) Handover() time.Duration {
	if a.HandoverTimeout == nil {
		return DefaultAnnouncerHandover
	}
	return a.HandoverTimeout.Duration
}

func (a *AnnouncerConfig) defaults() {
	setBool(&a.EnableLease, true)
	setString(&a.LeaseNamespace, DefaultAnnouncerLeaseNamespace)
	setDuration(&a.LeaseDuration, DefaultAnnouncerLeaseDuration)
	setDuration(&a.RenewInterval, DefaultAnnouncerRenewInterval)
	if a.HandoverTimeout == nil {
		a.HandoverTimeout = &Duration{Duration: DefaultAnnouncerHandover}
	}
	if a.IdleRenewInterval == nil {
		a.IdleRenewInterval = &Duration{Duration: DefaultAnnouncerIdleRenew}
	}
	if a.GratuitousInterval == nil {
		a.GratuitousInterval = &Duration{Duration: DefaultAnnouncerGratuitous}
	}
}

func (a AnnouncerConfig) validate() error {
	var errs []error
	if msgs := validation.IsDNS1123Label(a.LeaseNamespace); len(msgs) > 0 {
		errs = append(errs, fieldErr("announcer.leaseNamespace", "%q is not a valid namespace: %s", a.LeaseNamespace, strings.Join(msgs, "; ")))
	}
	d := a.LeaseDuration.Duration
	if d < time.Second || d%time.Second != 0 {
		errs = append(errs, fieldErr("announcer.leaseDuration", "%v must be whole seconds, at least 1s (a Lease counts seconds)", d))
	}
	if r := a.RenewInterval.Duration; r <= 0 || 2*r > d {
		errs = append(errs, fieldErr("announcer.renewInterval", "%v must be positive and at most half of leaseDuration (%v)", r, d))
	}
	if i := a.IdleRenewInterval; i != nil && i.Duration != 0 && i.Duration < a.RenewInterval.Duration {
		errs = append(errs, fieldErr("announcer.idleRenewInterval", "%v must be 0s or at least renewInterval (%v)", i.Duration, a.RenewInterval.Duration))
	}
	if a.HandoverTimeout != nil && a.HandoverTimeout.Duration < 0 {
		errs = append(errs, fieldErr("announcer.handoverTimeout", "%v must not be negative", a.HandoverTimeout.Duration))
	}
	if g := a.GratuitousInterval; g != nil && g.Duration != 0 && g.Duration < time.Second {
		errs = append(errs, fieldErr("announcer.gratuitousInterval", "%v must be 0s or at least 1s", g.Duration))
	}
	return errors.Join(errs...)
}

// AnnouncerLeasesConfig is the announcerLeases section of antrea-controller.conf.
type AnnouncerLeasesConfig struct {
	// Enable makes a node eligible to announce VIP-mode addresses only while its agent renews
	// its announcer Lease, and moves its addresses within the Lease's duration after the
	// renewals stop. The agents' announcer.enableLease must match. Default true.
	Enable *bool `json:"enable,omitempty"`
	// Namespace is where the agents keep their Leases (their announcer.leaseNamespace).
	// Default "kube-system".
	Namespace string `json:"namespace,omitempty"`
}

// Enabled reports whether announcer Leases are used (default true).
func (a AnnouncerLeasesConfig) Enabled() bool { return boolOr(a.Enable, true) }

func (a *AnnouncerLeasesConfig) defaults() {
	setBool(&a.Enable, true)
	setString(&a.Namespace, DefaultAnnouncerLeaseNamespace)
}

func (a AnnouncerLeasesConfig) validate() error {
	if msgs := validation.IsDNS1123Label(a.Namespace); a.Enabled() && len(msgs) > 0 {
		return fieldErr("announcerLeases.namespace", "%q is not a valid namespace: %s", a.Namespace, strings.Join(msgs, "; "))
	}
	return nil
}
