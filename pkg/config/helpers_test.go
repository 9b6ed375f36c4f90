package config

import (
	"fmt"
	"time"
)

// fakeEnv returns an Env with NODE_NAME=nodeName and the given host name
// (hostname "" means os.Hostname fails).
func fakeEnv(nodeName, hostname string) Env {
	return Env{
		Getenv: func(key string) string {
			if key == NodeNameEnv {
				return nodeName
			}
			return ""
		},
		Hostname: func() (string, error) {
			if hostname == "" {
				return "", fmt.Errorf("no host name")
			}
			return hostname, nil
		},
	}
}

// errorLines flattens an error tree built with errors.Join into the
// messages of its leaves, in order.
func errorLines(err error) []string {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []string
		for _, e := range j.Unwrap() {
			out = append(out, errorLines(e)...)
		}
		return out
	}
	return []string{err.Error()}
}

func ptr[T any](v T) *T { return &v }

func dur(d time.Duration) Duration { return Duration{Duration: d} }

// validConfig returns a fully defaulted, valid config.
func validConfig() *AgentConfig {
	c := &AgentConfig{}
	c.DefaultsFrom(fakeEnv("node-1", ""))
	return c
}
