package server

import (
	"context"
	"fmt"
	"maps"
	"net"
	"sync"

	"github.com/antrea-proxy/antrea-proxy/pkg/cni/ipam"
	"github.com/antrea-proxy/antrea-proxy/pkg/cni/podnet"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/ovsdb"
)

// fakePorts is an in-memory bridge port table.
type fakePorts struct {
	mu      sync.Mutex
	ports   map[string]fakePort
	next    int32
	failErr error
}

type fakePort struct {
	ofport int32
	ids    map[string]string
}

func newFakePorts() *fakePorts { return &fakePorts{ports: map[string]fakePort{}, next: 10} }

func (f *fakePorts) EnsurePort(_ context.Context, _ string, cfg ovsdb.PortConfig) (int32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failErr != nil {
		return 0, f.failErr
	}
	p, ok := f.ports[cfg.Name]
	if !ok {
		p = fakePort{ofport: f.next}
		f.next++
	}
	p.ids = maps.Clone(cfg.ExternalIDs)
	f.ports[cfg.Name] = p
	return p.ofport, nil
}

func (f *fakePorts) DeletePort(_ context.Context, _, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.ports, name)
	return nil
}

func (f *fakePorts) GetOFPort(_ context.Context, name string) (int32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.ports[name]
	if !ok {
		return 0, fmt.Errorf("interface %q not found", name)
	}
	return p.ofport, nil
}

func (f *fakePorts) names() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for n := range f.ports {
		out = append(out, n)
	}
	return out
}

// fakeNetlink records pod interfaces keyed by host interface name.
type fakeNetlink struct {
	mu       sync.Mutex
	netns    map[string]bool
	ifaces   map[string]podnet.Config
	setups   int
	failNext error
	// failTeardown, when set, fails every Teardown of a host interface in it.
	failTeardown map[string]error
}

func newFakeNetlink(namespaces ...string) *fakeNetlink {
	f := &fakeNetlink{netns: map[string]bool{}, ifaces: map[string]podnet.Config{}}
	for _, ns := range namespaces {
		f.netns[ns] = true
	}
	return f
}

func macFor(name string, pod bool) net.HardwareAddr {
	b := byte(0x01)
	if pod {
		b = 0x02
	}
	h := 0
	for _, c := range name {
		h = h*31 + int(c)
	}
	return net.HardwareAddr{0x0a, 0x58, b, byte(h >> 16), byte(h >> 8), byte(h)}
}

func (f *fakeNetlink) Setup(cfg podnet.Config) (podnet.Interfaces, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.setups++
	if err := f.failNext; err != nil {
		f.failNext = nil
		return podnet.Interfaces{}, err
	}
	if !f.netns[cfg.NetNS] {
		return podnet.Interfaces{}, fmt.Errorf("%w: %s", podnet.ErrNetNSNotFound, cfg.NetNS)
	}
	f.ifaces[cfg.HostIfName] = cfg
	return podnet.Interfaces{HostMAC: macFor(cfg.HostIfName, false), PodMAC: macFor(cfg.HostIfName, true)}, nil
}

func (f *fakeNetlink) Check(cfg podnet.Config) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.ifaces[cfg.HostIfName]; !ok {
		return fmt.Errorf("host interface %s does not exist", cfg.HostIfName)
	}
	return nil
}

func (f *fakeNetlink) Teardown(cfg podnet.Config) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.failTeardown[cfg.HostIfName]; err != nil {
		return err
	}
	delete(f.ifaces, cfg.HostIfName)
	return nil
}

func (f *fakeNetlink) NetNSExists(path string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.netns[path]
}

func (f *fakeNetlink) removeNetNS(path string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.netns, path)
	for k, c := range f.ifaces {
		if c.NetNS == path {
			delete(f.ifaces, k)
		}
	}
}

func (f *fakeNetlink) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.ifaces)
}

func ownerOf(cid string) ipam.Owner { return ipam.Owner{ContainerID: cid, IfName: "eth0"} }
