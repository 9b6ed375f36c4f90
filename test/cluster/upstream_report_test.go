//go:build cluster

package cluster

import (
	"strings"
	"testing"
	"time"
)

// A JUnit report shaped like the e2e framework's: every spec of e2e.test, the filtered-out ones
// as skipped.
const junitSample = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="5" disabled="0" errors="0" failures="1" time="100">
  <testsuite name="Kubernetes e2e suite" package="/" tests="5" disabled="0" skipped="3" errors="0" failures="1" time="100">
    <testcase name="[It] [sig-network] Services should serve a basic endpoint from pods [Conformance]" classname="Kubernetes e2e suite" status="passed" time="12.5"></testcase>
    <testcase name="[It] [sig-network] Services should implement service.kubernetes.io/headless" classname="Kubernetes e2e suite" status="failed" time="40">
      <failure message="service is reachable&#xA;second line" type="failed">details</failure>
    </testcase>
    <testcase name="[It] [sig-network] LoadBalancers should be able to preserve UDP traffic [Slow]" classname="Kubernetes e2e suite" status="skipped" time="1">
      <skipped message="skipped - Only supported for providers [gce gke]"></skipped>
    </testcase>
    <testcase name="[It] [sig-network] Services should work after restarting apiserver [Disruptive]" classname="Kubernetes e2e suite" status="skipped" time="0">
      <skipped message="skipped"></skipped>
    </testcase>
    <testcase name="[It] [sig-storage] CSI mock volume should work" classname="Kubernetes e2e suite" status="skipped" time="0">
      <skipped message="skipped"></skipped>
    </testcase>
  </testsuite>
</testsuites>`

func TestParseJUnitKeepsTheFocusedSpecs(t *testing.T) {
	o := UpstreamOptions{OutDir: "x"}.Defaults()
	got, err := ParseJUnit([]byte(junitSample), o.Focus, o.Skip)
	if err != nil {
		t.Fatal(err)
	}
	summary := Summary(got)
	for _, want := range []string{
		"1 passed, 1 failed, 1 skipped\n",
		"PASSED     12.5s  [sig-network] Services should serve a basic endpoint from pods [Conformance]\n",
		"FAILED     40.0s  [sig-network] Services should implement service.kubernetes.io/headless\n                  service is reachable\n",
		"SKIPPED     1.0s  [sig-network] LoadBalancers should be able to preserve UDP traffic [Slow]\n                  skipped - Only supported for providers [gce gke]\n",
	} {
		if !strings.Contains(summary, want) {
			t.Errorf("summary lacks %q:\n%s", want, summary)
		}
	}
	if strings.Contains(summary, "Disruptive") || strings.Contains(summary, "sig-storage") || strings.Contains(summary, "[It]") {
		t.Errorf("summary lists specs outside the focus or inside the skip:\n%s", summary)
	}
}

func TestUpstreamOptionsValidateReportsEveryProblem(t *testing.T) {
	err := UpstreamOptions{Focus: "(", Skip: "[", Procs: -1, Timeout: -time.Second, IPMode: "Direct"}.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"focus", "skip", "procs -1", "timeout -1s", "no output directory", `ipMode "Direct"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if err := (UpstreamOptions{OutDir: "x"}).Defaults().Validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
}

func TestUpstreamOptionsFromEnv(t *testing.T) {
	t.Setenv("UPSTREAM_E2E_PROCS", "0")
	t.Setenv("UPSTREAM_E2E_TIMEOUT", "soon")
	_, err := UpstreamOptionsFromEnv("x")
	if err == nil || !strings.Contains(err.Error(), "procs -1") || !strings.Contains(err.Error(), `UPSTREAM_E2E_TIMEOUT="soon"`) {
		t.Errorf("got %v, want the procs and the timeout reported", err)
	}
	t.Setenv("UPSTREAM_E2E_PROCS", "3")
	t.Setenv("UPSTREAM_E2E_TIMEOUT", "1h")
	o, err := UpstreamOptionsFromEnv("x")
	if err != nil || o.Procs != 3 || o.Timeout != time.Hour || o.Focus == "" || o.IPMode != IPModeVIP {
		t.Errorf("got %+v, %v", o, err)
	}
	// Proxy mode runs the LoadBalancers specs: the Services specs do not depend on the pool.
	t.Setenv("UPSTREAM_E2E_IPMODE", "Proxy")
	o, err = UpstreamOptionsFromEnv("x")
	if err != nil || o.IPMode != IPModeProxy || o.Focus != `\[sig-network\] LoadBalancers` {
		t.Errorf("got %+v, %v", o, err)
	}
	t.Setenv("UPSTREAM_E2E_IPMODE", "proxy")
	if _, err := UpstreamOptionsFromEnv("x"); err == nil || !strings.Contains(err.Error(), `ipMode "proxy"`) {
		t.Errorf("got %v, want the ipMode reported", err)
	}
}
