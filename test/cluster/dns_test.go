//go:build cluster

package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/antrea-proxy/antrea-proxy/test/e2e/framework"
)

// checkClusterDNS checks the cluster DNS from the client Pod: its only nameserver is the kube-dns
// ClusterIP, and the names kubernetes.default.svc and the echo Service's (short and full) resolve
// to their ClusterIPs over UDP and over TCP (glibc's use-vc option), each query reaching CoreDNS
// through that ClusterIP, that is through antrea-agent. CoreDNS's query log shows the TCP queries
// arrived as TCP.
func checkClusterDNS(t *testing.T, c *Cluster, echoIP string) {
	dnsIP := dnsServiceIP(c.KubernetesIP).String()
	resolv, err := c.Exec(DemoNamespace, "client", "", "cat", "/etc/resolv.conf")
	if err != nil {
		t.Fatal(err)
	}
	if ns := nameservers(resolv); len(ns) != 1 || ns[0] != dnsIP {
		t.Fatalf("the client Pod's nameservers are %v, want only the kube-dns ClusterIP %s; /etc/resolv.conf:\n%s", ns, dnsIP, resolv)
	}
	names := map[string]string{
		"kubernetes.default.svc": c.KubernetesIP.String(),
		"echo":                   echoIP,
		"echo." + DemoNamespace + ".svc." + clusterDomain: echoIP,
	}
	start := time.Now()
	for _, transport := range []string{"udp", "tcp"} {
		for name, want := range names {
			resolveUntil(t, c, transport, name, want)
		}
	}
	t.Logf("the client Pod resolves %d names through kube-dns %s over UDP and TCP (%v)", len(names), dnsIP, time.Since(start).Round(time.Millisecond))
	waitDNSLog(t, c, `"A IN kubernetes.default.svc.`+clusterDomain+`. tcp `)
}

// nameservers lists the nameserver lines of a resolv.conf.
func nameservers(resolv string) []string {
	var ns []string
	for _, l := range strings.Split(resolv, "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "nameserver" {
			ns = append(ns, f[1])
		}
	}
	return ns
}

// resolveUntil polls `getent ahostsv4 name` in the client Pod until it answers want; over TCP
// with RES_OPTIONS=use-vc. The first queries may fail while CoreDNS starts.
func resolveUntil(t *testing.T, c *Cluster, transport, name, want string) {
	cmd := []string{"getent", "ahostsv4", name}
	if transport == "tcp" {
		cmd = append([]string{"env", "RES_OPTIONS=use-vc"}, cmd...)
	}
	framework.WaitFor(t, 2*time.Minute, fmt.Sprintf("the client Pod to resolve %s over %s to %s", name, transport, want), func(ctx context.Context) (bool, string, error) {
		out, err := c.Exec(DemoNamespace, "client", "", cmd...)
		if err != nil {
			return false, err.Error() + "; " + c.podSummary(ctx, "k8s-app="+dnsName), nil
		}
		f := strings.Fields(out)
		return len(f) > 0 && f[0] == want, out, nil
	})
}

// waitDNSLog waits until a CoreDNS Pod's log has a line containing want.
func waitDNSLog(t *testing.T, c *Cluster, want string) {
	framework.WaitFor(t, time.Minute, "CoreDNS to log "+want, func(ctx context.Context) (bool, string, error) {
		pods, err := c.CP.Client.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=" + dnsName})
		if err != nil {
			return false, err.Error(), nil
		}
		var last string
		for _, p := range pods.Items {
			b, err := c.CP.Client.CoreV1().Pods(Namespace).GetLogs(p.Name, &corev1.PodLogOptions{}).Do(ctx).Raw()
			if err != nil {
				last = err.Error()
				continue
			}
			for _, l := range strings.Split(string(b), "\n") {
				if strings.Contains(l, want) {
					t.Logf("CoreDNS %s: %s", p.Name, l)
					return true, "", nil
				}
			}
			last = tail(b, 5)
		}
		return false, last, nil
	})
}
