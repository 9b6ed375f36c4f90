package antctl

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/antrea-proxy/antrea-proxy/pkg/agent/apiserver/apiv1"
)

// none is what kubectl prints for an empty cell.
const none = "<none>"

func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 8, 3, ' ', 0) }

func row(tw io.Writer, cells ...string) {
	for i, c := range cells {
		if c == "" {
			cells[i] = none
		}
	}
	fmt.Fprintln(tw, strings.Join(cells, "\t"))
}

// printJSON writes obj as indented JSON, with <, > and & as they are (flows and traces hold
// "->" in set_field actions and NAT descriptions).
func printJSON(w io.Writer, obj any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "    ")
	return enc.Encode(obj)
}

func printYAML(w io.Writer, obj any) error {
	b, err := yaml.Marshal(obj)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// PrintServiceMap prints a servicemap as "table", "wide", "json" or "yaml". allNamespaces adds
// the NAMESPACE column, as in kubectl; now ages LAST-SYNC and the problem's times. The last
// column, PROBLEM, is "<none>" for a Service programmed as it asks; otherwise the reason and the
// retries (table), or everything including the OVS error or the conflicting Service (wide).
func PrintServiceMap(w io.Writer, m apiv1.ServiceMap, format string, allNamespaces bool, now time.Time) error {
	switch format {
	case "json":
		return printJSON(w, m)
	case "yaml":
		return printYAML(w, m)
	}
	wide := format == "wide"
	tw := newTable(w)
	header := []string{"NAME", "PORT(S)", "CLUSTER-IP", "NODEPORT", "EXTERNAL-IP", "LB-INGRESS", "ETP/ITP", "AFFINITY", "ENDPOINTS(T/L/R/S/TRM)", "GROUP", "FLOWS"}
	if allNamespaces {
		header = append([]string{"NAMESPACE"}, header...)
	}
	if wide {
		header = append(header, "EP-FLOWS", "COOKIE")
	}
	row(tw, append(header, "LAST-SYNC", "PROBLEM")...)
	for _, it := range m.Items {
		cells := []string{it.Name, portCell(it), strings.Join(it.ClusterIPs, ","), nodePortCell(it.NodePort),
			strings.Join(it.ExternalIPs, ","), lbIngressCell(it.LoadBalancerIngress),
			it.ExternalTrafficPolicy + "/" + it.InternalTrafficPolicy, affinityCell(it.SessionAffinity),
			endpointsCell(it.Endpoints), groupCell(it.GroupID), strconv.Itoa(it.Flows)}
		if allNamespaces {
			cells = append([]string{it.Namespace}, cells...)
		}
		if wide {
			cells = append(cells, strconv.Itoa(it.EndpointFlows), it.Cookie)
		}
		row(tw, append(cells, age(it.LastSync, now), problemCell(it.Problem, wide, now))...)
	}
	return tw.Flush()
}

// problemCell renders a Service's problem: "OVSRejected(retries=3, next in 8s)" in the table,
// "OVSRejected: <message> (since 5m, retries=3, next in 8s)" in wide output; "" without one.
func problemCell(p *apiv1.Problem, wide bool, now time.Time) string {
	if p == nil {
		return ""
	}
	var details []string
	if wide && p.Since != "" {
		details = append(details, "since "+age(p.Since, now))
	}
	if p.Retries > 0 {
		details = append(details, "retries="+strconv.Itoa(p.Retries))
	}
	if p.NextRetry != "" {
		if t, err := time.Parse(time.RFC3339, p.NextRetry); err == nil {
			details = append(details, "next in "+humanDuration(t.Sub(now)))
		}
	}
	s := p.Reason
	if wide && p.Message != "" {
		s += ": " + p.Message
	}
	if len(details) == 0 {
		return s
	}
	if wide {
		return s + " (" + strings.Join(details, ", ") + ")"
	}
	return s + "(" + strings.Join(details, ", ") + ")"
}

func portCell(it apiv1.ServicePort) string {
	p := fmt.Sprintf("%d/%s", it.Port, it.Protocol)
	if it.PortName != "" {
		p = it.PortName + ":" + p
	}
	return p
}

func nodePortCell(np uint16) string {
	if np == 0 {
		return ""
	}
	return strconv.Itoa(int(np))
}

func groupCell(id uint32) string {
	if id == 0 {
		return ""
	}
	return strconv.FormatUint(uint64(id), 10)
}

// lbIngressCell shows each ingress as "<ip or hostname>[(<ipMode>)]:<programmed | reason>", e.g.
// "172.18.0.100(VIP):programmed" or "172.18.0.101(Proxy):skipped: ipMode=Proxy". The reason is
// the agent's, verbatim.
func lbIngressCell(ings []apiv1.LBIngress) string {
	parts := make([]string, 0, len(ings))
	for _, ing := range ings {
		s := ing.IP
		if s == "" {
			s = ing.Hostname
		}
		if s == "" {
			s = "?"
		}
		if ing.IPMode != "" {
			s += "(" + ing.IPMode + ")"
		}
		if ing.Programmed {
			s += ":programmed"
		} else {
			s += ":" + ing.Reason
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ",")
}

func affinityCell(a apiv1.SessionAffinity) string {
	if a.Type == "ClientIP" {
		return fmt.Sprintf("ClientIP(%ds)", a.TimeoutSeconds)
	}
	return a.Type
}

func endpointsCell(e apiv1.EndpointCounts) string {
	return fmt.Sprintf("%d/%d/%d/%d/%d", e.Total, e.Local, e.Ready, e.Serving, e.Terminating)
}

// age renders an RFC 3339 time as kubectl renders ages ("42s", "5m3s", "7h", "3d").
func age(ts string, now time.Time) string {
	t, err := time.Parse(time.RFC3339, ts)
	if err != nil {
		return "<unknown>"
	}
	return humanDuration(now.Sub(t))
}

func humanDuration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int(d / time.Second)
	switch {
	case s < 120:
		return fmt.Sprintf("%ds", s)
	case s < 600:
		if s%60 == 0 {
			return fmt.Sprintf("%dm", s/60)
		}
		return fmt.Sprintf("%dm%ds", s/60, s%60)
	case s < 3*3600:
		return fmt.Sprintf("%dm", s/60)
	case s < 8*3600:
		if m := (s / 60) % 60; m != 0 {
			return fmt.Sprintf("%dh%dm", s/3600, m)
		}
		return fmt.Sprintf("%dh", s/3600)
	case s < 48*3600:
		return fmt.Sprintf("%dh", s/3600)
	}
	return fmt.Sprintf("%dd", s/86400)
}

// PrintOVSFlows prints the flows and groups of each Service as "text", "json" or "yaml".
func PrintOVSFlows(w io.Writer, f apiv1.OVSFlows, format string) error {
	switch format {
	case "json":
		return printJSON(w, f)
	case "yaml":
		return printYAML(w, f)
	}
	for i, it := range f.Items {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "# Service %s/%s: %s, %s\n", it.Namespace, it.Name, plural(len(it.Flows), "flow"), plural(len(it.Groups), "group"))
		for _, l := range it.Flows {
			fmt.Fprintln(w, l)
		}
		for _, l := range it.Groups {
			fmt.Fprintln(w, l)
		}
	}
	return nil
}

