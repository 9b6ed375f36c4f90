//go:build bench

package bench

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// nftMonitor streams `nft monitor new rules` of one network namespace and keeps every rule
// added to a Service chain ("service-…") since it started, with the time it was read: one
// long-lived process whose cost is per added rule, not per ruleset size (a `nft list chain`
// poll every 5 ms parsed the whole table at 10k Services and contended with kube-proxy).
type nftMonitor struct {
	cmd  *exec.Cmd
	done chan struct{}

	mu    sync.Mutex
	rules map[string][]monitoredRule // by "<table> <chain>"
	err   error
}

// monitoredRule is one added rule as nft printed it.
type monitoredRule struct {
	At   time.Time
	Text string
}

// probeTable is the throw-away table startNFTMonitor adds to know that the monitor listens.
const probeTable = "bench-probe"

// startNFTMonitor starts the monitor in namespace ns and returns once it reports rule additions.
func startNFTMonitor(ns string) (*nftMonitor, error) {
	m := &nftMonitor{done: make(chan struct{}), rules: map[string][]monitoredRule{}}
	m.cmd = exec.Command("ip", "netns", "exec", ns, "nft", "monitor", "new", "rules")
	out, err := m.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := m.cmd.Start(); err != nil {
		return nil, fmt.Errorf("nft monitor in %s: %w", ns, err)
	}
	go m.read(out)
	// Add a rule to a table of our own until the monitor shows it, then drop the table.
	nft := func(cmds string) error {
		c := exec.Command("ip", "netns", "exec", ns, "nft", "-f", "-")
		c.Stdin = strings.NewReader(cmds)
		if b, err := c.CombinedOutput(); err != nil {
			return fmt.Errorf("nft in %s: %w: %s", ns, err, b)
		}
		return nil
	}
	add := fmt.Sprintf("add table ip %[1]s\nadd chain ip %[1]s service-probe\nadd rule ip %[1]s service-probe counter\n", probeTable)
	err = pollUntil(10*time.Second, 50*time.Millisecond, func() (bool, string) {
		if err := nft(add); err != nil {
			return false, err.Error()
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		return len(m.rules[probeTable+" service-probe"]) > 0, "the monitor did not show the probe rule"
	})
	if err == nil {
		err = nft("delete table ip " + probeTable + "\n")
	}
	if err != nil {
		m.stop()
		return nil, err
	}
	return m, nil
}

// read parses the monitor's lines ("add rule ip <table> <chain> <rule>") until it exits.
func (m *nftMonitor) read(r io.Reader) {
	defer close(m.done)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		at := time.Now()
		f := strings.SplitN(sc.Text(), " ", 6)
		if len(f) < 6 || f[0] != "add" || f[1] != "rule" || !strings.HasPrefix(f[4], "service-") {
			continue
		}
		m.mu.Lock()
		key := f[3] + " " + f[4]
		m.rules[key] = append(m.rules[key], monitoredRule{At: at, Text: f[5]})
		m.mu.Unlock()
	}
	m.mu.Lock()
	m.err = sc.Err()
	m.mu.Unlock()
}

// seen returns when a rule holding ip was added to chain of table, if one was.
func (m *nftMonitor) seen(table, chain, ip string) (time.Time, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.rules[table+" "+chain] {
		if hasIP(r.Text, ip) {
			return r.At, true, nil
		}
	}
	select {
	case <-m.done:
		return time.Time{}, false, fmt.Errorf("nft monitor exited: %v", m.err)
	default:
	}
	return time.Time{}, false, nil
}

// stop ends the monitor process (the one started here: `ip netns exec` execs nft in place).
func (m *nftMonitor) stop() {
	if m.cmd.Process != nil {
		_ = m.cmd.Process.Kill()
	}
	<-m.done
	_ = m.cmd.Wait()
}
