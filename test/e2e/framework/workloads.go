package framework

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/retry"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver/apiv1"
)

// EchoImage is the image name of echo pods; the kubelet stand-in runs test/e2e/echoserver
// whatever the image says.
const EchoImage = "antrea-proxy-e2e/echoserver"

// CreateNamespace creates a namespace and waits for its default ServiceAccount (Pods are
// rejected before it exists).
func (s *Sandbox) CreateNamespace(ctx context.Context, name string) error {
	cs := s.CP.Client
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating Namespace %s: %w", name, err)
	}
	return Poll(ctx, time.Minute, "the serviceaccount controller to create ServiceAccount "+name+"/default", func(ctx context.Context) (bool, string, error) {
		_, err := cs.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	})
}

// EchoPod is a Pod bound to node that runs the e2e echo server: TCP and UDP on EchoPort
// (named "echo", "echo-udp") and HTTP on EchoHTTPPort (named "http").
func EchoPod(namespace, name string, node *Node, podLabels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: podLabels},
		Spec: corev1.PodSpec{
			NodeName:                     node.Name,
			AutomountServiceAccountToken: new(bool),
			Containers: []corev1.Container{{
				Name: "echo", Image: EchoImage,
				Ports: []corev1.ContainerPort{
					{Name: "echo", ContainerPort: EchoPort, Protocol: corev1.ProtocolTCP},
					{Name: "echo-udp", ContainerPort: EchoPort, Protocol: corev1.ProtocolUDP},
					{Name: "http", ContainerPort: EchoHTTPPort, Protocol: corev1.ProtocolTCP},
				},
			}},
		},
	}
}

// RunPods creates pods and waits until the kubelets report them Running and Ready with an IP;
// it returns them as the API shows them then.
func (s *Sandbox) RunPods(ctx context.Context, pods ...*corev1.Pod) ([]*corev1.Pod, error) {
	cs := s.CP.Client
	for _, p := range pods {
		if _, err := cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("creating Pod %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	out := make([]*corev1.Pod, len(pods))
	for i, p := range pods {
		what := fmt.Sprintf("the kubelet on %s to run Pod %s/%s (Ready, with an IP)", p.Spec.NodeName, p.Namespace, p.Name)
		err := Poll(ctx, 2*time.Minute, what, func(ctx context.Context) (bool, string, error) {
			got, err := cs.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			out[i] = got
			if got.Status.PodIP == "" || !podReady(got) {
				return false, fmt.Sprintf("phase %q, podIP %q", got.Status.Phase, got.Status.PodIP), nil
			}
			return true, "", nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// DeletePod deletes a Pod and waits until the object is gone (the kubelet removed its network).
func (s *Sandbox) DeletePod(ctx context.Context, namespace, name string) error {
	cs := s.CP.Client
	if err := cs.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting Pod %s/%s: %w", namespace, name, err)
	}
	return Poll(ctx, time.Minute, "the kubelet to finish deleting Pod "+namespace+"/"+name, func(ctx context.Context) (bool, string, error) {
		_, err := cs.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, err.Error(), nil
		}
		return false, "the Pod object still exists", nil
	})
}

// PodNetNS returns the network namespace of a running pod: where a test acts as that pod.
func (s *Sandbox) PodNetNS(pod *corev1.Pod) (*NetNS, error) {
	for _, n := range s.Nodes {
		if n.Name == pod.Spec.NodeName && n.Kubelet != nil {
			if ns := n.Kubelet.PodNetNS(pod.Namespace, pod.Name); ns != nil {
				return ns, nil
			}
		}
	}
	return nil, fmt.Errorf("pod %s/%s is not running on node %q", pod.Namespace, pod.Name, pod.Spec.NodeName)
}

// NodeByName returns the sandbox node called name, or nil.
func (s *Sandbox) NodeByName(name string) *Node {
	for _, n := range s.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// WaitEndpoints waits until the Service's EndpointSlices list exactly ips as ready endpoints.
func (s *Sandbox) WaitEndpoints(ctx context.Context, namespace, service string, ips ...string) error {
	want := append([]string(nil), ips...)
	sort.Strings(want)
	what := fmt.Sprintf("the endpointslice controller to list %v as the ready endpoints of Service %s/%s", want, namespace, service)
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: service}).String()
	return Poll(ctx, time.Minute, what, func(ctx context.Context) (bool, string, error) {
		list, err := s.CP.Client.DiscoveryV1().EndpointSlices(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return false, err.Error(), nil
		}
		var got []string
		for _, sl := range list.Items {
			for _, ep := range sl.Endpoints {
				if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
					got = append(got, ep.Addresses...)
				}
			}
		}
		sort.Strings(got)
		return strings.Join(got, ",") == strings.Join(want, ","), fmt.Sprintf("ready endpoints %v", got), nil
	})
}

// SetLBIngress sets the Service's status.loadBalancer.ingress to one IP with mode (as a
// LoadBalancer controller would) and returns when the API has it.
func (s *Sandbox) SetLBIngress(ctx context.Context, namespace, name string, ip netip.Addr, mode corev1.LoadBalancerIPMode) error {
	return s.SetLBIngresses(ctx, namespace, name, mode, ip)
}

// SetLBIngresses is SetLBIngress with one ingress per IP of ips (a dual-stack Service's), all
// with mode.
func (s *Sandbox) SetLBIngresses(ctx context.Context, namespace, name string, mode corev1.LoadBalancerIPMode, ips ...netip.Addr) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		svc, err := s.CP.Client.CoreV1().Services(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		svc.Status.LoadBalancer.Ingress = nil
		for _, ip := range ips {
			m := mode
			svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip.String(), IPMode: &m})
		}
		_, err = s.CP.Client.CoreV1().Services(namespace).UpdateStatus(ctx, svc, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("setting the LoadBalancer ingress of Service %s/%s to %v (%s): %w", namespace, name, ips, mode, err)
		}
		return nil
	})
}

