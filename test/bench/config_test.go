//go:build bench

package bench

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
)

// config is the size and shape of one run, read from the environment.
type config struct {
	// Services (BENCH_SERVICES) ClusterIP Services with Endpoints (BENCH_ENDPOINTS) ready
	// endpoints each.
	Services, Endpoints int
	// Changes (BENCH_CHANGES) one-endpoint changes, one every Pace (BENCH_CHANGE_PACE) at most.
	Changes int
	Pace    time.Duration
	// Idle (BENCH_IDLE) is the window of the idle-CPU measurement.
	Idle time.Duration
}

// Defaults fills unset fields: 10k × 10, 50 changes every 1.5 s, 60 s idle window. The pace is
// above both proxies' minimum sync interval (1 s), so that a change measures the pipeline, not
// the rate limiter.
func (c *config) Defaults() {
	if c.Services == 0 {
		c.Services = 10000
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
}

// Validate reports every problem of c.
func (c *config) Validate() error {
	var errs []error
	if c.Services < 1 || c.Services > 60000 {
		errs = append(errs, fmt.Errorf("BENCH_SERVICES=%d: want 1..60000 (the Service CIDR is a /16)", c.Services))
	}
	if c.Endpoints < 1 || c.Endpoints > 1000 {
		errs = append(errs, fmt.Errorf("BENCH_ENDPOINTS=%d: want 1..1000 (one EndpointSlice per Service)", c.Endpoints))
	}
	if c.Services*c.Endpoints > 1<<20-2 {
		errs = append(errs, fmt.Errorf("%d endpoints: at most %d fit the endpoint range", c.Services*c.Endpoints, 1<<20-2))
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
	return errors.Join(errs...)
}

// configFromEnv reads the BENCH_* variables, applies the defaults and validates.
func configFromEnv() (config, error) {
	var c config
	var errs []error
	ints := map[string]*int{"BENCH_SERVICES": &c.Services, "BENCH_ENDPOINTS": &c.Endpoints, "BENCH_CHANGES": &c.Changes}
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
	if len(errs) > 0 {
		return c, errors.Join(errs...)
	}
	c.Defaults()
	return c, c.Validate()
}
