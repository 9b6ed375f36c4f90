package ofconn

import (
	"errors"
	"fmt"
	"time"
)

// Options tune a connection. Zero values take the defaults (see Defaults).
type Options struct {
	// Version is the OpenFlow version the connection speaks: Version13 (the default; the
	// packet-in and packet-out encodings of this package) or Version15 (the native bridge's
	// bundles). The peer's hello must offer it.
	Version uint8
	// IgnorePacketIns makes a connection that serves requests only: the handshake sends no
	// set-config, and packet-ins (which reach every connection to the management socket) are
	// discarded undecoded. PacketIns is then closed when the connection ends, with nothing sent.
	IgnorePacketIns bool
	// MissSendLen is sent with set-config: how much of a table-miss packet the switch sends.
	// Default MissSendLenNoBuffer (whole packets). It does not affect controller actions,
	// which carry their own max_len.
	MissSendLen uint16
	// EchoInterval is how long the connection may be quiet (nothing received) before it sends
	// an echo request. Default 5 s.
	EchoInterval time.Duration
	// EchoTimeout is how long an echo reply may take before the connection is declared dead
	// (unless a Hold is in force). Default 3 s.
	EchoTimeout time.Duration
	// HandshakeTimeout bounds the hello/features/set-config exchange. Default 10 s.
	HandshakeTimeout time.Duration
	// WriteTimeout bounds every write (a write's context may shorten it). Default 5 s.
	WriteTimeout time.Duration
	// PacketInQueue is how many decoded packet-ins wait for the reader of PacketIns; more are
	// dropped (and counted) so that a slow consumer never stalls the keepalive. Default 256.
	PacketInQueue int
}

// Defaults returns o with every zero field set to its default.
func (o Options) Defaults() Options {
	if o.Version == 0 {
		o.Version = Version13
	}
	if o.MissSendLen == 0 {
		o.MissSendLen = MissSendLenNoBuffer
	}
	if o.EchoInterval <= 0 {
		o.EchoInterval = 5 * time.Second
	}
	if o.EchoTimeout <= 0 {
		o.EchoTimeout = 3 * time.Second
	}
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = 10 * time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 5 * time.Second
	}
	if o.PacketInQueue <= 0 {
		o.PacketInQueue = 256
	}
	return o
}

// Validate reports every problem of o (after Defaults).
func (o Options) Validate() error {
	var errs []error
	if o.Version != Version13 && o.Version != Version15 {
		errs = append(errs, fmt.Errorf("version 0x%02x: want 0x%02x (OpenFlow 1.3) or 0x%02x (OpenFlow 1.5)", o.Version, Version13, Version15))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"echoInterval", o.EchoInterval}, {"echoTimeout", o.EchoTimeout}, {"handshakeTimeout", o.HandshakeTimeout}, {"writeTimeout", o.WriteTimeout}} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s %v: must be positive", d.name, d.v))
		}
	}
	if o.PacketInQueue <= 0 {
		errs = append(errs, fmt.Errorf("packetInQueue %d: must be positive", o.PacketInQueue))
	}
	return errors.Join(errs...)
}

// MonitorOptions tune a Monitor. Zero values take the defaults (see Defaults).
type MonitorOptions struct {
	// Conn tunes each connection (echo keepalive: a wedged switch is declared lost after
	// Conn.EchoInterval + Conn.EchoTimeout). A Monitor's connections ignore packet-ins.
	Conn Options
	// MinBackoff is the wait after the first failed connection attempt; it doubles after each
	// further failure up to MaxBackoff. Defaults 100 ms and 1 s.
	MinBackoff time.Duration
	MaxBackoff time.Duration
	// DialTimeout bounds one connection attempt with its handshake. Default 5 s.
	DialTimeout time.Duration
}

// Defaults returns o with every zero field set to its default; MaxBackoff is raised to
// MinBackoff, and Conn.IgnorePacketIns is set.
func (o MonitorOptions) Defaults() MonitorOptions {
	if o.MinBackoff <= 0 {
		o.MinBackoff = 100 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = time.Second
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = o.MinBackoff
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 5 * time.Second
	}
	o.Conn.IgnorePacketIns = true
	o.Conn = o.Conn.Defaults()
	return o
}

// Validate reports every problem of o (after Defaults).
func (o MonitorOptions) Validate() error {
	var errs []error
	if err := o.Conn.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("conn: %w", err))
	}
	if o.MinBackoff <= 0 || o.MaxBackoff < o.MinBackoff {
		errs = append(errs, fmt.Errorf("backoff %v..%v: want 0 < minBackoff <= maxBackoff", o.MinBackoff, o.MaxBackoff))
	}
	if o.DialTimeout <= 0 {
		errs = append(errs, fmt.Errorf("dialTimeout %v: must be positive", o.DialTimeout))
	}
	return errors.Join(errs...)
}
