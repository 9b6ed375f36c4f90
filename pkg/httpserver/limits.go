package httpserver

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Default limits: generous for the kubelet's probes, load balancers' health checkers and
// Prometheus scrapes, which send a small request and read a small answer, yet short enough
// that a client sending nothing, or headers a byte at a time, is disconnected within seconds.
const (
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 10 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
	DefaultMaxConnections    = 256
)

// Limits bound what clients can hold of a server.
type Limits struct {
	// ReadHeaderTimeout is how long a client has to send a request's headers (from the
	// connection's start or the end of the previous response).
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included.
	ReadTimeout time.Duration
	// WriteTimeout bounds the time from the end of the request's headers to the end of the
	// response.
	WriteTimeout time.Duration
	// IdleTimeout is how long a kept-alive connection may wait for the next request.
	IdleTimeout time.Duration
	// MaxConnections caps the connections open at once; above it new connections are closed
	// as soon as they are accepted.
	MaxConnections int
}

// Defaults sets every zero field to its default.
func (l *Limits) Defaults() {
	set := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	set(&l.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	set(&l.ReadTimeout, DefaultReadTimeout)
	set(&l.WriteTimeout, DefaultWriteTimeout)
	set(&l.IdleTimeout, DefaultIdleTimeout)
	if l.MaxConnections == 0 {
		l.MaxConnections = DefaultMaxConnections
	}
}

// Validate reports every field that is out of range.
func (l Limits) Validate() error {
	var errs []error
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"readHeaderTimeout", l.ReadHeaderTimeout}, {"readTimeout", l.ReadTimeout}, {"writeTimeout", l.WriteTimeout}, {"idleTimeout", l.IdleTimeout}} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, not %v", d.name, d.v))
		}
	}
	if l.ReadHeaderTimeout > l.ReadTimeout && l.ReadTimeout > 0 {
		errs = append(errs, fmt.Errorf("readHeaderTimeout %v must not exceed readTimeout %v", l.ReadHeaderTimeout, l.ReadTimeout))
	}
	if l.MaxConnections <= 0 {
		errs = append(errs, fmt.Errorf("maxConnections must be positive, not %d", l.MaxConnections))
	}
	return errors.Join(errs...)
}

// server returns an http.Server for h with the timeouts of l.
func (l Limits) server(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: l.ReadHeaderTimeout, ReadTimeout: l.ReadTimeout,
		WriteTimeout: l.WriteTimeout, IdleTimeout: l.IdleTimeout}
}
