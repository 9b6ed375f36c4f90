package framework

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	types100 "github.com/containernetworking/cni/pkg/types/100"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
)

// CNI settings the kubelet stand-in uses, as a container runtime configured with the conflist
// documented in cmd/antrea-cni would.
const (
	cniVersion = "1.1.0"
	cniNetwork = "antrea"
	cniIfName  = "eth0"
)

// Kubelet is a node's kubelet stand-in. For every Pod bound to its node it creates the pod's
// network namespace, connects it (its podNetwork: on an antrea node the real antrea-cni binary,
// called as a container runtime does, with the CNI_* environment and the network configuration
// on stdin; on a kube-proxy node a veth on the node's Linux bridge), starts the e2e echo server
// inside the namespace, and writes the Pod's status (IPs, Ready, Running). When the Pod is
// deleted it disconnects it (CNI DEL), stops the server, deletes the namespace and removes the
// Pod object.
type Kubelet struct {
	node   *Node
	client kubernetes.Interface
	lister corelisters.PodLister
	queue  workqueue.TypedRateLimitingInterface[string]
	log    *os.File
	net    podNetwork
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	pods map[string]*podRuntime // by namespace/name
	seq  int
}

// podRuntime is what the kubelet runs for one Pod.
type podRuntime struct {
	uid         types.UID
	ns          *NetNS
	containerID string
	proc        *process
	result      json.RawMessage // the CNI ADD result, the prevResult of DEL
	ips         []string
	hostIf      string // the node side of a bridge pod's veth
}

// startKubelet starts the node's kubelet; it runs until stop.
func (n *Node) startKubelet() error {
	logFile, err := os.OpenFile(filepath.Join(n.s.CP.LogDir, "kubelet-"+n.Name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("node %s: opening the kubelet log: %w", n.Name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	k := &Kubelet{
		node: n, client: n.s.CP.Client, log: logFile, cancel: cancel, pods: map[string]*podRuntime{},
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 3*time.Second)),
	}
	k.net = antreaCNI{k: k}
	if n.Proxy == ProxyKubeProxy {
		k.net = bridgeNetwork{node: n}
	}
	factory := informers.NewSharedInformerFactoryWithOptions(k.client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", n.Name).String()
	}))
	inf := factory.Core().V1().Pods()
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			k.queue.Add(key)
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }, DeleteFunc: enqueue,
	}); err != nil {
		cancel()
		return err
	}
	k.lister = inf.Lister()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
		cancel()
		return fmt.Errorf("node %s: the kubelet's Pod cache did not sync", n.Name)
	}
	for i := 0; i < 4; i++ {
		k.wg.Add(1)
		go func() {
			defer k.wg.Done()
			for k.processNext(ctx) {
			}
		}()
	}
	n.Kubelet = k
	k.logf("kubelet started for node %s (podCIDR %s)", n.Name, n.PodCIDR)
	return nil
}

func (k *Kubelet) logf(format string, args ...any) {
	fmt.Fprintf(k.log, "%s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

func (k *Kubelet) processNext(ctx context.Context) bool {
	key, quit := k.queue.Get()
	if quit {
		return false
	}
	defer k.queue.Done(key)
	if err := k.sync(ctx, key); err != nil {
		k.logf("pod %s: %v (retrying)", key, err)
		k.queue.AddRateLimited(key)
		return true
	}
	k.queue.Forget(key)
	return true
}

// sync brings one Pod's runtime in line with its object.
func (k *Kubelet) sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pod, err := k.lister.Pods(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return k.teardown(key)
	}
	if err != nil {
		return err
	}
	k.mu.Lock()
	rt := k.pods[key]
	k.mu.Unlock()
	if rt != nil && rt.uid != pod.UID {
		if err := k.teardown(key); err != nil {
			return err
		}
		rt = nil
	}
	if pod.DeletionTimestamp != nil {
		if err := k.teardown(key); err != nil {
			return err
		}
		// The runtime is gone: finish the graceful deletion, as the kubelet does.
		err := k.client.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{
			GracePeriodSeconds: new(int64), Preconditions: &metav1.Preconditions{UID: &pod.UID},
		})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting the Pod object: %w", err)
		}
		k.logf("pod %s deleted", key)
		return nil
	}
	if rt == nil {
		if rt, err = k.setup(ctx, pod); err != nil {
			return err
		}
	}
	if isReadyWith(pod, rt.ips) {
		return nil
	}
	return k.writeStatus(ctx, pod, rt)
}

