//go:build bench

package bench

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// config is the sizes and shape of one benchmark run, read from the environment.
type config struct {
	// Sizes are the Service counts to run, one fresh sandbox each, in order (BENCH_SIZES,
	// comma-separated, or the one BENCH_SERVICES); every Service has Endpoints
	// (BENCH_ENDPOINTS) ready endpoints.
	Sizes     []int
	Endpoints int
	// Changes (BENCH_CHANGES) one-endpoint changes, one every Pace (BENCH_CHANGE_PACE) at most.
	Changes int
	Pace    time.Duration
	// Idle (BENCH_IDLE) is the window of the idle-CPU measurement.
	Idle time.Duration
	// LoadQPS (BENCH_LOAD_QPS) is the loader's client rate limit and LoadWorkers
	// (BENCH_LOAD_WORKERS) its parallel requests, shared by its two streams (Services and
	// EndpointSlices).
	LoadQPS, LoadWorkers int
	// Loader (BENCH_LOADER) is how the Services are written: "api" (kube-apiserver allocates
	// their ClusterIPs; its cost per Service grows with the Services stored) or "etcd"
	// (etcdload_test.go). Default "api" up to 30,000 Services, "etcd" above.
	Loader string
	// KubeProxy (BENCH_KUBE_PROXY, default true) runs kube-proxy side by side; false measures
	// antrea-agent alone (a one-node sandbox).
	KubeProxy bool
	// Results (BENCH_RESULTS), when set, is a directory where every size's figures are written
	// (scale-<N>.json, scale-<N>.md) and read back: the growth table covers every size found
	// there, also those of earlier runs.
	Results string
}

// Defaults fills unset fields: 10k × 10, 50 changes every 1.5 s, 60 s idle window, a loader of
// 64 workers at 2,000 requests/s. The pace is above both proxies' minimum sync interval (1 s),
// so that a change measures the pipeline, not the rate limiter.
func (c *config) Defaults() {
	if len(c.Sizes) == 0 {
		c.Sizes = []int{10000}
	}
	if c.Endpoints == 0 {
		c.Endpoints = 10
	}
	if c.Changes == 0 {
		c.Changes = 50
	}
	if c.Pace == 0 {
		c.Pace = 1500 * time.Millisecond
	}
	if c.Idle == 0 {
		c.Idle = 60 * time.Second
	}
	if c.LoadQPS == 0 {
		c.LoadQPS = 2000
	}
	if c.LoadWorkers == 0 {
		c.LoadWorkers = 64
	}
}

// loaderFor is the loader of a size: Loader, or by default "api" up to 30,000 Services and
// "etcd" above.
func (c *config) loaderFor(n int) string {
	switch {
	case c.Loader != "":
		return c.Loader
	case n > 30000:
		return "etcd"
	}
	return "api"
}

// serviceCIDRFor is the sandbox's Service CIDR for n Services: the default /16 up to 60,000,
// a /12 above.
func serviceCIDRFor(n int) string {
	if n > 60000 {
		return "10.96.0.0/12"
	}
	return "10.96.0.0/16"
}

// Validate reports every problem of c.
func (c *config) Validate() error {
	var errs []error
	for _, n := range c.Sizes {
		if n < 1 || n > 1000000 {
			errs = append(errs, fmt.Errorf("size %d Services: want 1..1000000 (the Service CIDR is a /16 up to 60,000, a /12 above)", n))
		}
		if n*c.Endpoints > 1<<20-2 {
			errs = append(errs, fmt.Errorf("%d × %d endpoints: at most %d fit the endpoint range", n, c.Endpoints, 1<<20-2))
		}
	}
	if c.Endpoints < 1 || c.Endpoints > 1000 {
		errs = append(errs, fmt.Errorf("BENCH_ENDPOINTS=%d: want 1..1000 (one EndpointSlice per Service)", c.Endpoints))
	}
	if c.Changes < 1 || c.Changes > 60000 {
		errs = append(errs, fmt.Errorf("BENCH_CHANGES=%d: want 1..60000", c.Changes))
	}
	if c.Pace < 0 {
		errs = append(errs, fmt.Errorf("BENCH_CHANGE_PACE=%v: want >= 0", c.Pace))
	}
	if c.Idle < time.Second {
		errs = append(errs, fmt.Errorf("BENCH_IDLE=%v: want >= 1s", c.Idle))
	}
	if c.LoadQPS < 1 {
		errs = append(errs, fmt.Errorf("BENCH_LOAD_QPS=%d: want >= 1", c.LoadQPS))
	}
	if c.Loader != "" && c.Loader != "api" && c.Loader != "etcd" {
		errs = append(errs, fmt.Errorf("BENCH_LOADER=%q: want api or etcd", c.Loader))
	}
	if c.LoadWorkers < 2 {
		errs = append(errs, fmt.Errorf("BENCH_LOAD_WORKERS=%d: want >= 2 (one per stream)", c.LoadWorkers))
	}
	return errors.Join(errs...)
}

// startTimeout bounds start → all Services programmed at n Services: kube-proxy's first sync
// grew about quadratically (0.4 s at 1k, 47 s at 10k), so the bound does too.
func startTimeout(n int) time.Duration {
	k := float64(n) / 10000
	return 3*time.Minute + time.Duration(n)*20*time.Millisecond + time.Duration(k*k*float64(90*time.Second))
}

// configFromEnv reads the BENCH_* variables, applies the defaults and validates.
func configFromEnv() (config, error) {
	var c config
	var errs []error
	sizes := os.Getenv("BENCH_SIZES")
	if sizes == "" {
		sizes = os.Getenv("BENCH_SERVICES")
	}
	for _, f := range strings.Split(sizes, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil {
			errs = append(errs, fmt.Errorf("BENCH_SIZES/BENCH_SERVICES %q: %w", f, err))
		}
		c.Sizes = append(c.Sizes, n)
	}
	ints := map[string]*int{"BENCH_ENDPOINTS": &c.Endpoints, "BENCH_CHANGES": &c.Changes,
		"BENCH_LOAD_QPS": &c.LoadQPS, "BENCH_LOAD_WORKERS": &c.LoadWorkers}
	for k, p := range ints {
		if v := os.Getenv(k); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", k, v, err))
			}
			*p = n
		}
	}
	durs := map[string]*time.Duration{"BENCH_CHANGE_PACE": &c.Pace, "BENCH_IDLE": &c.Idle}
	for k, p := range durs {
		if v := os.Getenv(k); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", k, v, err))
			}
			*p = d
		}
	}
	c.Results = os.Getenv("BENCH_RESULTS")
	c.Loader = os.Getenv("BENCH_LOADER")
	c.KubeProxy = true
	if v := os.Getenv("BENCH_KUBE_PROXY"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("BENCH_KUBE_PROXY=%q: %w", v, err))
		}
		c.KubeProxy = b
	}
	if len(errs) > 0 {
		return c, errors.Join(errs...)
	}
	c.Defaults()
	return c, c.Validate()
}
