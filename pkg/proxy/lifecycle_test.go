package proxy

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/antrea-proxy/antrea-proxy/pkg/pipeline"
)

// TestRenamedPort: renaming a port replaces its owner; the old group and flows go away.
func TestRenamedPort(t *testing.T) {
	h := newHarness(t, testOptions())
	svc := makeService("ns1", "web", "10.96.0.10")
	h.addService(svc)
	h.addSlice(makeSlice("ns1", "web", "web-1", 8080, v1.ProtocolTCP, "http", ep{ip: "10.10.1.5", node: testNode, ready: true}))
	h.sync()

	renamed := makeService("ns1", "web", "10.96.0.10", withPorts(v1.ServicePort{Name: "web", Port: 80, Protocol: v1.ProtocolTCP}))
	h.updateService(svc, renamed)
	newSlice := makeSlice("ns1", "web", "web-1", 8080, v1.ProtocolTCP, "web", ep{ip: "10.10.1.5", node: testNode, ready: true})
	h.updateSlice(makeSlice("ns1", "web", "web-1", 8080, v1.ProtocolTCP, "http", ep{ip: "10.10.1.5", node: testNode, ready: true}), newSlice)
	h.sync()
	st := h.p.Services()
	if len(st) != 1 || len(st[0].Ports) != 1 || st[0].Ports[0].Port.Name.Port != "web" {
		t.Fatalf("want one port named web, got %+v", st)
	}
	if h.bridge.GroupCount() != 1 {
		t.Fatalf("want the old group replaced, got %d groups:\n%s", h.bridge.GroupCount(), h.bridge.Dump())
	}
	if st[0].Ports[0].GroupID == 0 {
		t.Fatal("the renamed port should have endpoints")
	}
}

// TestDeleteAndRecreateBeforeSync: a Service deleted and re-created with another cluster IP
// between two syncs ends up with exactly the new flows.
func TestDeleteAndRecreateBeforeSync(t *testing.T) {
	h := newHarness(t, testOptions())
	svc := makeService("ns1", "web", "10.96.0.10")
	h.addService(svc)
	h.sync()
	h.deleteService(svc)
	again := makeService("ns1", "web", "10.96.0.11")
	h.addService(again)
	h.sync()
	dump := h.bridge.Dump()
	if strings.Contains(dump, "nw_dst=10.96.0.10,") || !strings.Contains(dump, "nw_dst=10.96.0.11,") {
		t.Fatalf("want only the re-created Service's flow:\n%s", dump)
	}
	h.deleteService(again)
	h.sync()
	if strings.Contains(h.bridge.Dump(), fmt.Sprintf("table=%d,priority=200", pipeline.TableServiceLB)) {
		t.Fatalf("deleted Service left flows:\n%s", h.bridge.Dump())
	}
	if len(h.p.Services()) != 0 {
		t.Fatal("deleted Service still in status")
	}
}

// TestFailedApplyIsRetried: when OVS rejects a bundle nothing is recorded, and the next sync
// sends the same change again.
func TestFailedApplyIsRetried(t *testing.T) {
	h := newHarness(t, testOptions())
	h.sync()
	h.addService(makeService("ns1", "web", "10.96.0.10"))
	h.bridge.FailNextApply(errors.New("injected: connection reset"))
	if err := h.p.SyncNow(t.Context(), false); err == nil {
		t.Fatal("want the injected error")
	}
	if strings.Contains(h.bridge.Dump(), "10.96.0.10") {
		t.Fatal("failed bundle changed the bridge")
	}
	if len(h.p.Services()) != 0 {
		t.Fatal("failed sync recorded a Service as installed")
	}
	h.sync()
	if !strings.Contains(h.bridge.Dump(), "nw_dst=10.96.0.10,") {
		t.Fatalf("retry did not install the Service:\n%s", h.bridge.Dump())
	}
}

// TestSharedEndpointFlow: two Services with session affinity selecting the same endpoint share
// its DNAT flow (EndpointDNAT), which stays until the last of them is gone.
func TestSharedEndpointFlow(t *testing.T) {
	h := newHarness(t, testOptions())
	// Only ports with session affinity have endpoint DNAT flows (other buckets DNAT themselves).
	a, b := makeService("ns1", "a", "10.96.0.1", withAffinity(60)), makeService("ns1", "b", "10.96.0.2", withAffinity(60))
	h.addService(a)
	h.addService(b)
	for _, n := range []string{"a", "b"} {
		h.addSlice(makeSlice("ns1", n, n+"-1", 8080, v1.ProtocolTCP, "http", ep{ip: "10.10.1.5", node: testNode, ready: true}))
	}
	h.sync()
	count := func() int {
		n := 0
		for _, l := range strings.Split(h.bridge.Dump(), "\n") {
			if strings.Contains(l, "table=15,") && strings.Contains(l, "nat(dst=10.10.1.5:8080)") {
				n++
			}
		}
		return n
	}
	if count() != 1 {
		t.Fatalf("want one shared DNAT flow, got %d", count())
	}
	h.deleteService(a)
	h.sync()
	if count() != 1 {
		t.Fatal("DNAT flow removed while Service b still uses it")
	}
	h.deleteService(b)
	h.sync()
	if count() != 0 {
		t.Fatal("DNAT flow left after both Services are gone")
	}
}
