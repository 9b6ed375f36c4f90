package framework

import (
	"bufio"
	"context"
	"strconv"
	"strings"
)

// MetricValue returns the value of the first sample of name (with any labels) in a Prometheus
// text exposition: the end-to-end tests' and the scale benchmark's reads of /metrics.
func MetricValue(exposition, name string) (float64, bool) {
	sc := bufio.NewScanner(strings.NewReader(exposition))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		metric := f[0]
		if i := strings.IndexByte(metric, '{'); i >= 0 {
			metric = metric[:i]
		}
		if metric != name {
			continue
		}
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			continue
		}
		return v, true
	}
	return 0, false
}

// agentMetricsURL is where a sandbox node's agent serves /metrics inside the node's network
// namespace (the agent's default address).
const agentMetricsURL = "http://127.0.0.1:10249/metrics"

// AgentMetrics returns the text exposition of n's agent's /metrics.
func (n *Node) AgentMetrics(ctx context.Context) (string, error) {
	body, err := n.NS.HTTPGet(ctx, agentMetricsURL)
	return string(body), err
}
