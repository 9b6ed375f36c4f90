package config

import (
	"strings"
	"testing"
)

// TestParseReportsSchemaAndValidationProblemsTogether: one run names an unknown key and every
// invalid value, each once.
func TestParseReportsSchemaAndValidationProblemsTogether(t *testing.T) {
	env := Env{Getenv: func(string) string { return "node-a" }, Hostname: func() (string, error) { return "h", nil }}
	_, err := ParseWithEnv([]byte("ovsDatapathType: foo\nantreaProxy:\n  proxyLoadBalancerIP: true\n  nodePortAddresses: [\"10.0.0.0/33\"]\n  skipServices: [{a: b}]\n"), env)
	if err == nil {
		t.Fatal("want an error")
	}
	msg := err.Error()
	for _, want := range []string{
		`unknown field "antreaProxy.proxyLoadBalancerIP"`,
		`ovsDatapathType: "foo" must be "system" or "netdev"`,
		`antreaProxy.nodePortAddresses[0]: "10.0.0.0/33" is not a valid CIDR`,
		`antreaProxy.skipServices[0]: expected a string`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not mention %q:\n%s", want, msg)
		}
	}
	if n := strings.Count(msg, "skipServices[0]"); n != 1 {
		t.Errorf("skipServices[0] reported %d times, want once:\n%s", n, msg)
	}
}
