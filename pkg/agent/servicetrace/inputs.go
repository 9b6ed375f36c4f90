package servicetrace

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver/apiv1"
	of "github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow"
	"github.com/antrea-proxy/antrea-proxy/pkg/ovs/openflow/oftrace"
	"github.com/antrea-proxy/antrea-proxy/pkg/proxy"
)

// ErrNotFound is wrapped by the errors about a source the node does not have (an unknown pod,
// a pod without an address of the destination's family).
var ErrNotFound = errors.New("not found")

// SourcePort is the source port of every traced packet.
const SourcePort uint16 = 40000

// Gateway is the node's host gateway as the data path set it up.
type Gateway struct {
	Name   string
	OFPort uint32
	MAC    net.HardwareAddr
	// IPs are the gateway's own addresses, one per family: the source of the node's own
	// connections as they enter OVS.
	IPs []netip.Addr
}

// Pod is a local pod as the CNI server recorded it.
type Pod struct {
	Namespace, Name, Interface string
	OFPort                     uint32
	MAC                        net.HardwareAddr
	IPs                        []netip.Addr
}

// Inputs is everything a trace reads: the installed flows and groups of every writer, the
// proxier's Service statuses, the gateway and the pods.
type Inputs struct {
	Flows    []of.Flow
	Groups   []of.Group
	Services []proxy.ServiceStatus
	Gateway  Gateway
	Pods     []Pod
	// NodeAddresses are the addresses NodePorts are served on (the proxier's
	// NodePortAddresses and the NodePort virtual IPs).
	NodeAddresses []netip.Addr
}

// packet builds the packet req describes and names its in_port.
func packet(in *Inputs, req apiv1.TraceRequest) (oftrace.Packet, string, error) {
	dst := req.To.Addr()
	p := oftrace.Packet{EthType: of.EthTypeIP, Dst: dst, DstPort: req.To.Port(), SrcPort: SourcePort,
		EthDst: in.Gateway.MAC}
	if dst.Is6() {
		p.EthType = of.EthTypeIPv6
	}
	switch req.Protocol {
	case "UDP":
		p.Proto = of.ProtoUDP
	case "SCTP":
		p.Proto = of.ProtoSCTP
	default:
		p.Proto, p.TCPFlags = of.ProtoTCP, of.TCPSyn
	}
	var inPort string
	switch req.FromKind {
	case apiv1.FromPod:
		pod, err := findPod(in.Pods, req.PodNamespace, req.PodName)
		if err != nil {
			return p, "", err
		}
		src, ok := sameFamily(pod.IPs, dst)
		if !ok {
			return p, "", fmt.Errorf("pod %s/%s: an address of %s's family %w", pod.Namespace, pod.Name, dst, ErrNotFound)
		}
		p.InPort, p.EthSrc, p.Src = pod.OFPort, pod.MAC, src
		inPort = podName(pod)
	case apiv1.FromNode:
		src, ok := sameFamily(in.Gateway.IPs, dst)
		if !ok {
			return p, "", fmt.Errorf("gateway %s: an address of %s's family %w", in.Gateway.Name, dst, ErrNotFound)
		}
		p.InPort, p.EthSrc, p.EthDst, p.Src = in.Gateway.OFPort, in.Gateway.MAC, nil, src
		inPort = gatewayName(in.Gateway)
	default:
		src := req.ExternalIP
		if !src.IsValid() {
			src = apiv1.DefaultExternalSource
			if dst.Is6() {
				src = apiv1.DefaultExternalSourceV6
			}
		}
		p.InPort, p.EthSrc, p.EthDst, p.Src = in.Gateway.OFPort, in.Gateway.MAC, nil, src
		inPort = gatewayName(in.Gateway)
	}
	return p, inPort, nil
}

func findPod(pods []Pod, ns, name string) (Pod, error) {
	for _, p := range pods {
		if p.Namespace == ns && p.Name == name {
			return p, nil
		}
	}
	return Pod{}, fmt.Errorf("pod %s/%s: %w on this node", ns, name, ErrNotFound)
}

func sameFamily(ips []netip.Addr, dst netip.Addr) (netip.Addr, bool) {
	for _, ip := range ips {
		if ip.Is4() == dst.Is4() {
			return ip, true
		}
	}
	return netip.Addr{}, false
}

func podName(p Pod) string {
	return fmt.Sprintf("pod %s/%s (port %d, %s)", p.Namespace, p.Name, p.OFPort, p.Interface)
}

func gatewayName(g Gateway) string { return fmt.Sprintf("gateway %s (port %d)", g.Name, g.OFPort) }