// setup creates the pod's namespace, connects it (CNI ADD) and starts the echo server.
func (k *Kubelet) setup(ctx context.Context, pod *corev1.Pod) (*podRuntime, error) {
	key := pod.Namespace + "/" + pod.Name
	k.mu.Lock()
	k.seq++
	seq := k.seq
	k.mu.Unlock()
	ns, err := k.node.s.newNS(fmt.Sprintf("%sp%d", strings.TrimPrefix(k.node.Name, "node"), seq)) // "1p2": node1's 2nd pod
	if err != nil {
		return nil, err
	}
	rt := &podRuntime{uid: pod.UID, ns: ns, containerID: "e2e-" + string(pod.UID)}
	fail := func(err error) (*podRuntime, error) {
		_ = k.net.del(pod, rt)
		if rt.proc != nil {
			rt.proc.Stop()
		}
		_ = deleteNetNS(ns.Name)
		return nil, err
	}
	if rt.ips, err = k.net.add(pod, rt, seq); err != nil {
		return fail(err)
	}
	port, httpPort := echoPorts(pod)
	rt.proc, err = k.node.s.startInNS(fmt.Sprintf("pod-%s-%s", pod.Namespace, pod.Name), ns, filepath.Join(k.node.s.Bins.Dir, "echoserver"),
		"-name", pod.Name, "-port", strconv.Itoa(port), "-http-port", strconv.Itoa(httpPort))
	if err != nil {
		return fail(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if err := waitReady(rt.proc, 30*time.Second, "the echo server of pod "+key+" to answer on "+addr, func(ctx context.Context) (bool, string) {
		if _, err := ns.Echo(ctx, "tcp", addr, time.Second); err != nil {
			return false, err.Error()
		}
		return true, ""
	}); err != nil {
		return fail(err)
	}
	k.mu.Lock()
	k.pods[key] = rt
	k.mu.Unlock()
	k.logf("pod %s running in netns %s with IPs %v", key, ns.Name, rt.ips)
	return rt, nil
}

// echoPorts returns the pod's echo port (its first TCP container port) and HTTP port (the
// container port named "http"), defaulting to EchoPort and EchoHTTPPort.
func echoPorts(pod *corev1.Pod) (port, httpPort int) {
	port, httpPort = EchoPort, EchoHTTPPort
	tcpSeen := false
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			switch {
			case p.Name == "http":
				httpPort = int(p.ContainerPort)
			case !tcpSeen && (p.Protocol == corev1.ProtocolTCP || p.Protocol == ""):
				port, tcpSeen = int(p.ContainerPort), true
			}
		}
	}
	return port, httpPort
}

// teardown undoes setup for key, if it ran: disconnect (CNI DEL), stop the server, delete the
// namespace.
func (k *Kubelet) teardown(key string) error {
	k.mu.Lock()
	rt := k.pods[key]
	k.mu.Unlock()
	if rt == nil {
		return nil
	}
	namespace, name, _ := cache.SplitMetaNamespaceKey(key)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: rt.uid}}
	if err := k.net.del(pod, rt); err != nil {
		return err
	}
	rt.proc.Stop()
	if err := deleteNetNS(rt.ns.Name); err != nil {
		return err
	}
	k.mu.Lock()
	delete(k.pods, key)
	k.mu.Unlock()
	k.logf("pod %s torn down", key)
	return nil
}

// cniAdd runs CNI ADD and returns the pod's IPs; the result is kept for DEL.
func (k *Kubelet) cniAdd(pod *corev1.Pod, rt *podRuntime) ([]string, error) {
	out, err := k.cniOut("ADD", pod, rt)
	if err != nil {
		return nil, err
	}
	var res types100.Result
	if err := json.Unmarshal(out, &res); err != nil {
		return nil, fmt.Errorf("CNI ADD result %q: %w", out, err)
	}
	var ips []string
	for _, ip := range res.IPs {
		ips = append(ips, ip.Address.IP.String())
	}
	if len(ips) == 0 {
		return nil, fmt.Errorf("CNI ADD returned no IP: %s", out)
	}
	rt.result = out
	return ips, nil
}

func (k *Kubelet) cni(cmd string, pod *corev1.Pod, rt *podRuntime) error {
	_, err := k.cniOut(cmd, pod, rt)
	return err
}

