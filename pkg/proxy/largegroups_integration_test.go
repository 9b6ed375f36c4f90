package proxy

import (
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/native"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/ofctl"
	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
	"github.com/antrea-proxy/antrea-proxy/test/ovssandbox"
)

// largeSliceSize is how many endpoints one EndpointSlice of the large-Service tests holds (the
// EndpointSlice controller's default maximum is 100; larger slices keep the test short and do
// not change what the proxier computes).
const largeSliceSize = 1000

// largeEndpointSlices returns the EndpointSlices of a Service with n ready endpoints
// 10.64.0.1 upward (none local), largeSliceSize per slice.
func largeEndpointSlices(ns, svc string, n int) []*discovery.EndpointSlice {
	var out []*discovery.EndpointSlice
	for s := 0; s*largeSliceSize < n; s++ {
		var eps []ep
		for i := s * largeSliceSize; i < min(n, (s+1)*largeSliceSize); i++ {
			eps = append(eps, ep{ip: fmt.Sprintf("10.64.%d.%d", (i+1)/256, (i+1)%256), node: "node-b", ready: true})
		}
		out = append(out, makeSlice(ns, svc, fmt.Sprintf("%s-%d", svc, s), 8080, v1.ProtocolTCP, "http", eps...))
	}
	return out
}

// setLargeEndpoints makes the Service's EndpointSlices hold n endpoints: it updates, adds and
// (by replacing with an empty slice) empties slices as needed.
func setLargeEndpoints(h *harness, ns, svc string, cur []*discovery.EndpointSlice, n int) []*discovery.EndpointSlice {
	want := largeEndpointSlices(ns, svc, n)
	for i, s := range want {
		if i < len(cur) {
			h.updateSlice(cur[i], s)
		} else {
			h.addSlice(s)
		}
	}
	for i := len(want); i < len(cur); i++ {
		empty := cur[i].DeepCopy()
		empty.Endpoints = nil
		h.updateSlice(cur[i], empty)
		want = append(want, empty)
	}
	return want
}

// requireDumpable runs the dumps an operator runs on the bridge and requires each to succeed
// and ovs-vswitchd to keep its PID.
func requireDumpable(t *testing.T, o *ovssandbox.Instance, br string, pid int, what string, groups int) {
	t.Helper()
	for _, cmd := range []string{"dump-groups", "dump-group-stats", "dump-flows"} {
		out, err := o.Ofctl(cmd, br)
		switch {
		case err != nil:
			t.Errorf("%s: ovs-ofctl %s: %.2000v", what, cmd, err)
		case strings.Contains(out, "decode error"):
			t.Errorf("%s: ovs-ofctl %s cannot decode the reply:\n%.600s", what, cmd, out)
		case cmd == "dump-groups" && strings.Count(out, "group_id=") != groups:
			t.Errorf("%s: dump-groups shows %d groups, want %d:\n%.600s", what, strings.Count(out, "group_id="), groups, out)
		}
	}
	if !o.VSwitchdAlive() || o.VSwitchdPID() != pid {
		t.Fatalf("%s: ovs-vswitchd died (pid %d, alive %v)", what, pid, o.VSwitchdAlive())
	}
}

// TestIntegrationLargeGroupsDumpable installs Services of 5,000 and 20,000 endpoints into a real
// OVS through both backends, with and without session affinity, and changes them across the
// split boundary both ways: after each change every ovs-ofctl dump an operator runs succeeds
// and ovs-vswitchd keeps its PID (no group description is larger than one OpenFlow multipart
// reply).
func TestIntegrationLargeGroupsDumpable(t *testing.T) {
	o := ovssandbox.Start(t, ovssandbox.Options{})
	backends := []struct {
		name string
		open func(t *testing.T, sock string) Bridge
	}{
		{"ofctl", func(_ *testing.T, sock string) Bridge { return ofctl.New(sock) }},
		{"native", func(t *testing.T, sock string) Bridge {
			b := native.New(sock, ofctl.New(sock))
			t.Cleanup(b.Close)
			return b
		}},
	}
	i := 0
	for _, tc := range []struct {
		name     string
		sizes    []int
		affinity bool
	}{
		{"5k", []int{5000, 4990, 5600, 300, 5000}, false},
		{"5k-affinity", []int{5000, 700, 5000}, true},
		{"20k", []int{20000, 19000, 20000, 900, 20000}, false},
	} {
		for _, be := range backends {
			i++
			t.Run(tc.name+"/"+be.name, func(t *testing.T) {
				br := fmt.Sprintf("brl%d", i)
				addOVSBridge(t, o, br)
				pid := o.VSwitchdPID()
				h := realHarness(t, testOptions(), be.open(t, o.MgmtSocket(br)))
				svc := makeService("default", "big", "10.96.0.50")
				if tc.affinity {
					svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP
				}
				h.addService(svc)
				var cur []*discovery.EndpointSlice
				for _, n := range tc.sizes {
					cur = setLargeEndpoints(h, "default", "big", cur, n)
					h.sync()
					requireDumpable(t, o, br, pid, fmt.Sprintf("%d endpoints", n), 1+pipeline.SubGroups(n))
				}
				h.deleteService(svc)
				h.sync()
				requireDumpable(t, o, br, pid, "the Service deleted", 0)
			})
		}
	}
}