// WaitProgrammed waits until every node agent's servicemap shows the Service and cond holds for
// its rows; what describes cond for the failure message.
func (s *Sandbox) WaitProgrammed(ctx context.Context, namespace, name, what string, cond func(rows []apiv1.ServicePort) (bool, string)) error {
	return s.WaitProgrammedWithin(ctx, time.Minute, namespace, name, what, cond)
}

// WaitProgrammedWithin is WaitProgrammed waiting at most timeout.
func (s *Sandbox) WaitProgrammedWithin(ctx context.Context, timeout time.Duration, namespace, name, what string, cond func(rows []apiv1.ServicePort) (bool, string)) error {
	return Poll(ctx, timeout, fmt.Sprintf("every node agent to program Service %s/%s %s", namespace, name, what),
		func(ctx context.Context) (bool, string, error) {
			for _, n := range s.Nodes {
				m, err := n.API.ServiceMap(ctx, namespace, "")
				if err != nil {
					if ctx.Err() != nil {
						return false, "", nil // keep what was seen before the deadline
					}
					return false, n.Name + ": " + err.Error(), nil
				}
				var rows []apiv1.ServicePort
				for _, it := range m.Items {
					if it.Name == name {
						rows = append(rows, it)
					}
				}
				if len(rows) == 0 {
					return false, n.Name + ": not in the servicemap", nil
				}
				if ok, why := cond(rows); !ok {
					return false, n.Name + ": " + why, nil
				}
			}
			return true, "", nil
		})
}

// LBProgrammed is a WaitProgrammed condition: ingress ip is (or is not) programmed on every row.
func LBProgrammed(ip netip.Addr, programmed bool) func(rows []apiv1.ServicePort) (bool, string) {
	return func(rows []apiv1.ServicePort) (bool, string) {
		for _, r := range rows {
			if !ofFamily(r, ip) {
				continue
			}
			found := false
			for _, in := range r.LoadBalancerIngress {
				if in.IP != ip.String() {
					continue
				}
				found = true
				if in.Programmed != programmed {
					return false, fmt.Sprintf("port %s ingress %s (ipMode %q) programmed=%v: %s", r.PortName, ip, in.IPMode, in.Programmed, in.Reason)
				}
			}
			if !found {
				return false, fmt.Sprintf("port %s has no ingress %s", r.PortName, ip)
			}
		}
		return true, ""
	}
}

// ofFamily reports whether row r is of ip's IP family: a row of the other family never carries
// ip (a row without a family, from an agent that does not report it, counts as either).
func ofFamily(r apiv1.ServicePort, ip netip.Addr) bool {
	return r.IPFamily == "" || (r.IPFamily == "IPv6") == ip.Is6()
}

// HasEndpoints is a WaitProgrammed condition: every row has n ready endpoints in its group.
func HasEndpoints(n int) func(rows []apiv1.ServicePort) (bool, string) {
	return func(rows []apiv1.ServicePort) (bool, string) {
		for _, r := range rows {
			if r.Buckets != n {
				return false, fmt.Sprintf("port %s has %d buckets", r.PortName, r.Buckets)
			}
		}
		return true, ""
	}
}

// LBIngressSeen is a WaitProgrammed condition: every row lists ingress ip with ipMode mode,
// whatever the agent decided about it.
func LBIngressSeen(ip netip.Addr, mode corev1.LoadBalancerIPMode) func(rows []apiv1.ServicePort) (bool, string) {
	return func(rows []apiv1.ServicePort) (bool, string) {
		for _, r := range rows {
			if !ofFamily(r, ip) {
				continue
			}
			found := false
			for _, in := range r.LoadBalancerIngress {
				if in.IP == ip.String() && in.IPMode == string(mode) {
					found = true
				}
			}
			if !found {
				return false, fmt.Sprintf("port %s has no ingress %s with ipMode %s: %+v", r.PortName, ip, mode, r.LoadBalancerIngress)
			}
		}
		return true, ""
	}
}

// WaitLBApplied waits until every node applied its decision about an ingress IP in full: the
// agent's servicemap reports programmed (the OVS flows), and the host sends ip's Service ports
// into OVS exactly when it is programmed (so that traffic from the node is not sent back into
// OVS for an address OVS no longer handles, nor routed out for one it does).
func (s *Sandbox) WaitLBApplied(ctx context.Context, namespace, name string, ip netip.Addr, programmed bool) error {
	if err := s.WaitProgrammed(ctx, namespace, name, fmt.Sprintf("with ingress %s programmed=%v", ip, programmed), LBProgrammed(ip, programmed)); err != nil {
		return err
	}
	what := fmt.Sprintf("every node to send %s's Service ports into OVS: %v", ip, programmed)
	return Poll(ctx, time.Minute, what, func(ctx context.Context) (bool, string, error) {
		for _, n := range s.Nodes {
			addrs, err := n.ServicePortAddrs()
			if err != nil {
				return false, err.Error(), nil
			}
			if addrs[ip.String()] != programmed {
				return false, fmt.Sprintf("%s: Service ports of %s marked into OVS=%v", n.Name, ip, addrs[ip.String()]), nil
			}
		}
		return true, "", nil
	})
}