// cniOut runs the antrea-cni binary in the node's namespace, as a container runtime does.
func (k *Kubelet) cniOut(cmd string, pod *corev1.Pod, rt *podRuntime) ([]byte, error) {
	conf := map[string]any{
		"cniVersion":  cniVersion,
		"name":        cniNetwork,
		"type":        "antrea-cni",
		"socketPath":  k.node.agentConf.NodeNetwork.CNISocket,
		"delSpoolDir": k.node.agentConf.NodeNetwork.CNIDelSpoolDir,
	}
	if cmd == "DEL" && rt.result != nil {
		conf["prevResult"] = rt.result
	}
	stdin, err := json.Marshal(conf)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, "ip", "netns", "exec", k.node.NS.Name, filepath.Join(k.node.s.Bins.Dir, "antrea-cni"))
	c.Env = append(os.Environ(),
		"CNI_COMMAND="+cmd,
		"CNI_CONTAINERID="+rt.containerID,
		"CNI_NETNS="+rt.ns.Path(),
		"CNI_IFNAME="+cniIfName,
		"CNI_PATH="+k.node.s.Bins.Dir,
		fmt.Sprintf("CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE=%s;K8S_POD_NAME=%s;K8S_POD_INFRA_CONTAINER_ID=%s;K8S_POD_UID=%s",
			pod.Namespace, pod.Name, rt.containerID, pod.UID),
	)
	c.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	err = c.Run()
	k.logf("CNI %s pod %s/%s container %s: exit %v: %s %s", cmd, pod.Namespace, pod.Name, rt.containerID, err,
		strings.TrimSpace(stdout.String()), strings.TrimSpace(stderr.String()))
	if err != nil {
		return nil, fmt.Errorf("CNI %s of pod %s/%s failed: %w: %s %s", cmd, pod.Namespace, pod.Name, err,
			strings.TrimSpace(stdout.String()), strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// isReadyWith reports whether the Pod's status already says Running, Ready, with ips.
func isReadyWith(pod *corev1.Pod, ips []string) bool {
	if pod.Status.Phase != corev1.PodRunning || len(pod.Status.PodIPs) != len(ips) {
		return false
	}
	for i, ip := range ips {
		if pod.Status.PodIPs[i].IP != ip {
			return false
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// writeStatus records the running pod: IPs, phase Running, Ready.
func (k *Kubelet) writeStatus(ctx context.Context, pod *corev1.Pod, rt *podRuntime) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := k.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != rt.uid {
			return fmt.Errorf("pod %s/%s was replaced", pod.Namespace, pod.Name)
		}
		now := metav1.Now()
		st := &cur.Status
		st.Phase = corev1.PodRunning
		st.HostIP = k.node.IP.String()
		st.HostIPs = nil
		for _, ip := range k.node.HostIPs() {
			st.HostIPs = append(st.HostIPs, corev1.HostIP{IP: ip.String()})
		}
		st.PodIP = rt.ips[0]
		st.PodIPs = nil
		for _, ip := range rt.ips {
			st.PodIPs = append(st.PodIPs, corev1.PodIP{IP: ip})
		}
		if st.StartTime == nil {
			st.StartTime = &now
		}
		st.Conditions = nil
		for _, t := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
			st.Conditions = append(st.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
		}
		st.ContainerStatuses = nil
		for _, c := range cur.Spec.Containers {
			started := true
			st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
				Name: c.Name, Image: c.Image, ImageID: c.Image, ContainerID: "e2e://" + rt.containerID,
				Ready: true, Started: &started, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
			})
		}
		_, err = k.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

// stop ends the kubelet and tears down every pod it runs (CNI DEL included, while the agent is
// still up).
func (k *Kubelet) stop() {
	k.cancel()
	k.queue.ShutDown()
	k.wg.Wait()
	k.mu.Lock()
	keys := make([]string, 0, len(k.pods))
	for key := range k.pods {
		keys = append(keys, key)
	}
	k.mu.Unlock()
	for _, key := range keys {
		if err := k.teardown(key); err != nil {
			k.logf("stopping pod %s: %v", key, err)
			k.mu.Lock()
			rt := k.pods[key]
			delete(k.pods, key)
			k.mu.Unlock()
			rt.proc.Stop()
			_ = deleteNetNS(rt.ns.Name)
		}
	}
	k.logf("kubelet stopped")
	_ = k.log.Close()
}

// PodNetNS returns the network namespace of a running pod, or nil.
func (k *Kubelet) PodNetNS(namespace, name string) *NetNS {
	k.mu.Lock()
	defer k.mu.Unlock()
	if rt := k.pods[namespace+"/"+name]; rt != nil {
		return rt.ns
	}
	return nil
}
