package config

// Defaults of the antreaProxy.rateLimits section.
const (
	// DefaultRejectMeterRate and DefaultRejectMeterBurst are what OVS lets through to the
	// reject responder, packets per second, in total over DefaultRejectMeters meters.
	DefaultRejectMeterRate  = 4000
	DefaultRejectMeterBurst = 2000
	DefaultRejectMeters     = 16
	// DefaultRejectRate and DefaultRejectBurst bound the responder's replies in total;
	// DefaultRejectSourceRate and DefaultRejectSourceBurst those to one client address, over
	// DefaultRejectSources per-client buckets.
	DefaultRejectRate        = 1000
	DefaultRejectBurst       = 500
	DefaultRejectSourceRate  = 250
	DefaultRejectSourceBurst = 125
	DefaultRejectSources     = 4096
	// DefaultAffinityFlowsPerService bounds the session affinity flows one Service port
	// learns per IP family; DefaultAffinityFlowsTotal those of the node.
	DefaultAffinityFlowsPerService = 10000
	DefaultAffinityFlowsTotal      = 100000
)

// Upper bounds of the rateLimits options.
const (
	maxRejectMeters = 256
	maxFlows        = 10_000_000
)

// RateLimitConfig is the antreaProxy.rateLimits section of antrea-agent.conf: the limits of
// the reject responder (connections to Service ports without endpoints and to undefined ports
// of ClusterIPs) and of session affinity. Zero (or omitted) means the default.
type RateLimitConfig struct {
	// RejectMeterRate is how many packets per second OVS sends to the reject responder at most
	// (OpenFlow meters; what exceeds it is dropped in OVS). Default 4000.
	RejectMeterRate int `json:"rejectMeterRate,omitempty"`
	// RejectMeterBurst is how many packets may pass at once above RejectMeterRate. Default 2000.
	RejectMeterBurst int `json:"rejectMeterBurst,omitempty"`
	// RejectMeters is how many meters share RejectMeterRate and RejectMeterBurst evenly, a
	// power of two; the low bits of a client's address choose its meter, so a flooding client
	// uses up only its meter's share. Default 16, at most 256.
	RejectMeters int `json:"rejectMeters,omitempty"`
	// RejectRate and RejectBurst bound the replies the responder sends, in total, per second
	// and at once. Defaults 1000 and 500.
	RejectRate  int `json:"rejectRate,omitempty"`
	RejectBurst int `json:"rejectBurst,omitempty"`
	// RejectSourceRate and RejectSourceBurst bound the replies to one client address.
	// Defaults 250 and 125.
	RejectSourceRate  int `json:"rejectSourceRate,omitempty"`
	RejectSourceBurst int `json:"rejectSourceBurst,omitempty"`
	// RejectSources is the number of per-client buckets (clients hashing to the same one share
	// it). Default 4096.
	RejectSources int `json:"rejectSources,omitempty"`
	// AffinityFlowsPerService bounds the flows sessionAffinity=ClientIP learns for one Service
	// port in one IP family (one per client address); beyond it, new clients are load-balanced
	// without affinity. Default 10000.
	AffinityFlowsPerService int `json:"affinityFlowsPerService,omitempty"`
	// AffinityFlowsTotal bounds the learned session affinity flows of the node (the OVS flow
	// limit of their table). Default 100000.
	AffinityFlowsTotal int `json:"affinityFlowsTotal,omitempty"`
}

// WithDefaults returns r with its unset fields defaulted: what the agent uses. (The section
// stays as written in the configuration, like nodeNetwork, so that an omitted one marshals
// as omitted.)
func (r RateLimitConfig) WithDefaults() RateLimitConfig {
	r.Defaults()
	return r
}

// Defaults fills the unset fields.
func (r *RateLimitConfig) Defaults() {
	for _, f := range []struct {
		v   *int
		def int
	}{
		{&r.RejectMeterRate, DefaultRejectMeterRate}, {&r.RejectMeterBurst, DefaultRejectMeterBurst},
		{&r.RejectMeters, DefaultRejectMeters}, {&r.RejectRate, DefaultRejectRate}, {&r.RejectBurst, DefaultRejectBurst},
		{&r.RejectSourceRate, DefaultRejectSourceRate}, {&r.RejectSourceBurst, DefaultRejectSourceBurst},
		{&r.RejectSources, DefaultRejectSources},
		{&r.AffinityFlowsPerService, DefaultAffinityFlowsPerService}, {&r.AffinityFlowsTotal, DefaultAffinityFlowsTotal},
	} {
		if *f.v == 0 {
			*f.v = f.def
		}
	}
}

// validate reports every problem of the section at path, with its defaults applied (a
// negative value is never replaced).
func (r RateLimitConfig) validate(path string) []error {
	r.Defaults()
	var errs []error
	for _, f := range []struct {
		key string
		v   int
		max int
	}{
		{"rejectMeterRate", r.RejectMeterRate, maxFlows}, {"rejectMeterBurst", r.RejectMeterBurst, maxFlows},
		{"rejectMeters", r.RejectMeters, maxRejectMeters}, {"rejectRate", r.RejectRate, maxFlows},
		{"rejectBurst", r.RejectBurst, maxFlows}, {"rejectSourceRate", r.RejectSourceRate, maxFlows},
		{"rejectSourceBurst", r.RejectSourceBurst, maxFlows}, {"rejectSources", r.RejectSources, 1 << 20},
		{"affinityFlowsPerService", r.AffinityFlowsPerService, maxFlows}, {"affinityFlowsTotal", r.AffinityFlowsTotal, maxFlows},
	} {
		if f.v <= 0 || f.v > f.max {
			errs = append(errs, fieldErr(path+"."+f.key, "must be in [1, %d], got %d", f.max, f.v))
		}
	}
	if r.RejectMeters > 0 && r.RejectMeters&(r.RejectMeters-1) != 0 {
		errs = append(errs, fieldErr(path+".rejectMeters", "%d is not a power of two", r.RejectMeters))
	}
	if r.RejectMeters > 0 && r.RejectMeterRate > 0 && r.RejectMeterRate < r.RejectMeters {
		errs = append(errs, fieldErr(path+".rejectMeterRate", "%d is below rejectMeters (%d): every meter needs at least 1 packet per second",
			r.RejectMeterRate, r.RejectMeters))
	}
	if r.RejectSourceRate > r.RejectRate && r.RejectRate > 0 {
		errs = append(errs, fieldErr(path+".rejectSourceRate", "%d exceeds rejectRate (%d)", r.RejectSourceRate, r.RejectRate))
	}
	if r.AffinityFlowsPerService > r.AffinityFlowsTotal && r.AffinityFlowsTotal > 0 {
		errs = append(errs, fieldErr(path+".affinityFlowsPerService", "%d exceeds affinityFlowsTotal (%d)",
			r.AffinityFlowsPerService, r.AffinityFlowsTotal))
	}
	return errs
}
