//go:build cluster

package cluster

import (
	"context"
	"net/netip"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// The cluster DNS: CoreDNS (hack/tools/coredns, the coredns image) as the kube-dns Service in
// kube-system, the name kubeadm gives it and upstream tests look up.
const (
	dnsName       = "kube-dns"
	clusterDomain = "cluster.local"
)

// corefile serves cluster.local and the reverse zones from the kubernetes plugin and nothing
// else: there is no forward plugin, so a name outside the cluster gets SERVFAIL instead of a
// query to a server outside the machine. log records every query (the suite checks that TCP
// queries arrive); hosts answers from the Pod's /etc/hosts first.
const corefile = `.:53 {
    errors
    log
    health {
        lameduck 5s
    }
    ready
    hosts {
        fallthrough
    }
    kubernetes ` + clusterDomain + ` in-addr.arpa ip6.arpa {
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }
    prometheus :9153
    cache 30
    reload
    loadbalance
}
`

// dnsServiceIP is the kube-dns ClusterIP: the tenth address of the Service range, as kubeadm
// picks it (the kubernetes Service has the first).
func dnsServiceIP(kubernetesIP netip.Addr) netip.Addr {
	a := kubernetesIP.As4()
	a[3] = 10
	return netip.AddrFrom4(a)
}

// dnsObjects are the ServiceAccount, RBAC, Corefile ConfigMap, Service and Deployment of the
// cluster DNS.
func dnsObjects(image string, ip netip.Addr) (*corev1.ServiceAccount, *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding, *corev1.ConfigMap, *corev1.Service, *appsv1.Deployment) {
	meta := metav1.ObjectMeta{Name: "coredns", Namespace: Namespace}
	labels := map[string]string{"k8s-app": dnsName}
	sa := &corev1.ServiceAccount{ObjectMeta: meta}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: Namespace}},
	}
	cm := &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"Corefile": corefile}}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: dnsName, Namespace: Namespace, Labels: labels},
		Spec: corev1.ServiceSpec{
			Selector:  labels,
			ClusterIP: ip.String(),
			Ports: []corev1.ServicePort{
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
				{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)},
				{Name: "metrics", Port: 9153, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(9153)},
			},
		},
	}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "coredns", Namespace: Namespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       dnsPodSpec(image, sa.Name, cm.Name),
			},
		},
	}
	return sa, role, binding, cm, svc, dep
}

func dnsPodSpec(image, serviceAccount, configMap string) corev1.PodSpec {
	probe := func(path string, port int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(port)}},
			PeriodSeconds: 2, TimeoutSeconds: 2, FailureThreshold: 5,
		}
	}
	return corev1.PodSpec{
		ServiceAccountName: serviceAccount,
		PriorityClassName:  "system-cluster-critical",
		// Default: CoreDNS itself must not resolve through kube-dns.
		DNSPolicy: corev1.DNSDefault,
		Containers: []corev1.Container{{
			Name: "coredns", Image: image, ImagePullPolicy: corev1.PullNever,
			Args: []string{"-conf", "/etc/coredns/Corefile"},
			Ports: []corev1.ContainerPort{
				{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP},
				{Name: "dns-tcp", ContainerPort: 53, Protocol: corev1.ProtocolTCP},
				{Name: "metrics", ContainerPort: 9153, Protocol: corev1.ProtocolTCP},
			},
			VolumeMounts:   []corev1.VolumeMount{{Name: "config", MountPath: "/etc/coredns", ReadOnly: true}},
			LivenessProbe:  probe("/health", 8080),
			ReadinessProbe: probe("/ready", 8181),
		}},
		Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: configMap}},
		}}},
	}
}

// installDNS creates the cluster DNS objects. Its Pod starts once the chart's CNI is installed;
// every Pod with the ClusterFirst DNS policy resolves through the kube-dns ClusterIP, that is
// through antrea-agent.
func (c *Cluster) installDNS(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	cs := c.CP.Client
	sa, role, binding, cm, svc, dep := dnsObjects(c.Images["coredns"], dnsServiceIP(c.KubernetesIP))
	var err error
	if _, err = cs.CoreV1().ServiceAccounts(Namespace).Create(ctx, sa, metav1.CreateOptions{}); err == nil {
		_, err = cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
	}
	if err == nil {
		_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})
	}
	if err == nil {
		_, err = cs.CoreV1().ConfigMaps(Namespace).Create(ctx, cm, metav1.CreateOptions{})
	}
	if err == nil {
		_, err = cs.CoreV1().Services(Namespace).Create(ctx, svc, metav1.CreateOptions{})
	}
	if err == nil {
		_, err = cs.AppsV1().Deployments(Namespace).Create(ctx, dep, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatalf("cluster DNS: %v", err)
	}
}
