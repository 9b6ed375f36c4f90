package server

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/reconciler"
)

// Pod is one pod interface the server attached and installed flows for, as its record holds
// it.
type Pod struct {
	Namespace, Name string
	// Interface is the host end of the pod's veth pair (the OVS port's name).
	Interface string
	OFPort    uint32
	MAC       net.HardwareAddr
	IPs       []netip.Addr
}

// Pods returns the pods whose flows the server installed, from their records, sorted by
// namespace, name and OpenFlow port. A record without installed flows (an ADD in progress) is
// left out.
func (s *Server) Pods() ([]Pod, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	recs, err := s.store.list()
	if err != nil {
		return nil, err
	}
	var out []Pod
	for _, r := range recs {
		if r.OFPort == 0 || !s.rec.Has(podOwner(r.OFPort)) {
			continue
		}
		mac, err := net.ParseMAC(r.PodMAC)
		if err != nil {
			return nil, fmt.Errorf("pod MAC %q of container %s: %w", r.PodMAC, r.ContainerID, err)
		}
		p := Pod{Namespace: r.PodNamespace, Name: r.PodName, Interface: r.HostIfName, OFPort: r.OFPort, MAC: mac}
		for _, ip := range r.IPs {
			p.IPs = append(p.IPs, ip.Addr())
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b Pod) int {
		switch {
		case a.Namespace != b.Namespace:
			return strings.Compare(a.Namespace, b.Namespace)
		case a.Name != b.Name:
			return strings.Compare(a.Name, b.Name)
		}
		return int(a.OFPort) - int(b.OFPort)
	})
	return out, nil
}

// InstalledPodFlows returns copies of the flows of every pod, as the server installed them (a
// packet tracer's input; the reconciler's Replay installs the same).
func (s *Server) InstalledPodFlows() []openflow.Flow {
	return s.rec.Flows(reconciler.KindPod)
}