// PrintAgentInfo prints the agent's information as "text", "json" or "yaml".
func PrintAgentInfo(w io.Writer, info apiv1.AgentInfo, format string, now time.Time) error {
	switch format {
	case "json":
		return printJSON(w, info)
	case "yaml":
		return printYAML(w, info)
	}
	tw := newTable(w)
	kv := func(k, v string) {
		if v == "" {
			v = none
		}
		fmt.Fprintf(tw, "%s:\t%s\n", k, v)
	}
	ap := info.AntreaProxy
	kv("Node", info.NodeName)
	kv("Agent version", info.Version)
	kv("OVS bridge", fmt.Sprintf("%s (datapath %s)", info.OVSBridge, info.OVSDatapathType))
	kv("OVS version", info.OVS.Version)
	kv("OVS connected", strconv.FormatBool(info.OVS.Connected))
	kv("API socket", info.APISocket)
	kv("API TCP address", info.APITCPAddress)
	kv("AntreaProxy enabled", strconv.FormatBool(ap.Enabled))
	kv("  proxyAll", strconv.FormatBool(ap.ProxyAll))
	kv("  proxyLoadBalancerIPs", strconv.FormatBool(ap.ProxyLoadBalancerIPs))
	kv("  nodePortAddresses", strings.Join(ap.NodePortAddresses, ","))
	kv("  skipServices", strings.Join(ap.SkipServices, ","))
	kv("  serviceProxyName", ap.ServiceProxyName)
	kv("  minSyncInterval", ap.MinSyncInterval)
	kv("  fullSyncPeriod", ap.FullSyncPeriod)
	last := info.Sync.LastSync
	if last != "" {
		last += " (" + age(last, now) + " ago)"
	}
	kv("Last sync", last)
	kv("Last sync error", info.Sync.LastError)
	kv("Syncs", strconv.Itoa(info.Sync.Syncs))
	kv("Flow round", strconv.Itoa(int(info.Sync.Round)))
	kv("Services", fmt.Sprintf("%d (%d ports)", info.Services, info.ServicePorts))
	return tw.Flush()
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
