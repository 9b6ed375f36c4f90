//go:build cluster

package cluster

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// Ports of the echo server (test/e2e/echoserver): one line per TCP connection, and HTTP.
const (
	echoTCPPort  = 8080
	echoHTTPPort = 8081
)

// DemoNamespace holds the workloads the suite and the demo create.
const DemoNamespace = "demo"

// CreateWorkloads creates the demo Namespace, an echo Deployment with one replica per node, a
// client Pod on the first node (the agent image: it has bash), the ClusterIP Service "echo" and
// the LoadBalancer Service "echo-lb".
func (c *Cluster) CreateWorkloads(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	cs := c.CP.Client
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: DemoNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "echo"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: DemoNamespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(len(c.Nodes))),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
						MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.DoNotSchedule,
						LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
					}},
					Containers: []corev1.Container{{
						Name: "echo", Image: c.Images["echoserver"], ImagePullPolicy: corev1.PullNever,
						Args: []string{"-name=$(POD_NAME)", fmt.Sprintf("-port=%d", echoTCPPort), fmt.Sprintf("-http-port=%d", echoHTTPPort)},
						Env: []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{
							FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
						Ports: []corev1.ContainerPort{{ContainerPort: echoTCPPort}, {ContainerPort: echoHTTPPort}},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(echoTCPPort)}},
							PeriodSeconds: 2,
						},
					}},
				},
			},
		},
	}
	client := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "client", Namespace: DemoNamespace},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"kubernetes.io/hostname": c.Nodes[0].Name},
			Containers: []corev1.Container{{
				Name: "client", Image: c.Images["antrea-agent"], ImagePullPolicy: corev1.PullNever,
				Command: []string{"sleep", "infinity"},
			}},
			TerminationGracePeriodSeconds: ptr.To(int64(1)),
		},
	}
	ports := []corev1.ServicePort{
		{Name: "tcp", Port: 80, TargetPort: intstr.FromInt32(echoTCPPort)},
		{Name: "http", Port: echoHTTPPort, TargetPort: intstr.FromInt32(echoHTTPPort)},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: DemoNamespace},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: ports},
	}
	lb := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "echo-lb", Namespace: DemoNamespace},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: labels, Ports: ports[:1]},
	}
	if _, err := cs.AppsV1().Deployments(DemoNamespace).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods(DemoNamespace).Create(ctx, client, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*corev1.Service{svc, lb} {
		if _, err := cs.CoreV1().Services(DemoNamespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// probeScript prints the first line the echo server sends on a new TCP connection to $1:$2.
const probeScript = `exec 3<>"/dev/tcp/$1/$2" && timeout 3 head -n1 <&3`

// Probe connects from the client Pod to ip:port and returns the answering echo Pod's reply.
func (c *Cluster) Probe(ip string, port int) (string, error) {
	return c.Exec(DemoNamespace, "client", "", "bash", "-c", probeScript, "probe", ip, fmt.Sprint(port))
}

// keepAliveScript keeps one HTTP connection to $1:$2 open and sends a request on it every
// second, printing "ok <n> <reply>" per answer; it prints "fail ..." and exits when one is missing.
// Each request is one write, hence one TCP segment (coreutils printf through env: its output
// to a socket is fully buffered and written at exit). bash's builtin printf may write it line by
// line, and with Nagle the second line waits for the ACK of the first, so a roll's data-path gap
// (5-15 s on netdev) could fall between them; the echo server then closes the connection when
// its 5 s ReadHeaderTimeout expires, which is the server's choice, not a data-path failure.
const keepAliveScript = `exec 3<>"/dev/tcp/$1/$2" || { echo "fail connect"; exit 1; }
req=$'GET / HTTP/1.1\r\nHost: echo\r\n\r\n'
i=0
while true; do
  env printf '%s' "$req" >&3
  read -r -t 60 status <&3 || { echo "fail $i status"; exit 1; }
  while read -r -t 60 line <&3; do line=${line%$'\r'}; [ -z "$line" ] && break; done
  read -r -t 60 body <&3 || { echo "fail $i body"; exit 1; }
  echo "ok $i $body"
  i=$((i+1))
  sleep 1
done`
